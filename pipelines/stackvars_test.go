package pipelines

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"testing"
)

// TestStackVariablesRaiseNoWarning: a user who set BACKFLOW_STACK_DIR for the local stack (as
// its usage documents) got "BACKFLOW_STACK_DIR is set but backflow reads no such variable" from
// every backflow command. Every variable the stack's scripts, the demo and the Makefile name is
// either one backflow reads or one it knows belongs to the stack (LocalStackVariables).
func TestStackVariablesRaiseNoWarning(t *testing.T) {
	name := regexp.MustCompile(`BACKFLOW_[A-Z0-9_]*[A-Z0-9]`)
	seen := map[string]bool{}
	scan := func(path string) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range name.FindAllString(string(b), -1) {
			seen[v] = true
		}
	}
	err := filepath.WalkDir(filepath.Join("..", "deploy", "local"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "target" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && filepath.Ext(path) != ".go" {
			scan(path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	scripts, _ := filepath.Glob(filepath.Join("..", "deploy", "*.sh"))
	for _, p := range append(scripts, filepath.Join("..", "Makefile")) {
		scan(p)
	}
	if len(seen) < 20 {
		t.Fatalf("found %d variables in the stack's scripts; the scan is broken", len(seen))
	}
	var environ []string
	for v := range seen {
		environ = append(environ, v+"=x")
	}
	var unknown []string
	for _, u := range UnknownVariables(environ) {
		unknown = append(unknown, u.Name)
	}
	sort.Strings(unknown)
	if len(unknown) > 0 {
		t.Errorf("backflow would warn about %d variables the local stack uses: %v", len(unknown), unknown)
	}
}
