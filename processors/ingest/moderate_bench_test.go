package ingest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/backflowhq/backflow/internal/moderation"
	"github.com/backflowhq/backflow/test/testenv"
)

// BenchmarkModerateBatch is one moderation batch of 99 records in loadgen's mix, checked by the
// stack's sensitive-word service through the client: per request a REQUEST (its prompt), an
// inference result (its output) and a RESPONSE (the same output). every-text sends an item per
// record, as ingest did; distinct-texts sends each distinct text once (dedupeTexts), as it
// does now. ns/record and items/record are per source record.
func BenchmarkModerateBatch(b *testing.B) {
	testenv.Integration(b)
	url := testenv.Get(testenv.SensitiveURL)
	if url == "" {
		url = "http://127.0.0.1:18090"
	}
	cl, err := moderation.New(moderation.Conn{URL: url, Timeout: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	words := strings.Fields("please summarize the following report about quarterly sales and explain how to " +
		"configure a cluster with three nodes while keeping latency low for every tenant in the region bluefin")
	rnd := rand.New(rand.NewPCG(1, 2))
	text := func(n int) string {
		w := make([]string, n)
		for i := range w {
			w[i] = words[rnd.IntN(len(words))]
		}
		return strings.Join(w, " ")
	}
	var batch []*job
	for r := range 33 {
		prompt, output := text(20+r%40), text(40+r%80)
		batch = append(batch, &job{text: prompt}, &job{text: output}, &job{text: output})
	}
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		items func() []moderation.Item
	}{
		{"every-text", func() []moderation.Item {
			items := make([]moderation.Item, len(batch))
			for i, j := range batch {
				items[i] = moderation.Item{ID: fmt.Sprint(i), Text: j.text}
			}
			return items
		}},
		{"distinct-texts", func() []moderation.Item { items, _ := dedupeTexts(batch); return items }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				items := c.items()
				n = len(items)
				if _, err := cl.Check(ctx, items); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/record")
			b.ReportMetric(float64(n)/float64(len(batch)), "items/record")
		})
	}
}
