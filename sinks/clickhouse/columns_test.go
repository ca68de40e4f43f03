package clickhouse

import (
	"fmt"
	"reflect"
	"testing"
	"time"
)

// fill sets every field of each row to a value of its own (row i, field j), so a column
// taken from the wrong field, or in the wrong place, holds values that differ.
func fill[T any](n int) []T {
	rows := make([]T, n)
	for i := range rows {
		v := reflect.ValueOf(&rows[i]).Elem()
		for j := range v.NumField() {
			f := v.Field(j)
			seed := i*100 + j + 1
			switch f.Kind() {
			case reflect.String:
				f.SetString(fmt.Sprintf("v%d", seed))
			case reflect.Int16, reflect.Int32, reflect.Int64:
				f.SetInt(int64(seed))
			case reflect.Uint16, reflect.Uint32, reflect.Uint64:
				f.SetUint(uint64(seed))
			case reflect.Float32:
				f.SetFloat(float64(seed) / 4)
			case reflect.Pointer: // *string; row 1 leaves it nil (NULL)
				if i != 1 {
					s := fmt.Sprintf("p%d", seed)
					f.Set(reflect.ValueOf(&s))
				}
			case reflect.Slice:
				e := reflect.MakeSlice(f.Type(), 2, 2)
				for k := range 2 {
					switch e.Index(k).Kind() {
					case reflect.String:
						e.Index(k).SetString(fmt.Sprintf("e%d.%d", seed, k))
					case reflect.Float32:
						e.Index(k).SetFloat(float64(seed*10 + k))
					}
				}
				f.Set(e)
			case reflect.Struct: // time.Time
				f.Set(reflect.ValueOf(time.Unix(int64(1_700_000_000+seed), 0).UTC()))
			default:
				panic(fmt.Sprintf("fill: no value for %s %s", v.Type().Field(j).Name, f.Kind()))
			}
		}
	}
	return rows
}

// checkColumns holds cols to rows: one column per field, in field (and so insertSQL's) order,
// each holding that field of every row.
func checkColumns[T any](t *testing.T, rows []T, cols []any) {
	t.Helper()
	typ := reflect.TypeOf(rows).Elem()
	if len(cols) != typ.NumField() {
		t.Fatalf("%s: %d columns for %d fields", typ.Name(), len(cols), typ.NumField())
	}
	for j, c := range cols {
		cv := reflect.ValueOf(c)
		if cv.Kind() != reflect.Slice || cv.Len() != len(rows) {
			t.Fatalf("%s column %d (%s): %T of length %d, want a slice of %d", typ.Name(), j, typ.Field(j).Tag.Get("ch"), c, cv.Len(), len(rows))
		}
		for i := range rows {
			want := reflect.ValueOf(rows[i]).Field(j).Interface()
			if got := cv.Index(i).Interface(); !reflect.DeepEqual(got, want) {
				t.Errorf("%s column %d (%s), row %d = %v, want %v", typ.Name(), j, typ.Field(j).Tag.Get("ch"), i, got, want)
			}
		}
	}
}

func TestColumnsFollowTags(t *testing.T) {
	const n = 3
	inf := fill[InferenceRow](n)
	checkColumns(t, inf, inferenceColumns(inf))
	gw := fill[GatewayRow](n)
	checkColumns(t, gw, gatewayColumns(gw))
	hits := fill[HitRow](n)
	checkColumns(t, hits, hitColumns(hits))
	ledger := fill[LedgerRow](n)
	checkColumns(t, ledger, ledgerColumns(ledger))
}
