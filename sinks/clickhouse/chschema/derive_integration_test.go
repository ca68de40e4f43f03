package chschema

import (
	"context"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/hamba/avro/v2"

	"github.com/backflowhq/backflow/test/chdb"
	"github.com/backflowhq/backflow/test/testenv"
)

// TestDerivedTableOnTheServers: the table derived from an agent event's schema is created as
// derived on ClickHouse 18.16 (system.columns lists each column with its type), a v2 schema's
// defaulted fields are added by PlanEvolution's ALTERs, and the same schema with a current
// server's capabilities creates on a current ClickHouse.
func TestDerivedTableOnTheServers(t *testing.T) {
	testenv.Integration(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := testenv.ID("it_")
	conn, err := Open(ctx, Conn{Addr: testenv.Get(testenv.ClickHouseAddr)})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	testenv.Database(t, ctx, db, func(ctx context.Context) (driver.Conn, error) {
		return Open(ctx, Conn{Addr: testenv.Get(testenv.ClickHouseAddr)})
	})

	s := avro.MustParse(agentTaskEvent)
	cols, err := DeriveColumns(s, Capabilities{})
	if err != nil {
		t.Fatal(err)
	}
	spec := TableSpec{Name: db + ".agent_task_event", Columns: append(cols, Column{Name: "_offset", Type: "UInt64"}),
		OrderBy: []string{"task_id"}, Version: "_offset", PartitionBy: "toYYYYMM(event_time)"}
	if err := conn.Exec(ctx, spec.CreateDDL()); err != nil {
		t.Fatalf("%v\n%s", err, spec.CreateDDL())
	}
	got := serverColumns(t, ctx, conn, db)
	for _, c := range spec.Columns {
		if got[c.Name] != c.Type {
			t.Errorf("column %s is %q on the server, derived %q", c.Name, got[c.Name], c.Type)
		}
	}
	if len(got) != len(spec.Columns) {
		t.Errorf("%d columns on the server, %d derived", len(got), len(spec.Columns))
	}

	// One record, encoded and decoded as a stream's sink would, lands with every value.
	rec := map[string]any{
		"event_id": "6ba7b810-9dad-11d1-80b4-00c04fd430c8", "task_id": "task-1", "event_time": time.UnixMilli(1764547200123).UTC(),
		"day": time.Date(2025, 12, 1, 0, 0, 0, 0, time.UTC), "state": "RUNNING", "attempt": 2, "ok": true,
		"cost": big.NewRat(123456, 10000), "score": map[string]any{"double": 0.5},
		"agent": map[string]any{"id": "agent-7", "model": nil}, "parent": map[string]any{"ai.agents.Parent": map[string]any{"id": int64(41)}},
		"tags": []any{"x", "y"}, "tool_calls": []any{map[string]any{"tool": "search", "latency_ms": map[string]any{"int": 12}},
			map[string]any{"tool": "fetch", "latency_ms": nil}},
		"attrs": map[string]any{"b": int64(2), "a": int64(1)}, "result": map[string]any{"long": int64(7)}, "digest": [16]byte{'d', 'i', 'g'},
	}
	raw, err := avro.Marshal(s, rec)
	if err != nil {
		t.Fatal(err)
	}
	var decoded any
	if err := avro.Unmarshal(s, raw, &decoded); err != nil {
		t.Fatal(err)
	}
	vals, err := RowValues(cols, decoded.(map[string]any))
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(spec.Columns))
	for i, c := range spec.Columns {
		names[i] = QuoteIdent(c.Name)
	}
	batch, err := conn.PrepareBatch(ctx, "INSERT INTO "+spec.Name+" ("+strings.Join(names, ", ")+") VALUES")
	if err != nil {
		t.Fatal(err)
	}
	if err := batch.Append(append(vals, uint64(1))...); err != nil {
		t.Fatalf("append %v: %v", vals, err)
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
	var line string
	if err := conn.QueryRow(ctx, "SELECT concat(toString(event_id), '|', task_id, '|', toString(event_time), '|', toString(day), '|', toString(state), '|', "+
		"toString(attempt), '|', toString(ok), '|', toString(cost), '|', ifNull(toString(score), 'NULL'), '|', agent_id, '|', ifNull(agent_model, 'NULL'), '|', "+
		"ifNull(toString(parent_id), 'NULL'), '|', arrayStringConcat(tags, ','), '|', arrayStringConcat(tool_calls_tool, ','), '|', "+
		"arrayStringConcat(arrayMap(x -> ifNull(toString(x), 'NULL'), tool_calls_latency_ms), ','), '|', arrayStringConcat(attrs_keys, ','), '|', "+
		"arrayStringConcat(arrayMap(x -> toString(x), attrs_values), ','), '|', result, '|', replaceAll(toString(digest), '\\0', ''))"+
		" FROM "+spec.Name).Scan(&line); err != nil {
		t.Fatal(err)
	}
	want := "6ba7b810-9dad-11d1-80b4-00c04fd430c8|task-1|2025-12-01 00:00:00|2025-12-01|RUNNING|2|1|12.3456|0.5|agent-7|NULL|41|x,y|search,fetch|12,NULL|a,b|1,2|7|dig"
	if line != want {
		t.Errorf("the row reads\n%s\nwant\n%s", line, want)
	}

	// v2 adds a defaulted nullable field and a defaulted record: their columns are added.
	v2 := strings.Replace(agentTaskEvent, `{"name": "digest"`, `{"name": "reviewer", "type": ["null", "string"], "default": null},
    {"name": "budget", "type": {"type": "record", "name": "Budget", "fields": [{"name": "tokens", "type": "long"}]}, "default": {"tokens": 0}},
    {"name": "digest"`, 1)
	cols2, err := DeriveColumns(avro.MustParse(v2), Capabilities{})
	if err != nil {
		t.Fatal(err)
	}
	stmts, err := PlanEvolution(spec.Name, cols, cols2)
	if err != nil || len(stmts) != 2 {
		t.Fatalf("plan: %q %v", stmts, err)
	}
	for _, st := range stmts {
		if err := conn.Exec(ctx, st); err != nil {
			t.Fatalf("%s: %v", st, err)
		}
	}
	got = serverColumns(t, ctx, conn, db)
	if got["reviewer"] != "Nullable(String)" || got["budget_tokens"] != "Int64" {
		t.Errorf("after the evolution: reviewer %q, budget_tokens %q", got["reviewer"], got["budget_tokens"])
	}

	// A current server: millisecond timestamps.
	cur, err := DeriveColumns(s, Capabilities{DateTime64: true})
	if err != nil {
		t.Fatal(err)
	}
	curSpec := TableSpec{Name: "agent_task_event", Columns: append(cur, Column{Name: "_offset", Type: "UInt64"}),
		OrderBy: []string{"task_id"}, Version: "_offset", PartitionBy: "toYYYYMM(event_time)"}
	eng := chdb.New(t)
	_, res := eng.Run(curSpec.CreateDDL(), "SELECT name, type FROM system.columns WHERE table = 'agent_task_event' ORDER BY position")
	rows := res[1]
	if len(rows) != len(curSpec.Columns) {
		t.Fatalf("%d columns on the current server, %d derived: %v", len(rows), len(curSpec.Columns), rows)
	}
	for i, c := range curSpec.Columns {
		if name, typ := fmt.Sprint(rows[i][0]), fmt.Sprint(rows[i][1]); name != c.Name || typ != c.Type {
			t.Errorf("current server column %d: %s %s, derived %s %s", i, name, typ, c.Name, c.Type)
		}
	}
}

func serverColumns(t *testing.T, ctx context.Context, conn driver.Conn, db string) map[string]string {
	t.Helper()
	rows, err := conn.Query(ctx, "SELECT name, type FROM system.columns WHERE database = ? AND table = 'agent_task_event'", db)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var n, ty string
		if err := rows.Scan(&n, &ty); err != nil {
			t.Fatal(err)
		}
		out[n] = ty
	}
	return out
}
