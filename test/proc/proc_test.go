package proc

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestStartOutputExit(t *testing.T) {
	t.Setenv("BACKFLOW_LEAK", "from-the-parent")
	log := filepath.Join(t.TempDir(), "child.log")
	var seen []string
	p, err := Start("sh", "/bin/sh", Options{Args: []string{"-c", `echo out; echo "err $BACKFLOW_LEAK $OWN" >&2; exit 3`},
		Env: map[string]string{"OWN": "given"}, Isolate: true, Stdout: true, Log: log, OnLine: func(l string) { seen = append(seen, l) }})
	if err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(10 * time.Second); err != nil || code != 3 {
		t.Fatalf("exit %d, %v; want 3", code, err)
	}
	out := p.Output()
	if !strings.Contains(out, "out\n") || !strings.Contains(out, "err  given\n") || len(seen) != 2 {
		t.Fatalf("output %q (lines seen %q): want both streams, no BACKFLOW_* of the parent, OWN given", out, seen)
	}
	if b, _ := os.ReadFile(log); string(b) != out {
		t.Fatalf("log file %q, output %q", b, out)
	}
}

func TestStopWaitLine(t *testing.T) {
	p, err := Start("sh", "/bin/sh", Options{Args: []string{"-c", `trap 'echo bye >&2; exit 0' TERM; echo '{"msg":"serving metrics and health","metrics":"http://127.0.0.1:1/metrics"}' >&2; while :; do sleep 0.05; done`}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	base, err := p.WaitLine(ctx, MetricsLine)
	if err != nil || base != "http://127.0.0.1:1" {
		t.Fatalf("WaitLine: %q, %v", base, err)
	}
	if code, _, err := p.Stop(syscall.SIGTERM, 10*time.Second); err != nil || code != 0 || !strings.Contains(p.Output(), "bye") {
		t.Fatalf("stop: exit %d, %v, output %q", code, err, p.Output())
	}
	if _, err := p.WaitLine(ctx, func(string) (string, bool) { return "", false }); err == nil {
		t.Fatal("WaitLine on an exited child with no match: no error")
	}
}

func TestStopKillsAfterGrace(t *testing.T) {
	p, err := Start("sh", "/bin/sh", Options{Args: []string{"-c", `trap '' TERM; while :; do sleep 0.05; done`}, Group: true})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // let the shell set its trap
	if _, _, err := p.Stop(syscall.SIGTERM, 300*time.Millisecond); err == nil || p.Running() {
		t.Fatalf("a child ignoring SIGTERM: %v, running %v; want it killed and an error", err, p.Running())
	}
}
