package sensitivewords

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
)

func mustDict(t testing.TB, tsv string) *Dictionary {
	t.Helper()
	d, err := ParseDictionary(strings.NewReader(tsv), "test.tsv")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// hitText is a hit as the test writes it: the entry's word and the original substring.
type hitText struct {
	Word       string
	Start, End int
	Orig       string // the original text's runes [Start:End)
}

func describe(m *Matcher, text string, hits []Hit) []hitText {
	runes := []rune(text)
	out := make([]hitText, len(hits))
	for i, h := range hits {
		out[i] = hitText{Word: m.dict.Entries[h.Entry].Word, Start: h.Start, End: h.End, Orig: string(runes[h.Start:h.End])}
	}
	return out
}

const testDict = "bluefin\tdemo-fraud\t0.5\n" +
	"tangerine code\tdemo-fraud\t0.7\n" +
	"quasar\tdemo-spam\t0.4\n" +
	"velvet hammer\tdemo-violence\t0.8\n" +
	"he\tdemo-x\t0.1\n" +
	"she\tdemo-x\t0.1\n" +
	"hers\tdemo-x\t0.1\n" +
	"测试\tdemo-zh\t0.2\n" +
	"测试词\tdemo-zh\t0.5\n" +
	"试词\tdemo-zh\t0.2\n"

func TestMatcherFind(t *testing.T) {
	m := NewMatcher(mustDict(t, testDict))
	tests := []struct {
		name string
		text string
		want []hitText
	}{
		{"plain", "is bluefin now", []hitText{{"bluefin", 3, 10, "bluefin"}}},
		{"upper", "IS BLUEFIN NOW", []hitText{{"bluefin", 3, 10, "BLUEFIN"}}},
		{"spaced", "a b l u e f i n z", []hitText{{"bluefin", 2, 15, "b l u e f i n"}}},
		{"hyphens", "say B-L-U-E-F-I-N!", []hitText{{"bluefin", 4, 17, "B-L-U-E-F-I-N"}}},
		{"full-width", "ｘ ｂｌｕｅｆｉｎ ｙ", []hitText{{"bluefin", 2, 9, "ｂｌｕｅｆｉｎ"}}},
		{"zero-width space inside", "blue\u200bfin", []hitText{{"bluefin", 0, 8, "blue\u200bfin"}}},
		{"phrase", "our Tangerine-Code leaked", []hitText{{"tangerine code", 4, 18, "Tangerine-Code"}}},
		{"phrase with newline", "velvet\nhammer", []hitText{{"velvet hammer", 0, 13, "velvet\nhammer"}}},
		{"chinese", "这是测试词吗", []hitText{
			{"测试", 2, 4, "测试"}, {"测试词", 2, 5, "测试词"}, {"试词", 3, 5, "试词"},
		}},
		{"chinese spaced", "测 试 词", []hitText{
			{"测试", 0, 3, "测 试"}, {"测试词", 0, 5, "测 试 词"}, {"试词", 2, 5, "试 词"},
		}},
		{"chinese mixed with latin", "我的bluefin密码", []hitText{{"bluefin", 2, 9, "bluefin"}}},
		{"overlapping latin", "ushers", []hitText{
			{"she", 1, 4, "she"}, {"he", 2, 4, "he"}, {"hers", 2, 6, "hers"},
		}},
		{"same word twice", "bluefin or BlueFin", []hitText{
			{"bluefin", 0, 7, "bluefin"}, {"bluefin", 11, 18, "BlueFin"},
		}},
		{"across a word boundary (documented)", "true blue. Fin", []hitText{{"bluefin", 5, 14, "blue. Fin"}}},
		{"nothing", "an ordinary sentence", nil},
		{"empty", "", nil},
		{"only removed characters", " - ! ", nil},
		{"partial word", "bluefi", nil},
		{"letters between", "bluefxin", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := describe(m, tt.text, m.Find(tt.text))
			if !slices.Equal(got, tt.want) {
				t.Errorf("Find(%q)\n got %+v\nwant %+v", tt.text, got, tt.want)
			}
		})
	}
}

func TestMatcherCheck(t *testing.T) {
	m := NewMatcher(mustDict(t, testDict))
	th := Thresholds{Block: 0.9, Review: 0.4}
	tests := []struct {
		name     string
		text     string
		maxHits  int
		score    float64
		verdict  string
		cats     []string
		hitCount int
	}{
		{"none", "good day", 0, 0, VerdictAllow, []string{}, 0},
		{"one below review", "测试", 0, 0.2, VerdictAllow, []string{"demo-zh"}, 1},
		{"exactly review", "quasar", 0, 0.4, VerdictReview, []string{"demo-spam"}, 1},
		{"one review", "bluefin", 0, 0.5, VerdictReview, []string{"demo-fraud"}, 1},
		{"repeats count once", "bluefin bluefin BLUEFIN", 0, 0.5, VerdictReview, []string{"demo-fraud"}, 3},
		{"two combine", "bluefin and tangerine code", 0, 0.85, VerdictReview, []string{"demo-fraud"}, 2},
		// 1 − 0.5·0.2 = 0.9 exactly after rounding: on the block threshold.
		{"exactly block", "bluefin velvet hammer", 0, 0.9, VerdictBlock, []string{"demo-fraud", "demo-violence"}, 2},
		{"categories sorted and distinct", "velvet hammer quasar bluefin 测试词", 0,
			1 - 0.2*0.6*0.5*(0.8*0.5*0.8), VerdictBlock, []string{"demo-fraud", "demo-spam", "demo-violence", "demo-zh"}, 6},
		{"hits capped, score is not", "bluefin quasar velvet hammer", 1, 1 - 0.5*0.6*0.2, VerdictBlock,
			[]string{"demo-fraud", "demo-spam", "demo-violence"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := m.Check(tt.text, th, tt.maxHits)
			if diff := r.Score - tt.score; diff > 1e-6 || diff < -1e-6 {
				t.Errorf("score = %v, want %v", r.Score, tt.score)
			}
			if r.Verdict != tt.verdict {
				t.Errorf("verdict = %s, want %s", r.Verdict, tt.verdict)
			}
			if r.Categories == nil || !slices.Equal(r.Categories, tt.cats) {
				t.Errorf("categories = %#v, want %#v", r.Categories, tt.cats)
			}
			if len(r.Hits) != tt.hitCount {
				t.Errorf("%d hits, want %d", len(r.Hits), tt.hitCount)
			}
		})
	}
}

func TestThresholdsVerdict(t *testing.T) {
	th := Thresholds{Block: 0.9, Review: 0.4}
	tests := []struct {
		score float64
		want  string
	}{
		{0, VerdictAllow}, {0.399999, VerdictAllow}, {0.4, VerdictReview}, {0.899999, VerdictReview},
		{0.9, VerdictBlock}, {1, VerdictBlock},
	}
	for _, tt := range tests {
		if got := th.Verdict(tt.score); got != tt.want {
			t.Errorf("Verdict(%v) = %s, want %s", tt.score, got, tt.want)
		}
	}
	custom := Thresholds{Block: 0.5, Review: 0.5}
	if got := custom.Verdict(0.5); got != VerdictBlock {
		t.Errorf("equal thresholds: Verdict(0.5) = %s, want BLOCK", got)
	}
}

// TestMatcherAgainstBruteForce compares the automaton with a naive search on random
// dictionaries and texts over a small alphabet (so that overlaps and shared prefixes and
// suffixes abound), with removable characters sprinkled into the texts. It guards the
// library and the offset mapping alike.
func TestMatcherAgainstBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	letters := []rune("abA测试ｂ")
	noise := []rune(" -.\u200b，")
	for round := range 200 {
		var tsv strings.Builder
		nWords := 1 + rng.IntN(12)
		for i := range nWords {
			w := make([]rune, 1+rng.IntN(4))
			for j := range w {
				w[j] = letters[rng.IntN(len(letters))]
			}
			fmt.Fprintf(&tsv, "%s\tc%d\t0.%d\n", string(w), i%3, 1+rng.IntN(9))
		}
		d := mustDict(t, tsv.String())
		m := NewMatcher(d)
		for range 20 {
			text := make([]rune, rng.IntN(30))
			for j := range text {
				if rng.IntN(5) == 0 {
					text[j] = noise[rng.IntN(len(noise))]
				} else {
					text[j] = letters[rng.IntN(len(letters))]
				}
			}
			got := m.Find(string(text))
			want := bruteForce(d, text)
			if !slices.Equal(got, want) {
				t.Fatalf("round %d, dictionary %q, text %q:\n got %v\nwant %v", round, tsv.String(), string(text), got, want)
			}
		}
	}
}

// bruteForce normalizes text rune by rune (keeping each normalized rune's origin) and tries
// every entry at every position.
func bruteForce(d *Dictionary, text []rune) []Hit {
	var norm []rune
	var orig []int
	for i, r := range text {
		for _, nr := range Normalize(string(r)) {
			norm = append(norm, nr)
			orig = append(orig, i)
		}
	}
	var hits []Hit
	for e, entry := range d.Entries {
		key := []rune(entry.Key)
		for s := 0; s+len(key) <= len(norm); s++ {
			if slices.Equal(norm[s:s+len(key)], key) {
				hits = append(hits, Hit{Entry: e, Start: orig[s], End: orig[s+len(key)-1] + 1})
			}
		}
	}
	sort.Slice(hits, func(i, j int) bool {
		a, b := hits[i], hits[j]
		if a.Start != b.Start {
			return a.Start < b.Start
		}
		if a.End != b.End {
			return a.End < b.End
		}
		return a.Entry < b.Entry
	})
	return hits
}

// TestMatcherConcurrent: one matcher serves many goroutines (run with -race).
func TestMatcherConcurrent(t *testing.T) {
	m := NewMatcher(mustDict(t, testDict))
	done := make(chan []hitText)
	for range 16 {
		go func() {
			var last []hitText
			for range 200 {
				last = describe(m, "x B L U E F I N 测试词", m.Find("x B L U E F I N 测试词"))
			}
			done <- last
		}()
	}
	want := []hitText{{"bluefin", 2, 15, "B L U E F I N"}, {"测试", 16, 18, "测试"}, {"测试词", 16, 19, "测试词"}, {"试词", 17, 19, "试词"}}
	for range 16 {
		if got := <-done; !slices.Equal(got, want) {
			t.Fatalf("got %+v, want %+v", got, want)
		}
	}
}
