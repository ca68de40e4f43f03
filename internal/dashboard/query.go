package dashboard

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Column is a result column: its name and how the page reads its values.
type Column struct {
	Name string `json:"name"`
	// Type is "time" (Unix seconds), "number", "string" or "other" (arrays and the like, as JSON).
	Type string `json:"type"`
	// DBType is ClickHouse's name of the column's type, e.g. "DateTime" or "UInt64".
	DBType string `json:"db_type"`
}

// Result is a panel's answer.
type Result struct {
	Panel     string   `json:"panel"`
	From      int64    `json:"from"` // Unix seconds
	To        int64    `json:"to"`
	IntervalS int64    `json:"interval_s"`
	Columns   []Column `json:"columns"`
	Rows      [][]any  `json:"rows"`
	Truncated bool     `json:"truncated,omitempty"` // more rows than Config.MaxRows; the rest were dropped
	TookMs    int64    `json:"took_ms"`
	// Rollup says which minutes came from the panel's rollup and which from raw rows; nil for a
	// panel without a rollup, or when the server could not read the watermarks (RunPanel
	// leaves it nil: the server fills it in).
	Rollup *Coverage `json:"rollup,omitempty"`
}

// RunPanel expands p's macros for r and runs it on conn, returning at most maxRows rows.
// Times come back as Unix seconds, and NaN or infinite floats (a quantile of nothing) as null.
func RunPanel(ctx context.Context, conn driver.Conn, p Panel, r Range, maxRows int) (Result, error) {
	sql, err := Expand(p.SQL, r)
	if err != nil {
		return Result{}, fmt.Errorf("panel %s: %w", p.ID, err)
	}
	start := time.Now()
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		return Result{}, fmt.Errorf("panel %s: query: %w", p.ID, err)
	}
	defer rows.Close()
	res := Result{Panel: p.ID, From: r.From.Unix(), To: r.To.Unix(), IntervalS: int64(r.Interval / time.Second), Rows: [][]any{}}
	types := rows.ColumnTypes()
	for _, ct := range types {
		res.Columns = append(res.Columns, Column{Name: ct.Name(), Type: kindOf(ct.DatabaseTypeName()), DBType: ct.DatabaseTypeName()})
	}
	for rows.Next() {
		if len(res.Rows) >= maxRows {
			res.Truncated = true
			break
		}
		dest := make([]any, len(types))
		for i, ct := range types {
			dest[i] = reflect.New(ct.ScanType()).Interface()
		}
		if err := rows.Scan(dest...); err != nil {
			return Result{}, fmt.Errorf("panel %s: read row %d: %w", p.ID, len(res.Rows)+1, err)
		}
		row := make([]any, len(dest))
		for i, d := range dest {
			row[i] = jsonValue(reflect.ValueOf(d).Elem())
		}
		res.Rows = append(res.Rows, row)
	}
	if err := rows.Err(); err != nil {
		return Result{}, fmt.Errorf("panel %s: read rows: %w", p.ID, err)
	}
	res.TookMs = time.Since(start).Milliseconds()
	return res, nil
}

// kindOf maps a ClickHouse type name to the page's column type.
func kindOf(dbType string) string {
	t := dbType
	for range 2 { // LowCardinality(Nullable(String)) and the like
		for _, wrap := range []string{"Nullable(", "LowCardinality("} {
			if strings.HasPrefix(t, wrap) && strings.HasSuffix(t, ")") {
				t = t[len(wrap) : len(t)-1]
			}
		}
	}
	switch {
	case strings.HasPrefix(t, "DateTime") || t == "Date":
		return "time"
	case strings.HasPrefix(t, "Int") || strings.HasPrefix(t, "UInt") || strings.HasPrefix(t, "Float") || strings.HasPrefix(t, "Decimal"):
		return "number"
	case t == "String" || strings.HasPrefix(t, "FixedString") || strings.HasPrefix(t, "Enum"):
		return "string"
	}
	return "other"
}

// jsonValue turns a scanned value into what encoding/json writes as the page expects.
func jsonValue(v reflect.Value) any {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	switch x := v.Interface().(type) {
	case time.Time:
		return x.Unix()
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil
		}
		return x
	case float32:
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil
		}
		return f
	}
	if v.Kind() == reflect.Slice && v.Type().Elem().Kind() != reflect.Uint8 {
		out := make([]any, v.Len())
		for i := range out {
			out[i] = jsonValue(v.Index(i))
		}
		return out
	}
	return v.Interface()
}
