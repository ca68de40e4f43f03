package chschema

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"
)

// agentTaskEvent is an agent event bus's record: every kind of field the mapping handles.
const agentTaskEvent = `{
  "type": "record", "name": "AgentTaskEvent", "namespace": "ai.agents",
  "fields": [
    {"name": "event_id", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "task_id", "type": "string"},
    {"name": "event_time", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["QUEUED", "RUNNING", "DONE", "FAILED"]}},
    {"name": "attempt", "type": "int"},
    {"name": "ok", "type": "boolean"},
    {"name": "cost", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 4}},
    {"name": "score", "type": ["null", "double"], "default": null},
    {"name": "agent", "type": {"type": "record", "name": "Agent", "fields": [
      {"name": "id", "type": "string"},
      {"name": "model", "type": ["null", "string"], "default": null}
    ]}},
    {"name": "parent", "type": ["null", {"type": "record", "name": "Parent", "fields": [{"name": "id", "type": "long"}]}], "default": null},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "tool_calls", "type": {"type": "array", "items": {"type": "record", "name": "ToolCall", "fields": [
      {"name": "tool", "type": "string"},
      {"name": "latency_ms", "type": ["null", "int"]}
    ]}}},
    {"name": "attrs", "type": {"type": "map", "values": "long"}, "default": {}},
    {"name": "result", "type": ["null", "string", "long"], "default": null},
    {"name": "digest", "type": {"type": "fixed", "name": "Digest", "size": 16}}
  ]}`

func TestDeriveColumns(t *testing.T) {
	s := avro.MustParse(agentTaskEvent)
	cols, err := DeriveColumns(s, Capabilities{})
	if err != nil {
		t.Fatal(err)
	}
	want := []Column{
		{Name: "event_id", Type: "UUID", Field: "event_id"},
		{Name: "task_id", Type: "String", Field: "task_id"},
		{Name: "event_time", Type: "DateTime", Field: "event_time"},
		{Name: "day", Type: "Date", Field: "day"},
		{Name: "state", Type: "Enum8('QUEUED' = 1, 'RUNNING' = 2, 'DONE' = 3, 'FAILED' = 4)", Field: "state"},
		{Name: "attempt", Type: "Int32", Field: "attempt"},
		{Name: "ok", Type: "UInt8", Field: "ok"},
		{Name: "cost", Type: "Decimal(12, 4)", Field: "cost"},
		{Name: "score", Type: "Nullable(Float64)", Field: "score", HasDefault: true},
		{Name: "agent_id", Type: "String", Field: "agent.id"},
		{Name: "agent_model", Type: "Nullable(String)", Field: "agent.model", HasDefault: true},
		{Name: "parent_id", Type: "Nullable(Int64)", Field: "parent.id", HasDefault: true, Branches: []string{"ai.agents.Parent", ""}},
		{Name: "tags", Type: "Array(String)", Field: "tags"},
		{Name: "tool_calls_tool", Type: "Array(String)", Field: "tool_calls.tool"},
		{Name: "tool_calls_latency_ms", Type: "Array(Nullable(Int32))", Field: "tool_calls.latency_ms"},
		{Name: "attrs_keys", Type: "Array(String)", Field: "attrs", MapPart: MapKeys, HasDefault: true},
		{Name: "attrs_values", Type: "Array(Int64)", Field: "attrs", MapPart: MapValues, HasDefault: true},
		{Name: "result", Type: "String", Field: "result", JSON: true, HasDefault: true},
		{Name: "digest", Type: "FixedString(16)", Field: "digest"},
	}
	if !reflect.DeepEqual(cols, want) {
		for i := range max(len(cols), len(want)) {
			var g, w Column
			if i < len(cols) {
				g = cols[i]
			}
			if i < len(want) {
				w = want[i]
			}
			if !reflect.DeepEqual(g, w) {
				t.Errorf("column %d = %+v, want %+v", i, g, w)
			}
		}
	}
	// A current server has millisecond timestamps.
	cols, err = DeriveColumns(s, Capabilities{DateTime64: true})
	if err != nil || cols[2].Type != "DateTime64(3)" {
		t.Errorf("with DateTime64: %v %+v", err, cols[2])
	}
}

func TestDeriveColumnsRefusals(t *testing.T) {
	for _, tt := range []struct{ name, schema, want string }{
		{"a name two fields flatten to",
			`{"type":"record","name":"R","fields":[{"name":"a_b","type":"int"},{"name":"a","type":{"type":"record","name":"A","fields":[{"name":"b","type":"int"}]}}]}`,
			"a_b and a.b both flatten to the column a_b"},
		{"a map of records",
			`{"type":"record","name":"R","fields":[{"name":"m","type":{"type":"map","values":{"type":"record","name":"V","fields":[{"name":"x","type":"int"}]}}}]}`,
			"m is a map of records"},
		{"a map of maps",
			`{"type":"record","name":"R","fields":[{"name":"m","type":{"type":"map","values":{"type":"map","values":"long"}}}]}`,
			"the values of the map m are not one column"},
		{"a field that is always null", `{"type":"record","name":"R","fields":[{"name":"n","type":["null"]}]}`, "n is always null"},
		{"not a record", `"string"`, "not a record"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DeriveColumns(avro.MustParse(tt.schema), Capabilities{})
			if !errors.Is(err, ErrUnsupportedField) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want ErrUnsupportedField saying %q", err, tt.want)
			}
		})
	}
}

func TestPlanEvolution(t *testing.T) {
	v1 := avro.MustParse(`{"type":"record","name":"R","fields":[{"name":"id","type":"string"},{"name":"n","type":"int"}]}`)
	v2 := avro.MustParse(`{"type":"record","name":"R","fields":[{"name":"id","type":"string"},{"name":"n","type":"int"},
		{"name":"label","type":["null","string"],"default":null},{"name":"rank","type":"long","default":0}]}`)
	v3 := avro.MustParse(`{"type":"record","name":"R","fields":[{"name":"id","type":"string"},{"name":"n","type":"string"}]}`)
	v4 := avro.MustParse(`{"type":"record","name":"R","fields":[{"name":"id","type":"string"},{"name":"n","type":"int"},{"name":"x","type":"int"}]}`)
	cols := func(s avro.Schema) []Column {
		c, err := DeriveColumns(s, Capabilities{})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	stmts, err := PlanEvolution("t", cols(v1), cols(v2))
	want := []string{"ALTER TABLE t ADD COLUMN `label` Nullable(String)", "ALTER TABLE t ADD COLUMN `rank` Int64"}
	if err != nil || !reflect.DeepEqual(stmts, want) {
		t.Errorf("v1 → v2: %q, %v; want %q", stmts, err, want)
	}
	if stmts, err := PlanEvolution("t", cols(v2), cols(v1)); err != nil || len(stmts) != 0 {
		t.Errorf("v2 → v1 (fields dropped): %q, %v; want nothing to do", stmts, err)
	}
	var ie *IncompatibleError
	if _, err := PlanEvolution("t", cols(v1), cols(v3)); !errors.As(err, &ie) || ie.Field != "n" || ie.Was != "Int32" || ie.Now != "String" {
		t.Errorf("v1 → v3 (n int → string): %v", err)
	}
	if _, err := PlanEvolution("t", cols(v1), cols(v4)); !errors.As(err, &ie) || ie.Field != "x" || ie.Was != "" || !strings.Contains(err.Error(), "added without a default") {
		t.Errorf("v1 → v4 (x added without a default): %v", err)
	}
}

// TestPlanEvolutionFollowsTypes: the type changes a column follows are MODIFY COLUMNs (an
// enum's new symbols keep the old numbers, promotions, a field made optional, inside arrays
// and nested records too; a removed or moved symbol stays with its number); a narrowing, or a
// promotion of a sorting-key column stops with an *IncompatibleError saying why.
func TestPlanEvolutionFollowsTypes(t *testing.T) {
	enum := func(syms ...string) string {
		b, _ := json.Marshal(syms)
		return `{"type":"enum","name":"Suite","symbols":` + string(b) + `,"default":"` + syms[0] + `"}`
	}
	record := func(fields ...string) avro.Schema {
		return avro.MustParse(`{"type":"record","name":"R","fields":[` + strings.Join(fields, ",") + `]}`)
	}
	field := func(name, typ string) string { return `{"name":"` + name + `","type":` + typ + `}` }
	many, numbered := make([]string, 130), make([]string, 130)
	for i := range many {
		many[i], numbered[i] = fmt.Sprintf("S%d", i), fmt.Sprintf("'S%d' = %d", i, i+1)
	}
	for _, tt := range []struct {
		name     string
		was, now avro.Schema
		keys     []string
		want     []string // the statements; nil with why
		why      string   // what the error says
	}{
		{"enum symbol appended", record(field("suite", enum("MMLU", "GSM8K", "HUMANEVAL"))), record(field("suite", enum("MMLU", "GSM8K", "HUMANEVAL", "ARC"))), nil,
			[]string{"ALTER TABLE t MODIFY COLUMN `suite` Enum8('MMLU' = 1, 'GSM8K' = 2, 'HUMANEVAL' = 3, 'ARC' = 4)"}, ""},
		{"optional enum in a nested record", record(field("run", `{"type":"record","name":"Run","fields":[`+field("suite", `["null",`+enum("A", "B")+`]`)+`]}`)),
			record(field("run", `{"type":"record","name":"Run","fields":[`+field("suite", `["null",`+enum("A", "B", "C")+`]`)+`]}`)), nil,
			[]string{"ALTER TABLE t MODIFY COLUMN `run_suite` Nullable(Enum8('A' = 1, 'B' = 2, 'C' = 3))"}, ""},
		{"enum and int in an array of records", record(field("items", `{"type":"array","items":{"type":"record","name":"I","fields":[`+field("e", enum("A"))+`,`+field("n", `"int"`)+`]}}`)),
			record(field("items", `{"type":"array","items":{"type":"record","name":"I","fields":[`+field("e", enum("A", "B"))+`,`+field("n", `"long"`)+`]}}`)), nil,
			[]string{"ALTER TABLE t MODIFY COLUMN `items_e` Array(Enum8('A' = 1, 'B' = 2))", "ALTER TABLE t MODIFY COLUMN `items_n` Array(Int64)"}, ""},
		{"promotions", record(field("i", `"int"`), field("f", `"float"`), field("l", `"long"`), field("s", `"string"`), field("m", `{"type":"map","values":"float"}`)),
			record(field("i", `"long"`), field("f", `"double"`), field("l", `"double"`), field("s", `"bytes"`), field("m", `{"type":"map","values":"double"}`)), nil,
			[]string{"ALTER TABLE t MODIFY COLUMN `i` Int64", "ALTER TABLE t MODIFY COLUMN `f` Float64", "ALTER TABLE t MODIFY COLUMN `l` Float64",
				"ALTER TABLE t MODIFY COLUMN `m_values` Array(Float64)"}, ""},
		{"a field made optional", record(field("n", `"int"`)), record(field("n", `["null","long"]`)), nil,
			[]string{"ALTER TABLE t MODIFY COLUMN `n` Nullable(Int64)"}, ""},
		{"Enum8 outgrowing 127 values becomes Enum16", record(field("suite", enum(many[:127]...))), record(field("suite", enum(many...))), nil,
			[]string{"ALTER TABLE t MODIFY COLUMN `suite` Enum16(" + strings.Join(numbered, ", ") + ")"}, ""},
		{"an enum key gains a symbol", record(field("suite", enum("A"))), record(field("suite", enum("A", "B"))), []string{"suite"},
			[]string{"ALTER TABLE t MODIFY COLUMN `suite` Enum8('A' = 1, 'B' = 2)"}, ""},
		{"enum symbol removed: the column keeps it", record(field("suite", enum("A", "B", "C"))), record(field("suite", enum("A", "C"))), nil, nil, ""},
		{"enum symbols reordered, one added: numbers kept, the new one after the highest", record(field("suite", enum("A", "B"))), record(field("suite", enum("B", "A", "C"))), nil,
			[]string{"ALTER TABLE t MODIFY COLUMN `suite` Enum8('A' = 1, 'B' = 2, 'C' = 3)"}, ""},
		{"enum symbol removed and another added", record(field("suite", enum("A", "B", "C"))), record(field("suite", enum("A", "C", "D"))), []string{"suite"},
			[]string{"ALTER TABLE t MODIFY COLUMN `suite` Enum8('A' = 1, 'B' = 2, 'C' = 3, 'D' = 4)"}, ""},
		{"narrowing", record(field("n", `"long"`)), record(field("n", `"int"`)), nil, nil, "a column follows only new enum symbols"},
		{"no longer optional", record(field("n", `["null","int"]`)), record(field("n", `"int"`)), nil, nil, "no longer optional"},
		{"a key column's promotion", record(field("n", `"int"`)), record(field("n", `"long"`)), []string{"n"}, nil, "sorting key"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			was, err := DeriveColumns(tt.was, Capabilities{})
			if err != nil {
				t.Fatal(err)
			}
			now, err := DeriveColumns(tt.now, Capabilities{})
			if err != nil {
				t.Fatal(err)
			}
			stmts, err := PlanEvolution("t", was, now, tt.keys...)
			if tt.why == "" {
				if err != nil || !reflect.DeepEqual(stmts, tt.want) {
					t.Errorf("statements %q, %v; want %q", stmts, err, tt.want)
				}
				return
			}
			var ie *IncompatibleError
			if !errors.As(err, &ie) || !strings.Contains(err.Error(), tt.why) || !strings.Contains(err.Error(), "changed type") || stmts != nil {
				t.Errorf("statements %q, error %v; want an *IncompatibleError saying %q", stmts, err, tt.why)
			}
		})
	}
	// The table's own numbers are kept: a new symbol is numbered after the highest.
	stmts, err := PlanEvolution("t", []Column{{Name: "e", Field: "e", Type: "Enum8('A' = 5, 'B' = 9)"}}, []Column{{Name: "e", Field: "e", Type: "Enum8('A' = 1, 'B' = 2, 'C' = 3)"}})
	if want := []string{"ALTER TABLE t MODIFY COLUMN `e` Enum8('A' = 5, 'B' = 9, 'C' = 10)"}; err != nil || !reflect.DeepEqual(stmts, want) {
		t.Errorf("hand-numbered enum: %q, %v; want %q", stmts, err, want)
	}
	// ... and the table, once modified, follows the schema: nothing more to do.
	if stmts, err := PlanEvolution("t", []Column{{Name: "e", Field: "e", Type: "Enum8('A' = 5, 'B' = 9, 'C' = 10)"}}, []Column{{Name: "e", Field: "e", Type: "Enum8('A' = 1, 'B' = 2, 'C' = 3)"}}); err != nil || len(stmts) != 0 {
		t.Errorf("hand-numbered enum followed: %q, %v; want nothing to do", stmts, err)
	}
}

// TestRecastValue: a value decoded for a column's older type, as the modified column takes it.
func TestRecastValue(t *testing.T) {
	seven, half := int32(7), float32(0.5)
	for _, tt := range []struct {
		v    any
		typ  string
		want any
	}{
		{int32(7), "Int64", int64(7)},
		{[]int32{1, 2}, "Array(Int64)", []int64{1, 2}},
		{[]*int32{&seven, nil}, "Array(Nullable(Int64))", []*int64{ptr(int64(7)), nil}},
		{&half, "Nullable(Float64)", ptr(0.5)},
		{int32(7), "Nullable(Int32)", &seven},
		{(*int32)(nil), "Nullable(Int64)", (*int64)(nil)},
		{"ARC", "Enum8('MMLU' = 1, 'ARC' = 2)", "ARC"},
		{[][]float32{{0.5}}, "Array(Array(Float64))", [][]float64{{0.5}}},
	} {
		got, err := RecastValue(tt.v, tt.typ)
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("recast %#v to %s: %#v, %v; want %#v", tt.v, tt.typ, got, err, tt.want)
		}
	}
	if _, err := RecastValue("x", "Int64"); err == nil || !strings.Contains(err.Error(), "does not fit Int64") {
		t.Errorf("a string to Int64: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

func TestCreateDDL(t *testing.T) {
	got := TableSpec{Name: "agent_task_event", Columns: []Column{{Name: "task_id", Type: "String"}, {Name: "event_time", Type: "DateTime"},
		{Name: "_offset", Type: "UInt64"}}, OrderBy: []string{"task_id"}, Version: "_offset", PartitionBy: "toYYYYMM(event_time)"}.CreateDDL()
	want := "CREATE TABLE IF NOT EXISTS agent_task_event (\n    `task_id` String,\n    `event_time` DateTime,\n    `_offset` UInt64\n)" +
		" ENGINE = ReplacingMergeTree(`_offset`)\nPARTITION BY toYYYYMM(event_time)\nORDER BY (`task_id`)"
	if got != want {
		t.Errorf("DDL:\n%s\nwant:\n%s", got, want)
	}
}

func TestRowValues(t *testing.T) {
	cols, err := DeriveColumns(avro.MustParse(`{"type":"record","name":"R","fields":[{"name":"n","type":"int"},
		{"name":"u","type":["null","string","long"]},{"name":"m","type":{"type":"map","values":["null","double"]}},
		{"name":"xs","type":{"type":"array","items":{"type":"record","name":"X","fields":[{"name":"v","type":["null","long"]}]}}}]}`), Capabilities{})
	if err != nil {
		t.Fatal(err)
	}
	vals, err := RowValues(cols, map[string]any{"n": 3, "u": int64(9), "m": map[string]any{"z": nil, "a": 1.5},
		"xs": []any{map[string]any{"v": int64(4)}, map[string]any{"v": nil}}})
	if err != nil {
		t.Fatal(err)
	}
	four := int64(4)
	onePointFive := 1.5
	want := []any{int32(3), "9", []string{"a", "z"}, []*float64{&onePointFive, nil}, []*int64{&four, nil}}
	if !reflect.DeepEqual(vals, want) {
		t.Errorf("values %#v, want %#v", vals, want)
	}
	// A map in each record of an array: its keys and values per element.
	nested, err := DeriveColumns(avro.MustParse(`{"type":"record","name":"R","fields":[{"name":"xs","type":{"type":"array","items":
		{"type":"record","name":"X","fields":[{"name":"m","type":{"type":"map","values":"long"}}]}}}]}`), Capabilities{})
	if err != nil {
		t.Fatal(err)
	}
	nv, err := RowValues(nested, map[string]any{"xs": []any{map[string]any{"m": map[string]any{"b": int64(2), "a": int64(1)}}, map[string]any{"m": map[string]any{}}}})
	if want := []any{[][]string{{"a", "b"}, {}}, [][]int64{{1, 2}, {}}}; err != nil || !reflect.DeepEqual(nv, want) {
		t.Errorf("maps in an array: %#v, %v; want %#v", nv, err, want)
	}
	if _, err := RowValues(cols, map[string]any{"n": "three"}); err == nil || !strings.Contains(err.Error(), "column n (field n): string three does not fit Int32") {
		t.Errorf("a value that does not fit: %v", err)
	}
}

// TestRowValuesOptionalArrayAndMap: hamba decodes an optional array or map (["null", array],
// ["null", map]) keyed by its branch, {"array": [...]}; the row holds the elements, not an
// empty array (an optional array landed empty, and an optional map was dead-lettered).
func TestRowValuesOptionalArrayAndMap(t *testing.T) {
	s := avro.MustParse(`{"type":"record","name":"R","fields":[{"name":"tags","type":["null",{"type":"array","items":"string"}],"default":null},
		{"name":"attrs","type":["null",{"type":"map","values":"long"}],"default":null},
		{"name":"xs","type":["null",{"type":"array","items":{"type":"record","name":"X","fields":[{"name":"v","type":"long"}]}}],"default":null}]}`)
	cols, err := DeriveColumns(s, Capabilities{})
	if err != nil {
		t.Fatal(err)
	}
	body, err := avro.Marshal(s, map[string]any{"tags": map[string]any{"array": []any{"a", "b"}}, "attrs": map[string]any{"map": map[string]any{"k": int64(7)}},
		"xs": map[string]any{"array": []any{map[string]any{"v": int64(3)}}}})
	if err != nil {
		t.Fatal(err)
	}
	var rec any
	if err := avro.Unmarshal(s, body, &rec); err != nil {
		t.Fatal(err)
	}
	vals, err := RowValues(cols, rec.(map[string]any))
	if want := []any{[]string{"a", "b"}, []string{"k"}, []int64{7}, []int64{3}}; err != nil || !reflect.DeepEqual(vals, want) {
		t.Errorf("values %#v (%v), want %#v", vals, err, want)
	}
	nulls, err := RowValues(cols, map[string]any{"tags": nil, "attrs": nil, "xs": nil})
	if want := []any{[]string{}, []string{}, []int64{}, []int64{}}; err != nil || !reflect.DeepEqual(nulls, want) {
		t.Errorf("nulls %#v (%v), want %#v", nulls, err, want)
	}
}
