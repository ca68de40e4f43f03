package moderation_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/backflowhq/backflow/internal/moderation"
	"github.com/backflowhq/backflow/test/testenv"
	"github.com/backflowhq/backflow/tools/loadgen"
)

// localURL is the local stack's sensitive-word service when the env file does not say.
const localURL = "http://127.0.0.1:18090"

// fullWidth maps printable ASCII to its full-width form, as loadgen disguises words.
func fullWidth(s string) string {
	return strings.Map(func(r rune) rune {
		if r > 0x20 && r < 0x7f {
			return r + 0xfee0
		}
		return r
	}, s)
}

// TestCheckAgainstStack calls the service the stack started (deploy/local/stack up) through
// the client: every word loadgen plants, plain and disguised as loadgen disguises it, is found
// at its place in the text; a clean text is allowed. When the service is down the test fails.
func TestCheckAgainstStack(t *testing.T) {
	testenv.Integration(t)
	url := testenv.Get(testenv.SensitiveURL)
	if url == "" {
		url = localURL
	}
	c, err := moderation.New(moderation.Conn{URL: url, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	type planted struct{ word, disguised string }
	var items []moderation.Item
	var want []planted
	disguises := []func(string) string{
		func(w string) string { return w },
		strings.ToUpper,
		func(w string) string { return strings.Join(strings.Split(w, ""), " ") },
		fullWidth,
	}
	for i, w := range loadgen.DefaultWords {
		for j, disguise := range disguises {
			d := disguise(w)
			items = append(items, moderation.Item{ID: fmt.Sprintf("w%d-%d", i, j), Text: "please summarize " + d + " thanks"})
			want = append(want, planted{w, d})
		}
	}
	items = append(items,
		moderation.Item{ID: "zh", Text: "这是一个测 试 词。"},
		moderation.Item{ID: "clean", Text: "please summarize the following report about quarterly sales"})

	res, err := c.Check(t.Context(), items)
	if err != nil {
		t.Fatalf("checking %d items at %s (is the stack up? deploy/local/stack up): %v", len(items), url, err)
	}
	if len(res) != len(items) {
		t.Fatalf("%d results for %d items", len(res), len(items))
	}
	for i, p := range want {
		r := res[i]
		if r.ID != items[i].ID {
			t.Fatalf("result %d has id %q, want %q", i, r.ID, items[i].ID)
		}
		found := false
		for _, h := range r.Hits {
			if h.Word == p.word {
				found = true
				if got := string([]rune(items[i].Text)[h.Start:h.End]); got != p.disguised {
					t.Errorf("%s: hit %q covers %q, want %q", r.ID, p.word, got, p.disguised)
				}
			}
		}
		if !found || r.RiskScore <= 0 || r.Verdict == "" || len(r.Categories) == 0 {
			t.Errorf("%s (%q): %+v, want a hit for %q", r.ID, items[i].Text, r, p.word)
		}
	}
	zh := res[len(res)-2]
	if len(zh.Hits) != 1 || zh.Hits[0].Word != "测试词" || zh.Hits[0].Start != 4 || zh.Hits[0].End != 9 {
		t.Errorf("zh: %+v, want 测试词 at [4,9)", zh)
	}
	if clean := res[len(res)-1]; clean.Verdict != moderation.VerdictAllow || len(clean.Hits) != 0 || clean.RiskScore != 0 {
		t.Errorf("clean text: %+v, want ALLOW without hits", clean)
	}
}
