package clickhouse

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
)

// streamCols is one version of a stream table's columns: the schema's, and the names an
// INSERT lists (backflow's columns included). A schema that adds or retypes columns makes a
// new version; rows keep the version they were decoded with.
type streamCols struct {
	cols   []chschema.Column
	insert []string // backquoted
	event  int      // index of the event-time column in cols, -1 without one
	screen []int    // indexes of the screened columns in cols
}

func newStreamCols(c chschema.StreamConfig, cols []chschema.Column) *streamCols {
	sc := &streamCols{cols: cols, event: -1}
	for i, col := range cols {
		if c.EventTime != "" && col.Field == c.EventTime && col.MapPart == "" {
			sc.event = i
		}
		if slices.Contains(c.Screen, col.Field) {
			sc.screen = append(sc.screen, i)
		}
	}
	for _, col := range append(slices.Clone(cols), c.MetaColumns()...) {
		sc.insert = append(sc.insert, chschema.QuoteIdent(col.Name))
	}
	return sc
}

// retyped is the version of sc whose columns have the types of types (column name → type), or
// nil when none of them changes.
func (sc *streamCols) retyped(c chschema.StreamConfig, types map[string]string) *streamCols {
	var cols []chschema.Column
	for i, col := range sc.cols {
		if typ, ok := types[col.Name]; ok && typ != col.Type {
			if cols == nil {
				cols = slices.Clone(sc.cols)
			}
			cols[i].Type = typ
		}
	}
	if cols == nil {
		return nil
	}
	return newStreamCols(c, cols)
}

// row is rec's row from its schema's values (chschema.RowValues of sc.cols) and backflow's own columns:
// its partition, offset and writer schema id, its dedupe window, and room for the words
// screen finds.
func (sc *streamCols) row(c chschema.StreamConfig, vals []any, rec *kgo.Record, schemaID int) *streamRow {
	vals = append(vals, rec.Partition, uint64(max(rec.Offset, 0)), uint32(schemaID))
	if c.DedupeWindow > 0 {
		var w uint64
		if et, ok := vals[sc.event].(time.Time); ok && et.Unix() > 0 {
			w = uint64(et.Unix()) / uint64(c.DedupeWindow/time.Second)
		}
		vals = append(vals, w)
	}
	if len(c.Screen) > 0 {
		vals = append(vals, []string(nil)) // filled in by screen, once per flush
	}
	return &streamRow{cols: sc, vals: vals}
}

// streamRow is one record's row: the values of cols.insert, in order.
type streamRow struct {
	cols *streamCols
	vals []any
}

// Tally: a record is one row of the stream's table, at its event time when it has one.
func (r *streamRow) Tally() Tally {
	var et time.Time
	if i := r.cols.event; i >= 0 {
		et, _ = r.vals[i].(time.Time)
	}
	return Tally{Rows: 1, EventTime: et}
}

// streamBatch is a Batch of one stream's rows, all of one column version: their types are
// known only at run time, so they are appended row by row, each value converted by the driver.
type streamBatch struct {
	table string
	rows  []*streamRow
}

func (b streamBatch) Table() string { return b.table }

func (b streamBatch) Insert() string {
	return "INSERT INTO " + b.table + " (" + strings.Join(b.rows[0].cols.insert, ", ") + ") VALUES"
}

func (b streamBatch) Len() int { return len(b.rows) }

func (b streamBatch) Append(db driver.Batch) error {
	for _, r := range b.rows {
		if err := db.Append(r.vals...); err != nil {
			return fmt.Errorf("%w: %w", ErrClickHouseRejected, err)
		}
	}
	return nil
}

func (b streamBatch) Slice(i, j int) Batch {
	b.rows = b.rows[i:j]
	return b
}
