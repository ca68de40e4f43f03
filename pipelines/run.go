package pipelines

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/internal/ops"
)

// ErrShutdownTimeout: the stages did not stop within shutdown_timeout after a stop was
// asked for. What they had not committed is redelivered to the next run.
var ErrShutdownTimeout = errors.New("pipelines: stages did not stop within shutdown_timeout")

// ErrStageStopped: a stage returned although no stop was asked for.
var ErrStageStopped = errors.New("pipelines: stage stopped on its own")

// RunOptions are what Run takes besides the configuration.
type RunOptions struct {
	// Logger receives the process's logs. Default: slog.Default().
	Logger *slog.Logger
	// Registry is where metrics are registered and what /metrics serves. Default: a new
	// registry with the Go and process collectors.
	Registry *prometheus.Registry
	// OnListening, if set, is called with the bound address of /metrics once it serves.
	OnListening func(addr string)
}

// Run runs the configured stages in this process until ctx ends or one of them fails, with
// /metrics, /healthz and /readyz served on metrics.addr and consumer lag polled every
// metrics.lag_interval, for the stages' groups and those of metrics.lag_groups.
//
// Shutdown: when ctx ends (SIGTERM or SIGINT), every stage stops consuming, flushes what it
// holds and commits it, or leaves it uncommitted for redelivery; Run waits for them at most
// shutdown_timeout and then returns ErrShutdownTimeout. When a stage fails, the others are
// stopped the same way and Run returns the failure. A clean stop returns nil.
func Run(ctx context.Context, l Loaded, o RunOptions) error {
	f := l.Config
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	reg := o.Registry
	if reg == nil {
		reg = ops.NewRegistry()
	}
	var specs []stage
	for _, name := range f.Stages {
		if sc, ok := f.streamNamed(name); ok {
			specs = append(specs, streamStage(sc))
			continue
		}
		s, err := stageByName(name)
		if err != nil {
			return err
		}
		specs = append(specs, s)
	}
	metrics := ops.NewMetrics(reg)
	ready := ops.NewReadiness(f.Metrics.ReadyTimeout)
	var needs, groups []string
	for _, s := range specs {
		for _, sys := range s.needs {
			if !slices.Contains(needs, sys) {
				needs = append(needs, sys)
			}
		}
		groups = append(groups, s.groups(f)...)
		for _, part := range s.parts(f) {
			ready.AddStage(part) // not ready until it reports partitions assigned
			metrics.Stage(part).SetReady(false)
		}
	}
	for _, sys := range needs {
		check := systemChecks[sys]
		ready.AddCheck(ops.Check{Name: sys, Run: func(ctx context.Context) error {
			_, err := check(ctx, l.Config.Conns)
			return err
		}})
	}

	// Fail fast when a system refuses our credentials or the TLS handshake; a system that is
	// only down is logged, and the stages wait for it as they do mid-run (Preflight).
	if err := StartUp(ctx, l.Config.Conns, log, needs...); err != nil {
		return err
	}

	if addr := f.Metrics.Addr; addr != "" && addr != "off" {
		srv := ops.NewServer(addr, reg, ready, log)
		if f.Metrics.Pprof {
			srv.EnablePprof()
		}
		if err := srv.Start(); err != nil {
			return err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			srv.Shutdown(sctx)
		}()
		log.Info("serving metrics and health", "metrics", "http://"+srv.Addr()+"/metrics",
			"healthz", "http://"+srv.Addr()+"/healthz", "readyz", "http://"+srv.Addr()+"/readyz")
		if o.OnListening != nil {
			o.OnListening(srv.Addr())
		}
	}

	for _, g := range f.Metrics.LagGroups {
		if !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
	}
	monCtx, stopMon := context.WithCancel(context.WithoutCancel(ctx))
	defer stopMon()
	if cl, err := l.Config.Conns.Kafka.NewClient(); err == nil {
		defer cl.Close()
		mon := kafka.NewLagMonitor(cl, groups, f.Metrics.LagInterval, reg, log)
		monDone := make(chan struct{})
		go func() {
			defer close(monDone)
			mon.Run(monCtx)
		}()
		defer func() {
			stopMon()
			<-monDone
		}()
	}

	// The stages' context outlives ctx: it ends when Run decides to stop them, so a stage
	// failing stops the others the same way a signal does.
	stageCtx, stopStages := context.WithCancel(context.WithoutCancel(ctx))
	defer stopStages()
	env := &stageEnv{cfg: f, conn: l.Config.Conns, log: log, metrics: metrics, ready: ready}
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
				ready.SetStage(part, errors.New("stopping"))
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
			switch {
			case r.err != nil && deadline != nil && errors.Is(r.err, context.Canceled):
				// Stopped while it waited for a dependency (a connect, a migration, a retry):
				// the stop we asked for, not a failure. What it held stays uncommitted.
				log.Info("stage stopped", "stage", r.name, "detail", r.err.Error())
			case r.err != nil && failure == nil:
				log.Error("stage failed", "stage", r.name, "error", r.err)
				failure = fmt.Errorf("%s: %w", r.name, r.err)
				stop("stage " + r.name + " failed")
			case r.err == nil && deadline == nil:
				log.Error("stage stopped on its own", "stage", r.name)
				failure = fmt.Errorf("%w: %s", ErrStageStopped, r.name)
				stop("stage " + r.name + " stopped")
			default:
				log.Info("stage stopped", "stage", r.name)
			}
		case <-deadline:
			pending := make([]string, 0, len(running))
			for name := range running {
				pending = append(pending, name)
			}
			slices.Sort(pending)
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
