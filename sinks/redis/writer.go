package redis

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/backflowhq/backflow/internal/conf"
	"github.com/backflowhq/backflow/internal/feast"
	"github.com/backflowhq/backflow/internal/ops"
	"github.com/backflowhq/backflow/internal/retry"
	"github.com/backflowhq/backflow/sinks"
)

// Config tunes the Redis writer. The default of a field with a default tag is the tag; the
// tags declare the keys of the writer in the config file's sink_features section.
type Config struct {
	// MaxBatch is the most ops per pipeline.
	MaxBatch int `key:"redis_batch" default:"500" doc:"most Redis writes per pipeline"`
	// Linger is the longest a partial batch waits.
	Linger time.Duration `key:"redis_linger" default:"20ms" doc:"longest wait before a partial pipeline is sent"`
	// QueueSize bounds the jobs waiting to be written; Submit blocks when full (backpressure).
	// Default 4096. With the pipeline being written (at most MaxBatch jobs, since a job holds at
	// least one op), a writer holds at most QueueSize + MaxBatch jobs (Cap), however long Redis
	// is away: the processor submits one job per record and blocks on a full queue.
	QueueSize int
	// MinBackoff and MaxBackoff bound the retry delay after a failed pipeline (internal/retry:
	// doubling, jittered). Defaults 100ms, 5s.
	MinBackoff, MaxBackoff time.Duration
	Logger                 *slog.Logger
	// Metrics, if set, records each pipeline's size and time (stage sink-features).
	Metrics *ops.Stage
}

func (c Config) withDefaults() Config {
	c.MaxBatch, c.Linger = max(c.MaxBatch, 0), max(c.Linger, 0)
	conf.FillDefaults(&c) // MaxBatch, Linger
	if c.QueueSize <= 0 {
		c.QueueSize = 4096
	}
	if c.MinBackoff <= 0 {
		c.MinBackoff = 100 * time.Millisecond
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

type job struct {
	ops  []feast.Op
	done func(error)
}

// Writer writes ops to Redis in pipelines, in submission order, one pipeline at a time. A
// failed pipeline is retried with exponential backoff and jitter until it succeeds or the
// writer stops: nothing is dropped and nothing goes to a DLQ. A job's done is called with nil
// once all its ops are in Redis, in submission order, so a caller that commits offsets from
// done commits them in order.
type Writer struct {
	out     sinks.BatchWriter[[]Write] // the Pipeline: the writer makes one WriteBatch attempt at a time
	cfg     Config
	q       chan job
	stopped chan struct{}
	retries atomic.Int64
	written atomic.Int64
	// coalesced counts ops folded into a later op on the same key of their pipeline.
	coalesced atomic.Int64
	pending   atomic.Int64 // jobs submitted whose done has not been called yet
}

// NewWriter returns a writer; start it with Run.
func NewWriter(rdb goredis.Cmdable, cfg Config) *Writer {
	cfg = cfg.withDefaults()
	return &Writer{out: NewPipeline(rdb), cfg: cfg, q: make(chan job, cfg.QueueSize), stopped: make(chan struct{})}
}

// ErrWriterStopped is passed to done for jobs the writer did not write before it stopped.
var ErrWriterStopped = errors.New("redis: redis writer stopped")

// Submit queues ops; done (may be nil) is called when they are written, or with an error when
// the writer stops first. It blocks while the queue is full.
func (w *Writer) Submit(ctx context.Context, ops []feast.Op, done func(error)) error {
	w.pending.Add(1)
	finish := func(err error) {
		w.pending.Add(-1)
		if done != nil {
			done(err)
		}
	}
	select {
	case w.q <- job{ops: ops, done: finish}:
		return nil
	case <-w.stopped:
		w.pending.Add(-1)
		return ErrWriterStopped
	case <-ctx.Done():
		w.pending.Add(-1)
		return ctx.Err()
	}
}

// Pending is how many submitted jobs are not done yet: queued, or in the pipeline being
// written (or retried). It never exceeds Cap.
func (w *Writer) Pending() int64 { return w.pending.Load() }

// Cap is the most jobs the writer holds: QueueSize + MaxBatch.
func (w *Writer) Cap() int64 { return int64(w.cfg.QueueSize + w.cfg.MaxBatch) }

// Write submits ops and waits until they are written.
func (w *Writer) Write(ctx context.Context, ops ...feast.Op) error {
	ch := make(chan error, 1)
	if err := w.Submit(ctx, ops, func(err error) { ch <- err }); err != nil {
		return err
	}
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Retries is how many pipelines failed and were retried so far.
func (w *Writer) Retries() int64 { return w.retries.Load() }

// Written is how many submitted ops are in Redis so far, coalesced ones included.
func (w *Writer) Written() int64 { return w.written.Load() }

// Coalesced is how many of the written ops were not sent themselves, because a later op of
// the same pipeline wrote the same key (see coalesce).
func (w *Writer) Coalesced() int64 { return w.coalesced.Load() }

// coalesce turns a batch's ops into one write per key, in the order the keys first appear,
// and returns them with the number of ops they stand for. Redis ends in the same state as
// after sending every op in order:
//   - a row op (RequestOp, TenantOp, UserOp, ModelOp) writes its key's whole row, the same
//     fields every time, so a later row op on the key replaces an earlier one;
//   - otherwise the fields are merged, later values winning, as successive HSETs would;
//   - the TTL is the last positive one (HSET keeps a key's TTL; EXPIRE sets it).
//
// Rows are built here, once per key, rather than when each record is applied: of the many
// updates a busy tenant or model gets while one pipeline fills, only the last is ever built.
// They are built straight into one argument list for the whole batch, which each write's Args
// is a part of.
func coalesce(batch []job) (writes []Write, total int) {
	type pending struct {
		op     feast.Op       // the last row op (fields nil: not merged)
		fields map[string]any // merged fields, once an op without a row builder joined
		ttl    time.Duration
	}
	var order []*pending
	byKey := map[string]*pending{}
	for _, j := range batch {
		for _, op := range j.ops {
			total++
			pd, ok := byKey[op.Key]
			if !ok {
				pd = &pending{op: op, ttl: op.TTL}
				byKey[op.Key] = pd
				order = append(order, pd)
				continue
			}
			if op.TTL > 0 {
				pd.ttl = op.TTL
			}
			if pd.fields == nil && op.Build != nil && pd.op.Build != nil {
				pd.op = op
				continue
			}
			if pd.fields == nil {
				pd.fields = maps.Clone(pd.op.Row())
			}
			maps.Copy(pd.fields, op.Row())
		}
	}
	writes = make([]Write, 0, len(order))
	args := make([]any, 0, 16*len(order)) // a request row is 14 arguments; a tenant, user or model row more
	for _, pd := range order {
		start := len(args)
		op := pd.op
		if pd.fields != nil {
			op = feast.Op{Fields: pd.fields}
		}
		args = op.AppendArgs(args)
		writes = append(writes, Write{Key: pd.op.Key, Args: args[start:len(args):len(args)], TTL: pd.ttl})
	}
	return writes, total
}

// Run writes until ctx ends. Jobs not yet written then get ErrWriterStopped.
func (w *Writer) Run(ctx context.Context) error {
	defer func() {
		close(w.stopped)
		for {
			select {
			case j := <-w.q:
				if j.done != nil {
					j.done(ErrWriterStopped)
				}
			default:
				return
			}
		}
	}()
	var batch []job
	for {
		batch = batch[:0]
		select {
		case j := <-w.q:
			batch = append(batch, j)
		case <-ctx.Done():
			return nil
		}
		n := len(batch[0].ops)
		timer := time.NewTimer(w.cfg.Linger)
	fill:
		for n < w.cfg.MaxBatch {
			select {
			case j := <-w.q:
				batch = append(batch, j)
				n += len(j.ops)
			case <-timer.C:
				break fill
			case <-ctx.Done():
				break fill
			}
		}
		timer.Stop()
		if err := w.flush(ctx, batch); err != nil {
			for _, j := range batch {
				if j.done != nil {
					j.done(ErrWriterStopped)
				}
			}
			return nil
		}
		for _, j := range batch {
			if j.done != nil {
				j.done(nil)
			}
		}
	}
}

// flush writes one batch as one pipeline, retrying until it succeeds or ctx ends. HSET and
// EXPIRE are idempotent, so re-running a partly applied pipeline is safe. The batch's ops are
// coalesced first (see coalesce): a tenant or model row updated by many records of the batch
// is sent once, as of its last update.
func (w *Writer) flush(ctx context.Context, batch []job) error {
	start := time.Now()
	writes, total := coalesce(batch)
	if total == 0 {
		return nil
	}
	// The writes are idempotent: a failed pipeline is sent again until ctx ends.
	err := retry.Do(ctx, retry.Policy{Min: w.cfg.MinBackoff, Max: w.cfg.MaxBackoff}, w.out.Retryable, func(err error, attempt int, wait time.Duration) {
		w.retries.Add(1)
		w.cfg.Metrics.SinkError("retryable")
		w.cfg.Logger.Warn("redis write failed; retrying", "attempt", attempt, "keys", len(writes), "backoff", wait, "err", err)
	}, func() error { return w.out.WriteBatch(ctx, writes) })
	if err != nil {
		return err // ctx ended
	}
	w.written.Add(int64(total))
	w.coalesced.Add(int64(total - len(writes)))
	w.cfg.Metrics.Batch(len(writes))
	w.cfg.Metrics.Flush(time.Since(start))
	return nil
}
