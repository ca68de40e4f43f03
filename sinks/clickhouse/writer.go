package clickhouse

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/backflowhq/backflow/sinks"
)

// Table is one batch for one table: Rows is a slice of one of the row types (InferenceRow,
// GatewayRow, HitRow, LedgerRow, DLQRow), whose `ch` tags name the columns, or of a declared
// stream's rows (stream.go), which carry their column names.
type Table struct {
	Name string
	Rows any
}

// Writer is the ClickHouse side of the sink and of the DLQ mirror (sinks.BatchWriter): each
// WriteBatch is one insert of one table's rows. The sink inserts a flush's tables at once, so
// WriteBatch may be called concurrently: each insert takes a connection of its own from the
// pool. Rows written twice collapse (ReplacingMergeTree by request id and version).
type Writer struct {
	conn    driver.Conn
	timeout time.Duration
	// sameBlock: a retried attempt sends the very block the failed one sent (cluster mode,
	// see forCluster).
	sameBlock bool
}

var _ sinks.BatchWriter[Table] = (*Writer)(nil)

// NewWriter returns the batch writer over conn; each insert may take insertTimeout at most.
func NewWriter(conn driver.Conn, insertTimeout time.Duration) *Writer {
	return &Writer{conn: conn, timeout: insertTimeout}
}

// WriteBatch is one attempt at inserting t's rows: one PrepareBatch with the columns named (the
// only insert that works on every server version we support), the rows appended column by
// column (columns.go). It stamps inference and gateway rows with landed_time_ms, the moment
// this attempt started. Rows the driver cannot append fail with ErrClickHouseRejected.
func (w *Writer) WriteBatch(ctx context.Context, t Table) error {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	var sql string
	var cols []any
	landed := w.landedTime(t)
	switch rs := t.Rows.(type) {
	case []InferenceRow:
		for i := range rs {
			rs[i].LandedTimeMs = landed
		}
		sql, cols = insertSQL(t.Name, InferenceRow{}), inferenceColumns(rs)
	case []GatewayRow:
		for i := range rs {
			rs[i].LandedTimeMs = landed
		}
		sql, cols = insertSQL(t.Name, GatewayRow{}), gatewayColumns(rs)
	case []HitRow:
		sql, cols = insertSQL(t.Name, HitRow{}), hitColumns(rs)
	case []LedgerRow:
		sql, cols = insertSQL(t.Name, LedgerRow{}), ledgerColumns(rs)
	case []DLQRow:
		sql, cols = insertSQL(t.Name, DLQRow{}), dlqColumns(rs)
	case []streamRow:
		return appendStreamRows(ctx, w.conn, t.Name, rs)
	default:
		return fmt.Errorf("%w: no insert for %T", ErrClickHouseFatal, t.Rows)
	}
	b, err := w.conn.PrepareBatch(ctx, sql)
	if err != nil {
		return err
	}
	if err := appendColumns(b, cols); err != nil {
		b.Abort()
		return err
	}
	return b.Send()
}

// Retryable implements sinks.BatchWriter with IsRetryable: an outage, a timeout or an
// overloaded server is retried; a rejected batch (IsRejected) is bisected to its bad rows,
// which are dead-lettered; a fatal error (IsFatal) stops the sink uncommitted.
func (w *Writer) Retryable(err error) bool { return IsRetryable(err) }

// Close implements sinks.BatchWriter: it closes the connection pool.
func (w *Writer) Close() error { return w.conn.Close() }
