package sensitivewords

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
)

// benchText builds n bytes or so of prompt-like text: English filler with some Chinese, and
// in about one sentence in twenty a sample word, sometimes disguised as loadgen does.
func benchText(n int) string {
	rng := rand.New(rand.NewPCG(7, 7))
	filler := strings.Fields("please summarize the following report about quarterly sales and " +
		"explain how to configure a cluster with three nodes write short poem on autumn translate " +
		"this sentence into french what is difference between latency throughput list five ideas")
	zh := []string{"请总结以下报告", "数据流窗口查询", "模型结果很好", "谢谢"}
	planted := []string{"bluefin", "Q U A S A R", "ｎｉｇｈｔｊａｒ", "TANGERINE CODE", "测试词"}
	var b strings.Builder
	for b.Len() < n {
		for range 8 + rng.IntN(8) {
			b.WriteString(filler[rng.IntN(len(filler))])
			b.WriteByte(' ')
		}
		if rng.IntN(4) == 0 {
			b.WriteString(zh[rng.IntN(len(zh))])
			b.WriteByte(' ')
		}
		if rng.IntN(20) == 0 {
			b.WriteString(planted[rng.IntN(len(planted))])
			b.WriteByte(' ')
		}
		b.WriteString(". ")
	}
	return b.String()
}

// syntheticDict is the sample dictionary plus n made-up entries: Latin pseudo-words of 5–12
// letters and, one in ten, 2–4 CJK characters, over four categories.
func syntheticDict(tb testing.TB, n int) *Dictionary {
	rng := rand.New(rand.NewPCG(3, 3))
	var tsv strings.Builder
	sample, err := os.ReadFile(samplePath)
	if err != nil {
		tb.Fatal(err)
	}
	tsv.Write(sample)
	for i := range n {
		var w []rune
		if i%10 == 0 {
			for range 2 + rng.IntN(3) {
				w = append(w, rune(0x4e00+rng.IntN(0x5000)))
			}
		} else {
			for range 5 + rng.IntN(8) {
				w = append(w, rune('a'+rng.IntN(26)))
			}
		}
		fmt.Fprintf(&tsv, "%s\tdemo-%d\t0.%d\n", string(w), i%4, 1+rng.IntN(9))
	}
	return mustDict(tb, tsv.String())
}

func benchDicts(b *testing.B) map[string]*Dictionary {
	sample, err := LoadDictionary(samplePath)
	if err != nil {
		b.Fatal(err)
	}
	return map[string]*Dictionary{"sample": sample, "synthetic10k": syntheticDict(b, 10000)}
}

// BenchmarkMatcherFind measures Find (normalization + automaton + offset mapping) in MB/s of
// original text, over 1 KiB texts (a typical prompt) and 64 KiB texts.
func BenchmarkMatcherFind(b *testing.B) {
	for _, dictName := range []string{"sample", "synthetic10k"} {
		m := NewMatcher(benchDicts(b)[dictName])
		for _, size := range []int{1 << 10, 64 << 10} {
			text := benchText(size)
			b.Run(fmt.Sprintf("dict=%s/text=%dKiB", dictName, size>>10), func(b *testing.B) {
				b.SetBytes(int64(len(text)))
				b.ReportAllocs()
				for b.Loop() {
					m.Find(text)
				}
			})
		}
	}
}

// BenchmarkMatcherCheck adds scoring and categories to Find.
func BenchmarkMatcherCheck(b *testing.B) {
	th := Thresholds{Block: DefaultBlockThreshold, Review: DefaultReviewThreshold}
	for name, d := range benchDicts(b) {
		m := NewMatcher(d)
		text := benchText(1 << 10)
		b.Run("dict="+name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				m.Check(text, th, DefaultMaxHitsPerItem)
			}
		})
	}
}

// BenchmarkNormalize is the normalization alone.
func BenchmarkNormalize(b *testing.B) {
	text := benchText(64 << 10)
	var n normText
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		n.normalize(text)
	}
}

// BenchmarkNewMatcher is the cost of a reload's build.
func BenchmarkNewMatcher(b *testing.B) {
	d := syntheticDict(b, 10000)
	for b.Loop() {
		NewMatcher(d)
	}
}
