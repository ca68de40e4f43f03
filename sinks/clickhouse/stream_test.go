package clickhouse

import (
	"reflect"
	"strings"
	"testing"

	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
)

// TestRecastRowsAfterModify: rows decoded before a MODIFY COLUMN changed their columns' types
// are recast to the table's types before they are inserted, one new column version for the
// rows that shared the old one; rows of the current version are left alone.
func TestRecastRowsAfterModify(t *testing.T) {
	sc := chschema.StreamConfig{Name: "s", Topic: "s"}.WithDefaults()
	cols := []chschema.Column{{Name: "n", Field: "n", Type: "Int32"}, {Name: "e", Field: "e", Type: "Enum8('A' = 1)"}, {Name: "xs", Field: "xs", Type: "Array(Float32)"}}
	old := newStreamCols(sc, cols)
	st := &streamMapping{sc: sc, types: map[string]string{"n": "Int64", "e": "Enum8('A' = 1, 'B' = 2)", "xs": "Array(Float64)"}}
	cur := newStreamCols(sc, []chschema.Column{{Name: "n", Field: "n", Type: "Int64"}, {Name: "e", Field: "e", Type: "Enum8('A' = 1, 'B' = 2)"}, {Name: "xs", Field: "xs", Type: "Array(Float64)"}})
	ps := []*streamRow{
		{cols: old, vals: []any{int32(7), "A", []float32{0.5}, int32(0), uint64(3), uint32(1)}},
		{cols: old, vals: []any{int32(-2), "A", []float32(nil), int32(0), uint64(4), uint32(1)}},
		{cols: cur, vals: []any{int64(5_000_000_000), "B", []float64{2}, int32(0), uint64(5), uint32(2)}},
	}
	if err := st.recast(ps); err != nil {
		t.Fatal(err)
	}
	want := [][]any{{int64(7), "A", []float64{0.5}, int32(0), uint64(3), uint32(1)}, {int64(-2), "A", []float64{}, int32(0), uint64(4), uint32(1)},
		{int64(5_000_000_000), "B", []float64{2}, int32(0), uint64(5), uint32(2)}}
	for i, p := range ps {
		if !reflect.DeepEqual(p.vals, want[i]) {
			t.Errorf("row %d: %#v, want %#v", i, p.vals, want[i])
		}
	}
	if ps[0].cols != ps[1].cols || ps[0].cols == old || ps[2].cols != cur {
		t.Errorf("column versions: the two older rows should share one new version, the current row keep its own")
	}
	if got := ps[0].cols.cols[0].Type + " " + ps[0].cols.cols[2].Type; got != "Int64 Array(Float64)" {
		t.Errorf("recast rows' column types %s, want Int64 Array(Float64)", got)
	}
	if got := strings.Join(ps[0].cols.insert, ","); got != strings.Join(old.insert, ",") {
		t.Errorf("insert columns %s, want %s", got, strings.Join(old.insert, ","))
	}
}
