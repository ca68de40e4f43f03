package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// WriteFile writes content to path as an operator replacing a file would: a file beside it,
// renamed over it, so a reader polling path sees the old content or the new, never a part
// (mode 0600: it may hold a secret). A bare name is made in a new t.TempDir(). It returns the
// path and fails t when the file cannot be written.
func WriteFile(t testing.TB, path, content string) string {
	t.Helper()
	if filepath.Base(path) == path {
		path = filepath.Join(t.TempDir(), path)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	return path
}
