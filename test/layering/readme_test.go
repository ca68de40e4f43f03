package layering

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeIsForANewcomer: the README stays a newcomer's page, at most 250 lines, that gives
// the two commands and links every docs/ page; the detail lives in docs/.
func TestReadmeIsForANewcomer(t *testing.T) {
	root := filepath.Join("..", "..")
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	if n := strings.Count(readme, "\n"); n > 250 {
		t.Errorf("README.md has %d lines, at most 250: move detail to docs/", n)
	}
	for _, want := range []string{"make demo", "make test"} {
		if !strings.Contains(readme, want) {
			t.Errorf("README.md does not give %q", want)
		}
	}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(pages) < 7 {
		t.Fatalf("docs/ holds %d pages (%v), want the seven of the README's table", len(pages), err)
	}
	for _, p := range pages {
		if link := "docs/" + filepath.Base(p); !strings.Contains(readme, "("+link+")") {
			t.Errorf("README.md does not link %s", link)
		}
	}
}
