package testenv

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/backflowhq/backflow/internal/envfile"
)

// SecureEnvFile returns the path of the secured stack's env file
// (`deploy/local/stack --secure up` writes <stack dir>/secure/env).
func SecureEnvFile() string {
	if dir := os.Getenv("BACKFLOW_STACK_DIR"); dir != "" {
		return filepath.Join(dir, "secure", "env")
	}
	p := envFilePath()
	if p == "" {
		return ""
	}
	return filepath.Join(filepath.Dir(p), "secure", "env")
}

// Secure calls Integration and returns the secured stack's settings (addresses, users, and the
// paths of the files holding the secrets and the CA). The test fails when the secured stack
// has not been started: a skipped security test must not pass for a checked one.
func Secure(t testing.TB) map[string]string {
	t.Helper()
	Integration(t)
	path := SecureEnvFile()
	vals, err := envfile.Load(path)
	if err != nil {
		t.Fatalf("testenv: the secured stack's env file %s: %v (start it with 'deploy/local/stack --secure up'; make test does)", path, err)
	}
	return vals
}
