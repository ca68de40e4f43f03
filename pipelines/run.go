package pipelines

import (
	"context"
	"errors"
	"log/slog"
	"slices"
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
//
// In order: plan (the stages as data, what they need, their groups and readiness parts),
// StartUp (fail fast on refused credentials), serve (/metrics and the health endpoints, the
// lag monitor), then supervise (start every stage and stop them all on a signal or a
// failure).
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
	p, err := plan(f)
	if err != nil {
		return err
	}
	metrics := ops.NewMetrics(reg)
	ready := p.readiness(f, metrics)

	// Fail fast when a system refuses our credentials or the TLS handshake; a system that is
	// only down is logged, and the stages wait for it as they do mid-run (Preflight).
	if err := StartUp(ctx, f.Conns, log, p.needs...); err != nil {
		return err
	}
	stopServing, err := serve(ctx, f, reg, ready, log, o.OnListening, p.groups)
	if err != nil {
		return err
	}
	defer stopServing()
	env := &stageEnv{cfg: f, conn: f.Conns, log: log, metrics: metrics, ready: ready}
	return supervise(ctx, f, p.specs, env)
}

// runPlan is what Run starts: the configured stages as data, the systems they need, and the
// consumer groups whose lag it exports.
type runPlan struct {
	specs  []stage
	needs  []string
	groups []string
}

// plan looks up each configured stage (a built-in one, or a declared stream's) and gathers
// what they need and the groups they run, with metrics.lag_groups after them.
func plan(f Config) (runPlan, error) {
	var p runPlan
	for _, name := range f.Stages {
		s, err := f.stageOf(name)
		if err != nil {
			return p, err
		}
		p.specs = append(p.specs, s)
		for _, sys := range s.needs {
			if !slices.Contains(p.needs, sys) {
				p.needs = append(p.needs, sys)
			}
		}
		p.groups = append(p.groups, s.groups(f)...)
	}
	for _, g := range f.Metrics.LagGroups {
		if !slices.Contains(p.groups, g) {
			p.groups = append(p.groups, g)
		}
	}
	return p, nil
}

// stageOf is the configured stage called name: a declared stream's, or a built-in one.
func (c Config) stageOf(name string) (stage, error) {
	if sc, ok := c.streamNamed(name); ok {
		return streamStage(sc), nil
	}
	return stageByName(name)
}

// readiness is /readyz for the plan: every stage part not ready until it reports partitions
// assigned, and a check of each system a stage needs.
func (p runPlan) readiness(f Config, metrics *ops.Metrics) *ops.Readiness {
	ready := ops.NewReadiness(f.Metrics.ReadyTimeout)
	for _, s := range p.specs {
		for _, part := range s.parts(f) {
			ready.AddStage(part)
			metrics.Stage(part).SetReady(false)
		}
	}
	for _, sys := range p.needs {
		check := systemChecks[sys]
		ready.AddCheck(ops.Check{Name: sys, Run: func(ctx context.Context) error {
			_, err := check(ctx, f.Conns)
			return err
		}})
	}
	return ready
}

// serve starts what Run serves beside the stages: /metrics, /healthz and /readyz on
// metrics.addr (unless "off"), and the lag monitor of groups. The returned func stops both.
func serve(ctx context.Context, f Config, reg *prometheus.Registry, ready *ops.Readiness, log *slog.Logger,
	onListening func(string), groups []string) (stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	if addr := f.Metrics.Addr; addr != "" && addr != "off" {
		srv := ops.NewServer(addr, reg, ready, log)
		if f.Metrics.Pprof {
			srv.EnablePprof()
		}
		if err := srv.Start(); err != nil {
			return stop, err
		}
		stops = append(stops, func() {
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			srv.Shutdown(sctx)
		})
		log.Info("serving metrics and health", "metrics", "http://"+srv.Addr()+"/metrics",
			"healthz", "http://"+srv.Addr()+"/healthz", "readyz", "http://"+srv.Addr()+"/readyz")
		if onListening != nil {
			onListening(srv.Addr())
		}
	}
	if cl, err := f.Conns.Kafka.NewClient(); err == nil {
		monCtx, stopMon := context.WithCancel(context.WithoutCancel(ctx))
		mon := kafka.NewLagMonitor(cl, groups, f.Metrics.LagInterval, reg, log)
		monDone := make(chan struct{})
		go func() {
			defer close(monDone)
			mon.Run(monCtx)
		}()
		stops = append(stops, func() {
			stopMon()
			<-monDone
			cl.Close()
		})
	}
	return stop, nil
}
