package layering

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// fileMapLine is one entry of docs/architecture.md's file map: "- `path/` — what it is".
var fileMapLine = regexp.MustCompile("^- `([a-z0-9_./-]+)/` — ")

// TestFileMapMatchesTree: docs/architecture.md's file map names every Go package directory of
// the module, and every directory it names exists.
func TestFileMapMatchesTree(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## File map\n")
	if !ok {
		t.Fatal(`docs/architecture.md has no "## File map" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	mapped := map[string]bool{}
	for _, line := range strings.Split(section, "\n") {
		if m := fileMapLine.FindStringSubmatch(line); m != nil {
			mapped[m[1]] = true
		}
	}
	out, err := exec.Command("go", "list", "-f", "{{.Dir}}", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	pkgs := 0
	for _, dir := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(abs, dir)
		if err != nil {
			t.Fatal(err)
		}
		pkgs++
		if !mapped[filepath.ToSlash(rel)] {
			t.Errorf("package directory %s/ is not in docs/architecture.md's file map", rel)
		}
	}
	if pkgs < 20 || len(mapped) < pkgs {
		t.Errorf("%d packages, %d file map entries: the map or the listing is not what it should be", pkgs, len(mapped))
	}
	for p := range mapped {
		if fi, err := os.Stat(filepath.Join(root, p)); err != nil || !fi.IsDir() {
			t.Errorf("docs/architecture.md's file map names %s/, which is not a directory of the tree", p)
		}
	}
}
