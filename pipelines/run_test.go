package pipelines

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// withStages swaps the stage table for the test's own stages (the runner's lifecycle is under
// test here; the real stages are tested on the real stack).
func withStages(t *testing.T, ss ...stage) {
	t.Helper()
	old := stages
	stages = ss
	t.Cleanup(func() { stages = old })
}

func fakeStage(name string, run func(ctx context.Context) error) stage {
	return stage{name: name, groups: func(Config) []string { return []string{"g-" + name} }, parts: justThe(name),
		run: func(ctx context.Context, _ *stageEnv) error { return run(ctx) }}
}

func loaded(t *testing.T, shutdown time.Duration, names ...string) Loaded {
	t.Helper()
	f := Defaults()
	f.Stages = names
	f.ShutdownTimeout = shutdown
	f.Metrics.Addr = "off"
	f.Metrics.LagInterval = time.Hour
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	return Loaded{Config: f}
}

func runOpts() RunOptions {
	return RunOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Registry: prometheus.NewRegistry()}
}

// TestRunStopsCleanly: on a stop (ctx ends) every stage's context ends, each returns nil,
// and Run returns nil.
func TestRunStopsCleanly(t *testing.T) {
	var stopped atomic.Int32
	st := func(ctx context.Context) error { <-ctx.Done(); stopped.Add(1); return nil }
	withStages(t, fakeStage("a", st), fakeStage("b", st))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, loaded(t, time.Minute, "a", "b"), runOpts()) }()
	cancel()
	if err := <-done; err != nil || stopped.Load() != 2 {
		t.Fatalf("Run = %v with %d stages stopped, want nil and 2", err, stopped.Load())
	}
}

// TestRunStageFailureStopsTheOthers: one stage fails; the other is stopped the way a signal
// would, and Run returns the failure with the stage's name.
func TestRunStageFailureStopsTheOthers(t *testing.T) {
	boom := errors.New("boom")
	var otherStopped atomic.Bool
	withStages(t,
		fakeStage("bad", func(ctx context.Context) error { return boom }),
		fakeStage("good", func(ctx context.Context) error { <-ctx.Done(); otherStopped.Store(true); return nil }))
	err := Run(context.Background(), loaded(t, time.Minute, "bad", "good"), runOpts())
	if !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "bad: ") || !otherStopped.Load() {
		t.Fatalf("Run = %v (other stopped: %v), want bad's error and the other stopped", err, otherStopped.Load())
	}
}

// TestRunShutdownTimeout: a stage that does not return after the stop makes Run return
// ErrShutdownTimeout naming it, once shutdown_timeout has passed.
func TestRunShutdownTimeout(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	withStages(t,
		fakeStage("hung", func(ctx context.Context) error { <-release; return nil }),
		fakeStage("quick", func(ctx context.Context) error { <-ctx.Done(); return nil }))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := Run(ctx, loaded(t, 50*time.Millisecond, "hung", "quick"), runOpts())
	if !errors.Is(err, ErrShutdownTimeout) || !strings.Contains(err.Error(), "still stopping: hung") || strings.Contains(err.Error(), "quick") {
		t.Fatalf("Run = %v, want ErrShutdownTimeout naming only hung", err)
	}
}

// TestRunStageStoppingOnItsOwn is a failure: a stage that returns nil unasked leaves the
// pipeline incomplete.
func TestRunStageStoppingOnItsOwn(t *testing.T) {
	withStages(t, fakeStage("quitter", func(context.Context) error { return nil }))
	if err := Run(context.Background(), loaded(t, time.Minute, "quitter"), runOpts()); !errors.Is(err, ErrStageStopped) {
		t.Fatalf("Run = %v, want ErrStageStopped", err)
	}
}
