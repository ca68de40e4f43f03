package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/backflowhq/backflow/test/proc"
)

// RepoRoot is the module's root folder, found from the working directory (a test runs in its
// package's folder).
func RepoRoot() string {
	if dir, ok := moduleRoot(); ok {
		return dir
	}
	return "."
}

func moduleRoot() (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

var (
	buildMu  sync.Mutex
	builtDir string
	built    = map[string]string{}
)

// Build compiles one of the project's commands (e.g. "cmd/backflow") once per test process,
// without -race (a child is the product as shipped), and returns the binary's path.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if bin, ok := built[pkg]; ok {
		return bin
	}
	if builtDir == "" {
		dir, err := os.MkdirTemp("", "backflow-test-bin")
		if err != nil {
			t.Fatal(err)
		}
		builtDir = dir
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	bins, err := proc.Build(ctx, RepoRoot(), filepath.Join(builtDir, filepath.Dir(pkg)), "./"+pkg)
	if err != nil {
		t.Fatal(err)
	}
	built[pkg] = bins[0]
	return bins[0]
}

// FreePort returns a loopback port nothing listens on right now.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// Start starts a child process and stops it when the test ends: SIGTERM, so that a stage
// leaves its consumer groups, and SIGKILL 10 s later if it is still there.
func Start(t testing.TB, name, bin string, o proc.Options) *proc.Proc {
	t.Helper()
	p, err := proc.Start(name, bin, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Terminate(10 * time.Second) })
	return p
}

// StartSensitive starts a private sensitive-word service (the project's own binary, on a free
// port) with the sample dictionary and the extra arguments, and stops it when the test ends. A
// test takes it down with Stop and brings it back with Start.
func StartSensitive(t testing.TB, extra ...string) *proc.Service {
	t.Helper()
	bin := Build(t, "tools/sensitive-words/cmd/sensitive-words")
	dict := filepath.Join(RepoRoot(), "deploy", "sensitive-words", "sample.tsv")
	s, err := proc.NewService("sensitive-words", bin, func(addr string) []string {
		return []string{"--addr", addr, "--dictionary", dict}
	}, proc.Options{Args: extra})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

// WhileRunning returns a context that ends when ctx does, or when p exits, with the exit and
// the end of p's output as the cause: a wait on it fails at once, saying why, if the child dies.
func WhileRunning(ctx context.Context, p *proc.Proc) (context.Context, context.CancelFunc) {
	wctx, cancel := context.WithCancelCause(ctx)
	go func() {
		select {
		case <-p.Done():
			cancel(fmt.Errorf("%s exited (%v):\n%s", p.Name, p.Err(), p.Tail(40)))
		case <-wctx.Done():
		}
	}()
	return wctx, func() { cancel(context.Canceled) }
}
