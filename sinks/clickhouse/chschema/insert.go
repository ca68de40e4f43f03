package chschema

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// InsertRows writes rows to table in one batch, with the columns named by T's `ch` field tags
// and listed by reflection (StructColumns): for the small audit tables, replay_log and the
// migration ledgers. The sink's rows have their columns listed by hand (the sink's columns.go).
func InsertRows[T any](ctx context.Context, conn driver.Conn, table string, rows []T) error {
	if len(rows) == 0 {
		return nil
	}
	if err := insertColumns(ctx, conn, InsertSQL(table, rows[0]), StructColumns(rows)); err != nil {
		return fmt.Errorf("clickhouse: insert %s: %w", table, err)
	}
	return nil
}

// insertColumns prepares query, appends cols (one slice per column, in the statement's column
// order) and sends the block.
func insertColumns(ctx context.Context, conn driver.Conn, query string, cols []any) error {
	b, err := conn.PrepareBatch(ctx, query)
	if err != nil {
		return err
	}
	if n := len(b.Columns()); n != len(cols) {
		b.Abort()
		return fmt.Errorf("the insert has %d columns and the rows %d", n, len(cols))
	}
	for i, c := range cols {
		if err := b.Column(i).Append(c); err != nil {
			b.Abort()
			return fmt.Errorf("column %d: %w", i, err)
		}
	}
	return b.Send()
}

// InsertSQL returns "INSERT INTO table (c1, c2, ...) VALUES" with the columns named by row's
// ch tags, in field order: 18.16 rejects an INSERT without named columns.
func InsertSQL(table string, row any) string {
	t := reflect.TypeOf(row)
	cols := make([]string, t.NumField())
	for i := range cols {
		cols[i] = t.Field(i).Tag.Get("ch")
	}
	return "INSERT INTO " + table + " (" + strings.Join(cols, ", ") + ") VALUES"
}

// StructColumns lists rows column by column by reflection, one slice of each field's type a
// field, in field order (what the sink's columns.go lists do by hand for its rows).
func StructColumns[T any](rows []T) []any {
	t := reflect.TypeFor[T]()
	cols := make([]any, t.NumField())
	for j := range cols {
		col := reflect.MakeSlice(reflect.SliceOf(t.Field(j).Type), len(rows), len(rows))
		for i := range rows {
			col.Index(i).Set(reflect.ValueOf(&rows[i]).Elem().Field(j))
		}
		cols[j] = col.Interface()
	}
	return cols
}
