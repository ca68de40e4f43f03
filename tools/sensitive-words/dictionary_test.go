package sensitivewords

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/backflowhq/backflow/tools/loadgen"
)

const samplePath = "../../deploy/sensitive-words/sample.tsv"

func TestParseDictionary(t *testing.T) {
	d, err := ParseDictionary(strings.NewReader("\ufeff# comment\n\n  # indented comment\r\n"+
		"Blue Fin\tdemo-fraud\t0.5\r\n"+
		"  paper tiger \t demo-fraud \t 0.3 \n"+
		"测试词\tdemo-zh\t1\n"), "t.tsv")
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{
		{Word: "Blue Fin", Key: "bluefin", Category: "demo-fraud", Weight: 0.5},
		{Word: "paper tiger", Key: "papertiger", Category: "demo-fraud", Weight: 0.3},
		{Word: "测试词", Key: "测试词", Category: "demo-zh", Weight: 1},
	}
	if len(d.Entries) != len(want) {
		t.Fatalf("entries = %+v, want %+v", d.Entries, want)
	}
	for i := range want {
		if d.Entries[i] != want[i] {
			t.Errorf("entry %d = %+v, want %+v", i, d.Entries[i], want[i])
		}
	}
	if len(d.Version) != 12 {
		t.Errorf("version %q, want 12 hex digits", d.Version)
	}
}

func TestParseDictionaryErrors(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		wantLine int
		wantErr  error
		wantText string
	}{
		{"two fields", "# c\nbluefin\tdemo\n", 2, ErrDictionary, "2 tab-separated fields"},
		{"four fields", "a\tb\t0.5\textra\n", 1, ErrDictionary, "4 tab-separated fields"},
		{"spaces instead of tabs", "ok\tc\t0.5\n\nbluefin demo 0.5\n", 3, ErrDictionary, "1 tab-separated fields"},
		{"weight not a number", "bluefin\tdemo\theavy\n", 1, ErrDictionary, `weight "heavy"`},
		{"weight zero", "bluefin\tdemo\t0\n", 1, ErrDictionary, `weight "0"`},
		{"weight above one", "bluefin\tdemo\t1.01\n", 1, ErrDictionary, `weight "1.01"`},
		{"weight negative", "bluefin\tdemo\t-0.5\n", 1, ErrDictionary, `weight "-0.5"`},
		{"weight NaN", "bluefin\tdemo\tNaN\n", 1, ErrDictionary, `weight "NaN"`},
		{"word without letters", "a\tc\t0.1\n -- \tdemo\t0.5\n", 2, ErrDictionary, "no letters or digits"},
		{"empty category", "bluefin\t\t0.5\n", 1, ErrDictionary, "category"},
		{"category with a space", "bluefin\tdemo fraud\t0.5\n", 1, ErrDictionary, "category"},
		{"only comments", "# nothing\n\n", 0, ErrEmptyDictionary, "no entries"},
		{"empty file", "", 0, ErrEmptyDictionary, "no entries"},
		{"line too long", "a\tc\t0.1\n" + strings.Repeat("x", maxLineBytes+1) + "\tc\t0.5\n", 2, ErrDictionary, "longer than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseDictionary(strings.NewReader(tt.in), "bad.tsv")
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			de, ok := errors.AsType[*DictionaryError](err)
			if !ok {
				t.Fatalf("err %T is not a *DictionaryError", err)
			}
			if de.Line != tt.wantLine || de.Path != "bad.tsv" {
				t.Errorf("path %q line %d, want bad.tsv line %d", de.Path, de.Line, tt.wantLine)
			}
			if !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("err %q does not mention %q", err, tt.wantText)
			}
			if tt.wantLine > 0 && !strings.Contains(err.Error(), "line ") {
				t.Errorf("err %q does not name the line", err)
			}
		})
	}
}

// TestParseDictionaryDuplicates: spellings that normalize alike are one entry, the highest
// weight wins, the first on a tie.
func TestParseDictionaryDuplicates(t *testing.T) {
	d, err := ParseDictionary(strings.NewReader(
		"bluefin\tlow\t0.2\n"+
			"BLUE-FIN\thigh\t0.8\n"+
			"ｂｌｕｅｆｉｎ\tmid\t0.5\n"+
			"quasar\tfirst\t0.4\n"+
			"Q U A S A R\tsecond\t0.4\n"), "dup.tsv")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Entries) != 2 {
		t.Fatalf("entries = %+v, want 2", d.Entries)
	}
	if e := d.Entries[0]; e.Key != "bluefin" || e.Weight != 0.8 || e.Category != "high" || e.Word != "BLUE-FIN" {
		t.Errorf("bluefin entry = %+v, want the 0.8 one", e)
	}
	if e := d.Entries[1]; e.Key != "quasar" || e.Category != "first" {
		t.Errorf("quasar entry = %+v, want the first one on a tie", e)
	}
}

// TestDictionaryVersion: the version follows the normalized content only.
func TestDictionaryVersion(t *testing.T) {
	v := func(s string) string {
		t.Helper()
		d, err := ParseDictionary(strings.NewReader(s), "v.tsv")
		if err != nil {
			t.Fatal(err)
		}
		return d.Version
	}
	base := v("bluefin\ta\t0.5\nquasar\tb\t0.4\n")
	if got := v("# a comment\nQUASAR\tb\t0.4\n\nBlue Fin\ta\t0.50\n"); got != base {
		t.Errorf("reordered/commented/respelled version %s, want %s", got, base)
	}
	for _, changed := range []string{
		"bluefin\ta\t0.6\nquasar\tb\t0.4\n",
		"bluefin\tc\t0.5\nquasar\tb\t0.4\n",
		"bluefin\ta\t0.5\nquasar\tb\t0.4\nnightjar\tb\t0.4\n",
	} {
		if got := v(changed); got == base {
			t.Errorf("version of %q equals the base %s", changed, base)
		}
	}
}

func TestLoadDictionaryMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.tsv")
	_, err := LoadDictionary(path)
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), path) {
		t.Fatalf("err = %v, want not-exist naming %s", err, path)
	}
}

// TestSampleDictionaryHasLoadgenWords: the load generator plants loadgen.DefaultWords and the
// pipeline expects hits for them, so each must be an entry of the sample dictionary, spelled
// as loadgen spells it.
func TestSampleDictionaryHasLoadgenWords(t *testing.T) {
	d, err := LoadDictionary(samplePath)
	if err != nil {
		t.Fatal(err)
	}
	words := map[string]Entry{}
	for _, e := range d.Entries {
		words[e.Word] = e
	}
	for _, w := range loadgen.DefaultWords {
		if _, ok := words[w]; !ok {
			t.Errorf("loadgen word %q is not in %s", w, samplePath)
		}
	}
	// loadgen --words reads the same file by its first column.
	lw, err := loadgen.ReadWords(samplePath)
	if err != nil {
		t.Fatal(err)
	}
	if len(lw) != len(d.Entries) {
		t.Errorf("loadgen.ReadWords found %d words, the dictionary %d entries", len(lw), len(d.Entries))
	}
	cats := map[string]bool{}
	zh := 0
	for _, e := range d.Entries {
		cats[e.Category] = true
		if strings.ContainsFunc(e.Word, func(r rune) bool { return r >= 0x4e00 && r <= 0x9fff }) {
			zh++
		}
	}
	if len(cats) < 3 || len(cats) > 4 {
		t.Errorf("%d categories %v, want 3 or 4", len(cats), cats)
	}
	if zh < 2 {
		t.Errorf("%d Chinese entries, want at least 2", zh)
	}
}
