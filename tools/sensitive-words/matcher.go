package sensitivewords

import (
	"math"
	"sort"
	"sync"

	ahocorasick "github.com/petar-dambovaliev/aho-corasick"
)

// Verdicts, from the score and the thresholds (see Thresholds).
const (
	VerdictAllow  = "ALLOW"
	VerdictReview = "REVIEW"
	VerdictBlock  = "BLOCK"
)

// Thresholds turn a risk score into a verdict: BLOCK when score ≥ Block, REVIEW when
// score ≥ Review, else ALLOW. 0 < Review ≤ Block ≤ 1.
type Thresholds struct {
	Block  float64
	Review float64
}

// Verdict returns the verdict for score.
func (t Thresholds) Verdict(score float64) string {
	switch {
	case score >= t.Block:
		return VerdictBlock
	case score >= t.Review:
		return VerdictReview
	default:
		return VerdictAllow
	}
}

// Hit is one occurrence of a dictionary entry in a text.
type Hit struct {
	// Entry is the index of the matched entry in the matcher's Dictionary.Entries.
	Entry int
	// Start and End are rune offsets into the original (not normalized) text: Start of the
	// first rune of the occurrence, End one past its last rune. Characters that normalization
	// removed inside the occurrence ("b-l-u-e") are inside the span.
	Start, End int
}

// Result is the outcome of checking one text.
type Result struct {
	// Score is 1 − ∏(1 − weight) over the distinct entries found, rounded to 6 decimals;
	// 0 when nothing matched.
	Score float64
	// Verdict is Thresholds.Verdict(Score).
	Verdict string
	// Categories are the distinct categories of the entries found, sorted.
	Categories []string
	// Hits are the occurrences, ordered by Start, then End, then entry; overlapping
	// occurrences are all reported ("测试" and "测试词" in "测试词"). At most the maxHits given
	// to Check; Score and Categories always account for every occurrence.
	Hits []Hit
}

// dfaMaxEntries is the largest dictionary searched with a DFA; larger ones use the NFA. For
// 10k entries the DFA takes about 50 MiB and 0.5 s to build and searches 3–4× faster than the
// NFA (6 MiB, 40 ms); see BenchmarkMatcherFind. Past this size the memory, held twice during a
// reload, is not worth it.
const dfaMaxEntries = 20000

// Matcher finds a dictionary's entries in texts with one Aho–Corasick automaton over the
// normalized keys. It is immutable and safe for concurrent use; a reload builds a new one.
type Matcher struct {
	dict *Dictionary
	ac   ahocorasick.AhoCorasick
	bufs sync.Pool // *normText
}

// NewMatcher builds the automaton for d. d must not be changed afterwards.
func NewMatcher(d *Dictionary) *Matcher {
	keys := make([]string, len(d.Entries))
	for i, e := range d.Entries {
		keys[i] = e.Key
	}
	// StandardMatch is the only kind that reports overlapping matches.
	b := ahocorasick.NewAhoCorasickBuilder(ahocorasick.Opts{
		MatchKind: ahocorasick.StandardMatch,
		DFA:       len(keys) <= dfaMaxEntries,
	})
	return &Matcher{
		dict: d,
		ac:   b.Build(keys),
		bufs: sync.Pool{New: func() any { return new(normText) }},
	}
}

// Dictionary returns the dictionary the matcher searches for.
func (m *Matcher) Dictionary() *Dictionary { return m.dict }

// Find returns every occurrence of a dictionary entry in text (see Result.Hits for the order).
func (m *Matcher) Find(text string) []Hit {
	n := m.bufs.Get().(*normText)
	defer m.bufs.Put(n)
	n.normalize(text)
	if len(n.b) == 0 {
		return nil
	}
	var hits []Hit
	it := m.ac.IterOverlappingByte(n.b)
	for mt := it.Next(); mt != nil; mt = it.Next() {
		// Keys are valid UTF-8 and so is n.b, so a match starts and ends on rune boundaries.
		start, end := n.span(mt.Start(), mt.End())
		hits = append(hits, Hit{Entry: mt.Pattern(), Start: start, End: end})
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

// Check finds the entries in text and scores them; it keeps at most maxHits hits
// (maxHits ≤ 0: all).
func (m *Matcher) Check(text string, th Thresholds, maxHits int) Result {
	return m.Evaluate(m.Find(text), th, maxHits)
}

// Evaluate turns the hits Find returned into a Result, keeping at most maxHits of them
// (maxHits ≤ 0: all).
func (m *Matcher) Evaluate(hits []Hit, th Thresholds, maxHits int) Result {
	score := m.Score(hits)
	res := Result{Score: score, Verdict: th.Verdict(score), Categories: m.categories(hits), Hits: hits}
	if maxHits > 0 && len(res.Hits) > maxHits {
		res.Hits = res.Hits[:maxHits:maxHits]
	}
	return res
}

// Score is 1 − ∏(1 − weight) over the distinct entries among hits, rounded to 6 decimals
// (so that the score reported and the verdict taken from it agree); 0 for no hits. An entry
// found twice counts once: repetition does not make a text riskier than its words.
func (m *Matcher) Score(hits []Hit) float64 {
	if len(hits) == 0 {
		return 0
	}
	seen := make(map[int]struct{}, len(hits))
	keep := 1.0
	for _, h := range hits {
		if _, ok := seen[h.Entry]; ok {
			continue
		}
		seen[h.Entry] = struct{}{}
		keep *= 1 - m.dict.Entries[h.Entry].Weight
	}
	return math.Round((1-keep)*1e6) / 1e6
}

func (m *Matcher) categories(hits []Hit) []string {
	cats := []string{}
	for _, h := range hits {
		c := m.dict.Entries[h.Entry].Category
		if i := sort.SearchStrings(cats, c); i == len(cats) || cats[i] != c {
			cats = append(cats, "")
			copy(cats[i+1:], cats[i:])
			cats[i] = c
		}
	}
	return cats
}
