package sensitivewords

import (
	"testing"
)

func TestNormalize(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"lower stays", "bluefin", "bluefin"},
		{"upper case", "BLUEFIN", "bluefin"},
		{"mixed case", "BlueFin", "bluefin"},
		{"spaced out", "b l u e f i n", "bluefin"},
		{"hyphenated", "B-L-U-E-F-I-N", "bluefin"},
		{"dots and underscores", "b.l_u*e!f?i#n", "bluefin"},
		{"full-width", "ｂｌｕｅｆｉｎ", "bluefin"},
		{"full-width upper", "ＢＬＵＥＦＩＮ", "bluefin"},
		{"full-width spaced with ideographic spaces", "Ｂ\u3000Ｌ\u3000ＵＥＦＩＮ", "bluefin"},
		{"zero-width space and soft hyphen", "blue\u200bf\u00adin", "bluefin"},
		{"tabs and newlines", "blue\tfin\r\n", "bluefin"},
		{"phrase loses its space", "Tangerine Code", "tangerinecode"},
		{"digits kept, full-width digits folded", "ｖ１ 2", "v12"},
		{"chinese unchanged", "测试词", "测试词"},
		{"chinese spaced", "测 试 词", "测试词"},
		{"chinese with full-width punctuation", "测，试！词。", "测试词"},
		{"half-width katakana widened", "ﾃｽﾄ", "テスト"},
		{"full case folding", "STRASSE straße", "strassestrasse"},
		{"greek sigma forms fold alike", "ΣΊΣΥΦΟΣ σίσυφος", "σίσυφοσσίσυφοσ"},
		{"kelvin sign folds to k", "\u212a", "k"},
		{"symbols removed", "a+b=c $5 ©", "abc5"},
		{"emoji removed", "blue🐟fin", "bluefin"},
		{"empty", "", ""},
		{"only punctuation", " -- !! ", ""},
		{"invalid utf-8 byte removed", "blue\xfffin", "bluefin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Normalize(tt.in); got != tt.want {
				t.Errorf("Normalize(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// TestNormalizeOffsets checks the map from normalized bytes back to original rune offsets.
func TestNormalizeOffsets(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []int32 // per normalized byte
	}{
		{"ascii with removals", "a-b c", []int32{0, 2, 4}},
		{"full-width", "ａ－ｂ", []int32{0, 2}},
		{"chinese: 3 bytes per rune", "测 试", []int32{0, 0, 0, 2, 2, 2}},
		{"ß folds to two runes of one original", "xßy", []int32{0, 1, 1, 2}},
		{"leading removed runes", "  ab", []int32{2, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var n normText
			n.normalize(tt.in)
			if len(n.orig) != len(n.b) {
				t.Fatalf("len(orig) = %d, len(b) = %d", len(n.orig), len(n.b))
			}
			if len(n.orig) != len(tt.want) {
				t.Fatalf("orig = %v, want %v", n.orig, tt.want)
			}
			for i := range tt.want {
				if n.orig[i] != tt.want[i] {
					t.Fatalf("orig = %v, want %v", n.orig, tt.want)
				}
			}
		})
	}
}

// TestNormalizeReuse: a reused buffer holds only the latest text.
func TestNormalizeReuse(t *testing.T) {
	var n normText
	n.normalize("ＬＯＮＧＥＲ　ＴＥＸＴ ß")
	n.normalize("Ab")
	if string(n.b) != "ab" || len(n.orig) != 2 || n.orig[1] != 1 {
		t.Fatalf("after reuse: b=%q orig=%v", n.b, n.orig)
	}
}
