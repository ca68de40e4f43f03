package clickhouse

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/internal/rollup"
)

// mapping is what a Sink makes of the records it consumes, and the only part of it that knows
// its tables. There are four: the built-in tables (enrichedMapping, enriched.go), a declared
// stream's table (streamMapping, stream.go), the DLQ mirror (mirrorMapping, mirror.go) and the
// rollups (rollupMapping, rollups.go). TestMappingsListed holds this list and the docs to the
// code.
// The Sink owns everything around them — polling, buffering, flushing, retries, the DLQ, the
// ledger and the commits — and never looks inside a row.
//
// The Sink calls mapRecord from Run's goroutine, one record at a time in the order polled,
// and insert from the flush under way, one flush at a time, while mapRecord goes on with the
// next batch.
type mapping interface {
	// mapRecord turns rec into its row. A record at fault (it does not decode, a value breaks
	// a rule of the table) returns its fault instead, and goes to the DLQ with it. An outage
	// (the registry, ClickHouse) is waited out through r. An error stops the sink with rec
	// and what follows it uncommitted: ctx ended during an outage, or a change the table
	// cannot follow.
	mapRecord(ctx context.Context, r waiter, rec *kgo.Record) (_ row, fault, err error)
	// insert lands rows, the rows of a batch's records in partition and offset order, through
	// in, and returns the rows ClickHouse rejected by their index in rows (each goes to the DLQ
	// once). An error stops the sink with the batch uncommitted.
	insert(ctx context.Context, in lander, rows []row) (rejected map[int]error, err error)
}

// waiter is how a mapping waits out an outage while it maps a record: the Sink's retrier
// (retry.go), lent to it.
type waiter interface {
	// await runs op until it succeeds, fails with an error retryable refuses, or ctx ends,
	// holding up polling meanwhile; what names the system for the log.
	await(ctx context.Context, what string, retryable func(error) bool, op func() error) error
	// retry runs op like await, with fetching paused while it retries; each retry also counts
	// in attempts when it is not nil.
	retry(ctx context.Context, what string, attempts *atomic.Int64, retryable func(error) bool, op func(context.Context) error) error
}

// lander is how a mapping's insert lands a flush's rows: the flush's inserter (insert.go).
type lander interface {
	// insert inserts b; row i of b belongs to the flush's record owners[i], and the owners of
	// the rows ClickHouse rejects are recorded in rejects.
	insert(ctx context.Context, b Batch, owners []int, rejects map[int]error) error
	// insertAll inserts the batches at once and returns the rows rejected.
	insertAll(ctx context.Context, batches ...owned) (map[int]error, error)
	// retry runs op until it succeeds, fails with an error retryable refuses (nil: none), or
	// ctx ends, with fetching paused and each retry counted in the flush's: for the work of a
	// flush that is not an insert (screening texts, re-aggregating the rollups).
	retry(ctx context.Context, what string, retryable func(error) bool, op func(context.Context) error) error
	// statements is the connection a flush runs statements on (the rollups' re-aggregation),
	// nil when the sink has none (a test's writer).
	statements() rollup.Conn
}

// row is what one record becomes under its mapping: the Sink buffers it and hands it back to
// the same mapping's insert, which alone knows its type.
type row interface {
	// tally is what the record counts in its flush's ledger row once its rows landed.
	tally() tally
}

// tally is one record's part of a sink_ledger row.
type tally struct {
	rows      int       // rows in the mapping's tables (moderation_hits apart)
	hitRows   int       // rows in moderation_hits
	eventTime time.Time // the record's event time; zero when it has none
	epoch     int32     // the replay epoch it was written in
}
