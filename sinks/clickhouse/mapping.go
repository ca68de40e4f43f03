package clickhouse

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// mapping is what a Sink makes of the records it consumes, and the only part of it that knows
// its tables. There are three: the built-in tables (enrichedMapping, enriched.go), a declared
// stream's table (streamMapping, stream.go) and the DLQ mirror (mirrorMapping, mirror.go).
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
	mapRecord(ctx context.Context, r *retrier, rec *kgo.Record) (_ row, fault, err error)
	// insert lands rows, the rows of a batch's records in partition and offset order, through
	// in, and returns the rows ClickHouse rejected by their index in rows (each goes to the DLQ
	// once). An error stops the sink with the batch uncommitted.
	insert(ctx context.Context, in *inserter, rows []row) (rejected map[int]error, err error)
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
