package sensitivewords

import (
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/width"
)

// Normalization turns a text into the form the matcher searches, and is applied identically to
// dictionary words and to checked texts, so that simple evasions still match:
//
//   - width folding (golang.org/x/text/width): full-width Latin letters, digits and
//     punctuation become their ASCII forms ("ｂｌｕｅｆｉｎ" → "bluefin"), half-width katakana
//     become full-width;
//   - Unicode full case folding (golang.org/x/text/cases), "BLUEFIN" → "bluefin",
//     "STRASSE"/"straße" → "strasse";
//   - removal of every space, punctuation mark, symbol, control and format character
//     (zero-width spaces and joiners, soft hyphens): "b l u e f i n", "B-L-U-E-F-I-N",
//     "测 试 词" and "blue\u200bfin" all become one run of letters.
//
// The last step also joins words across their boundaries: the entry "tangerine code" is
// searched as "tangerinecode", and "bluefin" matches inside "blue. Fin". That is the price of
// defeating spaced-out words; weights and the review threshold absorb it.

// normText is a text after normalization: the normalized runes as UTF-8, and for each byte of
// them the offset, in runes, of the original rune it came from. A rune of the original text may
// give none (it was removed) or several (full case folding: "ß" → "ss") normalized runes.
type normText struct {
	b    []byte
	orig []int32

	caser    cases.Caser
	hasCaser bool
}

// Normalize returns s in the normalized form the matcher searches (see above).
func Normalize(s string) string {
	var n normText
	n.normalize(s)
	return string(n.b)
}

// normalize replaces n's contents with the normalized form of s.
func (n *normText) normalize(s string) {
	n.b = n.b[:0]
	n.orig = n.orig[:0]
	var i int32 // rune offset of r in s
	for _, r := range s {
		if r < utf8.RuneSelf {
			n.addASCII(r, i)
		} else {
			n.addRune(r, i)
		}
		i++
	}
}

// addASCII keeps ASCII letters (lowercased) and digits; every other ASCII character is a space,
// punctuation, symbol or control character and is removed.
func (n *normText) addASCII(r rune, at int32) {
	switch {
	case 'a' <= r && r <= 'z', '0' <= r && r <= '9':
	case 'A' <= r && r <= 'Z':
		r += 'a' - 'A'
	default:
		return
	}
	n.b = append(n.b, byte(r))
	n.orig = append(n.orig, at)
}

func (n *normText) addRune(r rune, at int32) {
	if f := foldWidth(r); f != 0 {
		r = f
		if r < utf8.RuneSelf {
			n.addASCII(r, at)
			return
		}
	}
	if removed(r) {
		return
	}
	if unicode.SimpleFold(r) == r { // no case: Han, kana, most symbols of other scripts
		n.add(r, at)
		return
	}
	if !n.hasCaser {
		n.caser, n.hasCaser = cases.Fold(), true
	}
	for _, f := range n.caser.String(string(r)) {
		if !removed(f) {
			n.add(f, at)
		}
	}
}

func (n *normText) add(r rune, at int32) {
	before := len(n.b)
	n.b = utf8.AppendRune(n.b, r)
	for range len(n.b) - before {
		n.orig = append(n.orig, at)
	}
}

// foldWidth returns the width-folded form of r, or 0 when r has none.
func foldWidth(r rune) rune {
	return width.LookupRune(r).Folded()
}

// removed reports whether normalization drops r: spaces, punctuation, symbols, controls and
// format characters (Cf: zero-width space and joiners, soft hyphen, bidi marks).
func removed(r rune) bool {
	return unicode.IsSpace(r) || unicode.IsPunct(r) || unicode.IsSymbol(r) ||
		unicode.IsControl(r) || unicode.Is(unicode.Cf, r)
}

// span maps the normalized byte range [start, end) of a match back to the original text: the
// rune offset of its first rune (inclusive) and one past its last rune (exclusive).
func (n *normText) span(start, end int) (int, int) {
	return int(n.orig[start]), int(n.orig[end-1]) + 1
}
