package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/lovoo/goka"

	"github.com/backflowhq/backflow/internal/ops"
	"github.com/backflowhq/backflow/internal/retry"
)

// GokaLife runs one goka processor with the start and stop order every backflow group needs.
//
// Lifecycle: NewGokaLife(ctx); build the processor and whatever works on its behalf with Ctx;
// then Run. Ctx is cancelled only after the periodic visitor stopped: goka v1.1.14 reads its
// visit counter without synchronisation when a processor stop aborts a VisitAll (the race
// detector reports it), so a visit in flight always finishes before the processor stops.
type GokaLife struct {
	// Ctx is the processor's context: cancelled once the parent ends (after the sweeps), the
	// processor stops on its own, or Fail is called.
	Ctx    context.Context
	parent context.Context
	cancel context.CancelFunc

	failMu sync.Mutex
	failed error
}

// Fail stops the processor: Run returns err (the first one, if called more than once) once
// goka has shut down. Safe to call from any goroutine.
func (l *GokaLife) Fail(err error) {
	l.failMu.Lock()
	if l.failed == nil {
		l.failed = err
	}
	l.failMu.Unlock()
	l.cancel()
}

// NewGokaLife derives the processor's context from parent.
func NewGokaLife(parent context.Context) *GokaLife {
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	return &GokaLife{Ctx: ctx, parent: parent, cancel: cancel}
}

// GokaRun says what runs beside the processor. Zero fields do nothing.
type GokaRun struct {
	Name    string       // for logs, e.g. "ingest"
	Log     *slog.Logger // default slog.Default()
	Visitor string       // goka visitor run over the whole table every Every
	Every   time.Duration
	OnReady func() // once the processor is consuming
	// OnStopping runs once Ctx is cancelled, while goka shuts down (e.g. to release work
	// goka's shutdown would otherwise wait for).
	OnStopping func()
	// Metrics, if set, is where the table restore metrics are registered (see restore.go).
	Metrics *ops.Stage
	// Waiting, if set, is told (a *RestoreStatus) how far the group table's restore is until
	// the stage is ready: the reason /readyz gives.
	Waiting func(error)
	// RestoreLogEvery is how often a restore in progress is logged; default RestoreLogEvery.
	RestoreLogEvery time.Duration
	// RestoreSampleEvery is how often the restore is sampled; default RestoreSampleEvery.
	RestoreSampleEvery time.Duration
}

// Run runs proc until the parent context ends or proc fails, and returns proc's error.
func (l *GokaLife) Run(proc *goka.Processor, o GokaRun) error {
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	rw := newRestoreWatch(o.Name, string(proc.Graph().Group()), log, o.Metrics.Registerer(), o.Waiting, o.RestoreLogEvery)
	watchDone := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- proc.Run(l.Ctx) }()
	go func() {
		defer close(watchDone)
		rw.watch(l.Ctx, proc, o.RestoreSampleEvery)
	}()
	go func() {
		if err := proc.WaitForReadyContext(l.Ctx); err == nil {
			// every partition is restored now: the last sample has the restore's totals
			rw.observe(time.Now(), tableStats(l.Ctx, proc))
			rw.markReady(func() {
				log.Info(o.Name+" ready", "stage", o.Name)
				if o.OnReady != nil {
					o.OnReady()
				}
			})
		}
	}()
	sweepStop, sweepDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sweepDone)
		if o.Visitor == "" || o.Every <= 0 {
			<-sweepStop
			return
		}
		t := time.NewTicker(o.Every)
		defer t.Stop()
		for {
			select {
			case <-sweepStop:
				return
			case <-t.C:
				if err := proc.VisitAll(context.Background(), o.Visitor, nil); err != nil {
					log.Warn("table sweep failed", "stage", o.Name, "visitor", o.Visitor, "error", err)
				}
			}
		}
	}()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-l.parent.Done():
		case <-l.Ctx.Done():
		}
		close(sweepStop)
		<-sweepDone
		l.cancel()
		if o.OnStopping != nil {
			o.OnStopping()
		}
	}()
	err := <-done
	l.cancel()
	<-stopped
	<-watchDone
	l.failMu.Lock()
	defer l.failMu.Unlock()
	if l.failed != nil {
		return l.failed
	}
	if l.parent.Err() != nil {
		// A requested stop: records whose commit the stop cut short are redelivered to the
		// next run, which is what a stop does, not a failure; anything else still is one.
		left, failures := SplitStopErrors(err)
		log.Info("stopped; left to redelivery", "stage", o.Name, "records", left)
		if len(failures) == 0 {
			return nil
		}
		err = errors.Join(failures...)
		log.Error("stopped with errors", "stage", o.Name, "error", err)
	}
	return err
}

// SplitStopErrors sorts what a goka processor returned after a requested stop: left counts
// the records whose commit the stop cut short (goka's "could not commit message": the stage
// released them uncommitted, so they are redelivered to the next run); failures are the other
// errors, except a cancelled context and goka's note that it stopped waiting for its tables.
// goka and sarama collect errors in multierrors (often dozens, one per record in flight);
// they are taken apart here, and an error met twice in them counts once.
func SplitStopErrors(err error) (left int, failures []error) {
	// sarama hands goka the same errors twice (Consume's and Close's), so each is taken once
	seen := map[error]bool{}
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
		if reflect.TypeOf(e).Kind() == reflect.Pointer { // a value's == can panic; a pointer's cannot
			if seen[e] {
				return
			}
			seen[e] = true
		}
		if multi, ok := e.(interface{ WrappedErrors() []error }); ok {
			for _, x := range multi.WrappedErrors() {
				walk(x)
			}
			return
		}
		if multi, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range multi.Unwrap() {
				walk(x)
			}
			return
		}
		msg := e.Error()
		switch {
		case strings.HasPrefix(msg, uncommitted):
			left++
			return
		case strings.Contains(msg, stoppedWaitingForTables):
			return
		}
		if inner := errors.Unwrap(e); inner != nil {
			walk(inner)
			return
		}
		if errors.Is(e, context.Canceled) {
			return
		}
		failures = append(failures, e)
	}
	walk(err)
	return left, failures
}

// What goka's errors say (it formats them with fmt, so only their text tells): a record's
// commit failed (goka's context.go), and Run stopped while the tables were restoring
// (processor.go).
const (
	uncommitted             = "could not commit message"
	stoppedWaitingForTables = "context closed while waiting for startup tables"
)

// Close cancels Ctx; for the error paths before Run (Run cancels it itself).
func (l *GokaLife) Close() { l.cancel() }

// GokaLogger routes goka's own log lines (group setup, rebalances, shutdown) into log, at
// info level with component=goka, so a JSON log stays all JSON. When log is at debug level,
// goka's debug lines come too (where each table partition's recovery starts and ends, storage
// opened, sessions cleaned up): goka logs them only once its global debug switch is on, which
// nothing else turns on, so `log.level: debug` alone showed none of them. goka wraps a logger
// with the switch as it is when the processor is built, and passes those lines to Printf, so
// they come at info level like its others.
func GokaLogger(log *slog.Logger) goka.Logger {
	if log == nil {
		log = slog.Default()
	}
	if log.Enabled(context.Background(), slog.LevelDebug) {
		gokaDebug(true, false)
	}
	return gokaLogger{log.With("component", "goka")}
}

// gokaDebug is goka.Debug; tests replace it.
var gokaDebug = goka.Debug

type gokaLogger struct{ log *slog.Logger }

func (g gokaLogger) Print(v ...any)   { g.line(strings.TrimSpace(fmt.Sprint(v...))) }
func (g gokaLogger) Println(v ...any) { g.line(strings.TrimSpace(fmt.Sprintln(v...))) }
func (g gokaLogger) Printf(format string, v ...any) {
	g.line(strings.TrimSpace(fmt.Sprintf(format, v...)))
}

// line logs one of goka's lines. One that lists records whose commit failed goes to debug:
// at a stop, that is every record in flight, dozens of lines of it, and GokaLife.Run says
// how many in one line; a commit that fails while running stops the processor, and Run
// returns that error to the stage, which reports it.
func (g gokaLogger) line(msg string) {
	if strings.Contains(msg, uncommitted) {
		g.log.Debug(firstLine(msg), "records_uncommitted", strings.Count(msg, uncommitted))
		return
	}
	g.log.Info(msg)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return strings.TrimSpace(s[:i])
	}
	return s
}

// newGokaProcessor is goka.NewProcessor; tests replace it.
var newGokaProcessor = goka.NewProcessor

// NewGokaProcessor is goka.NewProcessor, tried again (up to 5 times, ctx permitting) when
// goka's topic check lost a race with a topic created a moment before, by the stage's own
// Prepare or by another instance starting at the same time. goka looks the topic up in a
// fresh sarama client's metadata, which a just-created topic may not be in yet, then fails
// its own create with "Topic with this name already exists"; or it asks a broker for the
// topic's configs before that broker knows the topic ("does not exist on this broker", on a
// 3-broker cluster). goka formats these errors with %v, so only their text tells. Without
// this the stage stopped at start-up now and then.
func NewGokaProcessor(ctx context.Context, brokers []string, g *goka.GroupGraph, opts ...goka.ProcessorOption) (*goka.Processor, error) {
	var p *goka.Processor
	err := retry.Do(ctx, retry.Policy{Min: 300 * time.Millisecond, Max: 1200 * time.Millisecond, Attempts: 5}, topicRace, nil, func() (err error) {
		p, err = newGokaProcessor(brokers, g, opts...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// topicRace reports whether err is one of goka's topic checks losing a race with a topic
// created a moment before.
func topicRace(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "already exists") || strings.Contains(msg, "does not exist on this broker")
}
