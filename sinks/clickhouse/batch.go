package clickhouse

import (
	"context"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
)

// Batch is the rows of one INSERT into one table: what every insert of the package sends
// (Writer.WriteBatch; the audit tables go through chschema.InsertRows), whatever the rows are.
// Each batch encodes its own columns, so the code that sends it knows no row type:
//   - tableRows (the built-in tables, the ledger, TableBatch's: the DLQ mirror's): rows of a
//     struct whose `ch` tags name the columns, appended column by column, one typed slice a
//     column (columns.go: no reflection per row, no boxing per value);
//   - streamBatch (stream_rows.go): a declared stream's rows, whose column types are known only
//     at run time, appended row by row.
type Batch interface {
	// Table is the table the rows go to.
	Table() string
	// Insert is the statement to prepare, with the columns named: INSERT INTO t (a, b) VALUES.
	// 18.16 takes no other insert (a PrepareBatch without the columns fails, an Exec hangs).
	Insert() string
	// Len is the number of rows.
	Len() int
	// Append appends the rows to b, prepared from Insert. A value the driver cannot take fails
	// with ErrClickHouseRejected, so the sink narrows the batch down to the rows at fault; a
	// batch whose columns are not the statement's fails with ErrClickHouseFatal.
	Append(b driver.Batch) error
	// Slice is the batch of rows [i, j), for halving a rejected batch.
	Slice(i, j int) Batch
}

// insert is the one INSERT: b's statement prepared on conn, b's rows appended, the block sent.
func insert(ctx context.Context, conn driver.Conn, b Batch) error {
	db, err := conn.PrepareBatch(ctx, b.Insert())
	if err != nil {
		return err
	}
	if err := b.Append(db); err != nil {
		db.Abort()
		return err
	}
	return db.Send()
}

// TableBatch is the Batch of rows of a struct T whose `ch` tags name the columns of table, in
// field order; columns lists the rows' values column by column in that order (columns.go's
// lists by hand, or chschema.StructColumns). For the mappings of other packages (the DLQ
// mirror's tables).
func TableBatch[T any](table string, rows []T, columns func([]T) []any) Batch {
	return tableRows[T]{table, rows, columns}
}

// tableRows is a Batch of rows of a struct T whose `ch` tags name the columns, in field order;
// columns lists the rows' values column by column in that order.
type tableRows[T any] struct {
	table   string
	rows    []T
	columns func([]T) []any
}

func (t tableRows[T]) Table() string { return t.table }

func (t tableRows[T]) Insert() string {
	var zero T
	return chschema.InsertSQL(t.table, zero)
}

func (t tableRows[T]) Len() int { return len(t.rows) }

func (t tableRows[T]) Append(b driver.Batch) error { return appendColumns(b, t.columns(t.rows)) }

func (t tableRows[T]) Slice(i, j int) Batch {
	t.rows = t.rows[i:j]
	return t
}

// landedRows is a tableRows whose rows carry landed_time_ms (inference_results,
// gateway_logs): the Writer stamps them at each attempt (stamped).
type landedRows[T any] struct {
	tableRows[T]
	at func(*T) *int64 // the row's landed_time_ms
}

func (l landedRows[T]) Slice(i, j int) Batch {
	l.rows = l.rows[i:j]
	return l
}

func (l landedRows[T]) landed() int64 {
	if len(l.rows) == 0 {
		return 0
	}
	return *l.at(&l.rows[0])
}

func (l landedRows[T]) stamp(ms int64) {
	for i := range l.rows {
		*l.at(&l.rows[i]) = ms
	}
}

// stamped is a Batch whose rows carry landed_time_ms, the moment their INSERT was sent.
type stamped interface {
	landed() int64  // the stamp the rows carry, 0 before their first attempt
	stamp(ms int64) // sets it on every row
}

// The batches of the sinks' row types, their columns listed by hand (columns.go).
func inferenceBatch(rows []InferenceRow) Batch {
	return landedRows[InferenceRow]{tableRows[InferenceRow]{TableInference, rows, inferenceColumns},
		func(r *InferenceRow) *int64 { return &r.LandedTimeMs }}
}

func gatewayBatch(rows []GatewayRow) Batch {
	return landedRows[GatewayRow]{tableRows[GatewayRow]{TableGateway, rows, gatewayColumns},
		func(r *GatewayRow) *int64 { return &r.LandedTimeMs }}
}

func hitBatch(rows []HitRow) Batch { return tableRows[HitRow]{TableHits, rows, hitColumns} }

func ledgerBatch(rows []LedgerRow) Batch {
	return tableRows[LedgerRow]{TableLedger, rows, ledgerColumns}
}
