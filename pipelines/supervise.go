package pipelines

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/backflowhq/backflow/internal/ops"
)

// supervise starts every stage of specs on a context of their own and waits for them: a
// signal (ctx ends), a stage failing or a stage returning unasked stops them all the same
// way, and each then has shutdown_timeout to flush and commit. It returns the first failure,
// ErrShutdownTimeout naming the stages still stopping, or nil after a clean stop.
func supervise(ctx context.Context, f Config, specs []stage, env *stageEnv) error {
	log := env.log
	// The stages' context outlives ctx: it ends when supervise decides to stop them, so a
	// stage failing stops the others the same way a signal does.
	stageCtx, stopStages := context.WithCancel(context.WithoutCancel(ctx))
	defer stopStages()
	type result struct {
		name string
		err  error
	}
	results := make(chan result, len(specs))
	running := map[string]bool{}
	for _, s := range specs {
		running[s.name] = true
		go func() { results <- result{s.name, s.run(stageCtx, env)} }()
	}
	log.Info("backflow running", "stages", strings.Join(f.Stages, ","), "shutdown_timeout", f.ShutdownTimeout.String(), "gc", ops.ReadGC(os.Getenv).String())

	var (
		failure  error
		deadline <-chan time.Time
		signaled = ctx.Done()
	)
	stop := func(why string) {
		if deadline != nil {
			return
		}
		log.Info("stopping: stop consuming, flush, commit", "why", why, "timeout", f.ShutdownTimeout.String())
		for _, s := range specs {
			for _, part := range s.parts(f) {
				env.ready.SetStage(part, errors.New("stopping"))
			}
		}
		stopStages()
		deadline = time.After(f.ShutdownTimeout)
	}
	for len(running) > 0 {
		select {
		case <-signaled:
			signaled = nil
			stop("signal")
		case r := <-results:
			delete(running, r.name)
			if why := judge(log, r.name, r.err, deadline != nil, &failure); why != "" {
				stop(why)
			}
		case <-deadline:
			pending := slices.Sorted(maps.Keys(running))
			log.Error("shutdown timed out; what was not committed is redelivered to the next run", "pending", strings.Join(pending, ","),
				"timeout", f.ShutdownTimeout.String())
			return fmt.Errorf("%w (%v): still stopping: %s", ErrShutdownTimeout, f.ShutdownTimeout, strings.Join(pending, ", "))
		}
	}
	if failure == nil {
		log.Info("backflow stopped cleanly")
	}
	return failure
}

// judge logs how the stage name ended (with err, stopping telling whether a stop was asked
// for), records the first failure in *failure, and returns why the other stages must stop
// now, or "" when they need not.
func judge(log *slog.Logger, name string, err error, stopping bool, failure *error) string {
	switch {
	case err != nil && stopping && errors.Is(err, context.Canceled):
		// Stopped while it waited for a dependency (a connect, a migration, a retry): the
		// stop we asked for, not a failure. What it held stays uncommitted.
		log.Info("stage stopped", "stage", name, "detail", err.Error())
	case err != nil && *failure == nil:
		log.Error("stage failed", "stage", name, "error", err)
		*failure = fmt.Errorf("%s: %w", name, err)
		return "stage " + name + " failed"
	case err == nil && !stopping:
		log.Error("stage stopped on its own", "stage", name)
		*failure = fmt.Errorf("%w: %s", ErrStageStopped, name)
		return "stage " + name + " stopped"
	default:
		log.Info("stage stopped", "stage", name)
	}
	return ""
}
