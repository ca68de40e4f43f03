package clickhouse

import (
	"errors"
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
