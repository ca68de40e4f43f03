package clickhouse

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/internal/rollup"
)

// Mapping is what a Sink makes of the records it consumes, and the only part of it that knows
// its tables. There are four: the built-in tables (enrichedMapping, enriched.go), a declared
// stream's table (streamMapping, stream.go), the DLQ mirror (mirrorMapping, package
// sinks/clickhouse/dlqmirror) and the rollups (rollupMapping, package sinks/clickhouse/rollups),
// the last two stages of their own. TestMappingsListed holds this list and the docs to the
// code.
// The Sink owns everything around them — polling, buffering, flushing, retries, the DLQ, the
// ledger, the rollup marks and the commits — and never looks inside a row.
//
// The lifecycle: NewLoop (or New, NewStream) takes the mapping; Sink.Run calls Map from its
// own goroutine, one record at a time in the order polled, and Insert from the goroutine of
// the flush under way, one flush at a time, while Map goes on with the next batch: state the
// two share needs a lock. After Insert returned, the same flush goroutine reads each row's
// Tally (the ledger) and, for the rows not rejected, its Marks (Marked); then it commits. The
// Waiter and the Lander are lent for the one call they are passed to.
type Mapping interface {
	// Map turns rec into its row. A record at fault (it does not decode, a value breaks a rule
	// of the table) returns its fault instead, and goes to the DLQ with it. An outage (the
	// registry, ClickHouse) is waited out through w. An error stops the sink with rec and what
	// follows it uncommitted: ctx ended during an outage, or a change the table cannot follow.
	Map(ctx context.Context, w Waiter, rec *kgo.Record) (_ Row, fault, err error)
	// Insert lands rows, the rows of a batch's records in partition and offset order, through
	// in, and returns the rows ClickHouse rejected by their index in rows (each goes to the DLQ
	// once). An error stops the sink with the batch uncommitted.
	Insert(ctx context.Context, in Lander, rows []Row) (rejected map[int]error, err error)
}

// Waiter is how a mapping waits out an outage while it maps a record: the Sink's retrier
// (retry.go), lent to Map.
type Waiter interface {
	// Await runs op until it succeeds, fails with an error retryable refuses, or ctx ends,
	// holding up polling meanwhile; what names the system for the log.
	Await(ctx context.Context, what string, retryable func(error) bool, op func() error) error
	// Retry runs op like Await, with fetching paused while it retries; each retry also counts
	// in attempts when it is not nil.
	Retry(ctx context.Context, what string, attempts *atomic.Int64, retryable func(error) bool, op func(context.Context) error) error
}

// Lander is how a mapping's Insert lands a flush's rows: the flush's inserter (insert.go).
type Lander interface {
	// Insert inserts b; row i of b belongs to the flush's record owners[i], and the owners of
	// the rows ClickHouse rejects are recorded in rejects. owners nil: b belongs to no record,
	// and a rejection stops the sink.
	Insert(ctx context.Context, b Batch, owners []int, rejects map[int]error) error
	// InsertAll inserts the batches at once and returns the rows rejected.
	InsertAll(ctx context.Context, batches ...Owned) (map[int]error, error)
	// Retry runs op until it succeeds, fails with an error retryable refuses (nil: none), or
	// ctx ends, with fetching paused and each retry counted in the flush's: for the work of a
	// flush that is not an insert (screening texts, re-aggregating the rollups).
	Retry(ctx context.Context, what string, retryable func(error) bool, op func(context.Context) error) error
	// Statements is the connection a flush runs statements on (the rollups' re-aggregation,
	// the DLQ mirror's sweep), nil when the sink has none (a test's writer without one).
	Statements() rollup.Conn
}

// Owned is a batch and, for each of its rows, the index of the record it belongs to.
type Owned struct {
	Batch  Batch
	Owners []int
}

// Row is what one record becomes under its mapping: the Sink buffers it and hands it back to
// the same mapping's Insert, which alone knows its type.
type Row interface {
	// Tally is what the record counts in its flush's ledger row once its rows landed.
	Tally() Tally
}

// Marked is a Row that lands in tables the rollups read: Marks calls add with each such table
// and the row's time in it, and the flush marks those minutes for the rollup loop (mark).
type Marked interface {
	Marks(add func(source string, at time.Time))
}

// Tally is one record's part of a sink_ledger row.
type Tally struct {
	Rows      int       // rows in the mapping's tables (moderation_hits apart)
	HitRows   int       // rows in moderation_hits
	EventTime time.Time // the record's event time; zero when it has none
	Epoch     int32     // the replay epoch it was written in
}

// Loop says how a Sink around a mapping of another package (NewLoop) differs from the
// built-in sink's: the zero Loop has no DLQ, no ledger, no marks, and finishes its flushes at
// a stop.
type Loop struct {
	// DLQStage is the stage the loop's dead letters name, written to Config.DLQTopic; "": the
	// loop has no DLQ, and a record it cannot land stops it.
	DLQStage string
	// Ledger: each flush inserts one sink_ledger row per partition.
	Ledger bool
	// Marks is the topic each flush writes its rollup marks to (rollup_marks.go); "": none.
	Marks string
	// AbandonOnStop: at a stop, the flush under way is cancelled and no last flush is made;
	// what they held stays uncommitted for the partition's next owner. For a flush that is
	// safe to repeat and may be long (the rollups' re-aggregation).
	AbandonOnStop bool
	// BufferMetrics: besides its stage's shared families (RunConfig.Metrics), the loop
	// exports MetricBuffered and MetricDropped.
	BufferMetrics bool
}

// NewLoop builds the loop around m on cfg's group and topic, as l says. It validates
// nothing: the mapping's package validates its config (and rc.ClickHouse) first.
func NewLoop(cfg Config, rc RunConfig, m Mapping, l Loop) *Sink {
	st := rc.Metrics
	if !l.BufferMetrics {
		rc.Metrics = nil // newSink registers the buffer's families for the stage it is given
	}
	s := newSink(cfg, rc, m, l.DLQStage)
	s.ledger, s.marks, s.abandonOnStop = l.Ledger, l.Marks, l.AbandonOnStop
	if !l.BufferMetrics {
		s.rc.Metrics, s.metrics = st, &metrics{stage: st}
		s.retry.metrics = s.metrics
	}
	return s
}
