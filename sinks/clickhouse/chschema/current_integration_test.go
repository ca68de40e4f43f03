package chschema_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	chproto "github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
	"github.com/ClickHouse/clickhouse-go/v2/lib/proto"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/rollup"
	"github.com/backflowhq/backflow/sinks/clickhouse"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
	"github.com/backflowhq/backflow/sinks/clickhouse/dlqmirror"
	"github.com/backflowhq/backflow/test/chdb"
	"github.com/backflowhq/backflow/test/testenv"
)

// TestMigrationsOnCurrentClickHouse renders every migration for the version a current ClickHouse
// reports (chDB 26.9), runs them there twice (the second run must change nothing), checks that
// the newer features took effect, then writes the sink's own rows through clickhouse-go's column
// encoders in the Native format and reads them back deduplicated, with millisecond times.
// It fails, not skips, when chDB cannot be installed.
func TestMigrationsOnCurrentClickHouse(t *testing.T) {
	testenv.Integration(t)
	eng := chdb.New(t)
	raw, _ := eng.Run("SELECT 1")
	v, err := chschema.ParseServerVersion(raw)
	if err != nil {
		t.Fatal(err)
	}
	caps := v.Capabilities()
	if caps != (chschema.Capabilities{TTL: true, LowCardinality: true, DateTime64: true, AddColumnIfNotExists: true}) {
		t.Fatalf("ClickHouse %s has %v; this test needs a server with every capability", v.Raw, caps)
	}
	ms, err := chschema.MigrationsFor(caps)
	if err != nil {
		t.Fatal(err)
	}
	if waiting, _ := chschema.WaitingFor(caps); len(waiting) != 0 {
		t.Fatalf("%d migrations wait on a server with every capability", len(waiting))
	}
	// The engine's own statements run as the engine runs them on empty tables: a REBUILD is its
	// copy under the new key and the swap (once: a rebuilt table is left alone), and a BACKFILL
	// has no rows to roll up.
	migrate := func() int {
		n := 0
		for _, m := range ms {
			for _, stmt := range m.Statements {
				if chschema.IsBackfill(stmt) {
					continue
				}
				if rb, ok := chschema.ParseRebuild(m.Version, stmt); ok {
					_, res := eng.Run(fmt.Sprintf("SELECT create_table_query, sorting_key FROM system.tables WHERE database = currentDatabase() AND name = '%s'", rb.Table))
					if chschema.SameKey(res[0][0][1].(string), rb.OrderBy) {
						continue
					}
					rebuild, err := chschema.EmptyRebuild(rb, res[0][0][0].(string))
					if err != nil {
						t.Fatal(err)
					}
					eng.Run(rebuild...)
					n += len(rebuild)
					continue
				}
				eng.Run(stmt)
				n++
			}
		}
		return n
	}
	n := migrate()
	migrate() // every statement is safe to run again
	t.Logf("ClickHouse %s (%v): %d migrations, %d statements, applied twice", v.Raw, caps, len(ms), n)

	_, res := eng.Run(
		"SELECT table, name, type FROM system.columns WHERE database = currentDatabase() ORDER BY table, position",
		"SELECT name, engine_full FROM system.tables WHERE database = currentDatabase() AND engine LIKE '%MergeTree' ORDER BY name",
	)
	types := map[string]map[string]string{} // table -> column -> type
	for _, r := range res[0] {
		tbl, col, typ := r[0].(string), r[1].(string), r[2].(string)
		if types[tbl] == nil {
			types[tbl] = map[string]string{}
		}
		types[tbl][col] = typ
	}
	for tbl, cols := range map[string]map[string]string{
		clickhouse.TableInference: {"model": "LowCardinality(String)", "verdict": "LowCardinality(String)", "event_time": "DateTime64(3)", "ingest_time": "DateTime64(3)", "request_id": "String", "error": "Nullable(String)"},
		clickhouse.TableGateway:   {"tenant_id": "LowCardinality(String)", "event_time": "DateTime64(3)", "phase": "String"},
		clickhouse.TableHits:      {"category": "LowCardinality(String)", "event_time": "DateTime64(3)"},
		clickhouse.TableLedger:    {"group": "String", "flushed_at": "DateTime"},
		"dlq_entries":             {"class": "LowCardinality(String)", "error_time": "DateTime64(3)", "origin_time": "DateTime64(3)"},
	} {
		for col, want := range cols {
			if got := types[tbl][col]; got != want {
				t.Errorf("%s.%s is %q, want %q", tbl, col, got, want)
			}
		}
	}
	ttls := 0
	for _, r := range res[1] {
		if strings.Contains(r[1].(string), " TTL ") {
			ttls++
		}
	}
	if ttls != 5 {
		t.Errorf("%d of %d MergeTree tables have a TTL, want 5: %v", ttls, len(res[1]), res[1])
	}

	// The sink's rows, through the driver's encoders for the server's column types. Two writes
	// of one request (a redelivery and a replay in epoch 2) must collapse to the replay's row.
	evt := time.Date(2026, 11, 30, 12, 34, 56, 789_000_000, time.UTC)
	errText := "upstream model error"
	base := avro.EnrichedRecord{RequestID: "req-1", SourceTopic: avro.TopicInferenceResult, SourcePartition: 2, SourceOffset: 41,
		SchemaID: 3, Epoch: 1, IngestTime: evt.Add(1500 * time.Millisecond),
		Inference: &avro.InferenceResult{RequestID: "req-1", Model: "model-01", ModelVersion: "v2", EventTime: evt, LatencyMs: 420,
			Status: "ERROR", Error: &errText, Labels: []avro.Label{{Name: "toxicity", Score: 0.25}}},
		Moderation: avro.Moderation{Status: "CHECKED", Verdict: "REVIEW", RiskScore: 0.5, Categories: []string{"codename"},
			Hits: []avro.Hit{{Word: "bluefin", Category: "codename", Start: 3, End: 10}}}}
	replay := base
	replay.Epoch, replay.SourceOffset = 2, 7
	gw := avro.EnrichedRecord{RequestID: "req-1", SourceTopic: avro.TopicGatewayLog, SourcePartition: 0, SourceOffset: 9, Epoch: 1,
		IngestTime: evt, Gateway: &avro.GatewayLog{RequestID: "req-1", Phase: avro.PhaseResponse, EventTime: evt.Add(3 * time.Millisecond),
			TenantID: "tenant-007", UserID: "user-00001", Model: "model-01", StatusCode: 500, LatencyMs: 423}}
	var inf []clickhouse.InferenceRow
	var gws []clickhouse.GatewayRow
	var hits []clickhouse.HitRow
	for _, rec := range []*avro.EnrichedRecord{&base, &base, &gw, &replay} {
		rows, err := clickhouse.MapRecord(rec)
		if err != nil {
			t.Fatal(err)
		}
		if rows.Inference != nil {
			inf = append(inf, *rows.Inference)
		}
		if rows.Gateway != nil {
			gws = append(gws, *rows.Gateway)
		}
		hits = append(hits, rows.Hits...)
	}
	ledger := []clickhouse.LedgerRow{{BatchID: "b1", Group: "g", Topic: "backflow.enriched", Partition: 1, MinOffset: 0, MaxOffset: 3, Rows: 4, HitRows: 3, Epoch: 2, FlushedAt: evt.Truncate(time.Second)}}
	dlqRows := []dlqmirror.DLQRow{{DLQTopic: "backflow.dlq", DLQPartition: 0, DLQOffset: 5, OriginTopic: avro.TopicGatewayLog, OriginTime: evt,
		Stage: "ingest", Class: "corrupt", Message: "body ends early", ErrorTime: evt.Add(time.Second), RecordKey: "req-9", ValueBytes: 17, Version: 5}}
	dir := t.TempDir()
	var loads []string
	for _, tbl := range []struct {
		name string
		rows any
	}{{clickhouse.TableInference, inf[:2]}, {clickhouse.TableInference, inf[2:]}, {clickhouse.TableGateway, gws}, {clickhouse.TableHits, hits[:2]}, {clickhouse.TableHits, hits[2:]},
		{clickhouse.TableLedger, ledger}, {"dlq_entries", dlqRows}} {
		file := filepath.Join(dir, fmt.Sprintf("%d.native", len(loads)))
		sql := nativeBlock(t, file, tbl.rows, types[tbl.name])
		loads = append(loads, strings.Replace(chschema.InsertSQL(tbl.name, reflect.ValueOf(tbl.rows).Index(0).Interface()), " VALUES",
			fmt.Sprintf(" SELECT %s FROM file('%s', 'Native')", sql, file), 1))
	}
	eng.Run(loads...)
	_, res = eng.Run(
		"SELECT count() BETWEEN 1 AND 3 FROM "+clickhouse.TableInference, // three writes in two parts; merges may have run
		"SELECT count(), any(epoch), any(source_offset), any(toUnixTimestamp64Milli(event_time)), any(toUnixTimestamp64Milli(ingest_time)), any(model), any(error), any(labels) FROM "+clickhouse.ViewInference,
		"SELECT count(), any(toUnixTimestamp64Milli(event_time)), any(tenant_id), any(status_code) FROM "+clickhouse.ViewGateway,
		"SELECT count() FROM "+clickhouse.ViewModerations,
		"SELECT count(), sum(rows) FROM "+clickhouse.TableLedger,
		"SELECT count(), any(class), any(toUnixTimestamp64Milli(origin_time)) FROM v_dlq_entries",
	)
	got := fmt.Sprint(res[0][0], res[1][0], res[2][0], res[3][0], res[4][0], res[5][0])
	want := fmt.Sprint([]any{1},
		[]any{1, 2, 7, evt.UnixMilli(), evt.Add(1500 * time.Millisecond).UnixMilli(), "model-01", errText, []any{"toxicity"}},
		[]any{1, evt.Add(3 * time.Millisecond).UnixMilli(), "tenant-007", 500},
		[]any{1}, []any{1, 4}, []any{1, "corrupt", evt.UnixMilli()})
	if got != want {
		t.Fatalf("read back from ClickHouse %s:\n got %s\nwant %s", v.Raw, got, want)
	}
	t.Logf("rows written with the sink's columns and read back deduplicated with ms times: %s", got)

	// The rollups on the same rows: the recompute's statements (minutes, hours, days), then each
	// rollup read through Range over two days either side, the watermark at the end of the
	// rows' day: their day is read from the day table.
	minute := evt.Truncate(time.Minute)
	spans := []rollup.Span{{From: minute, To: minute.Add(time.Minute)}}
	hour := []rollup.Span{{From: evt.Truncate(time.Hour), To: evt.Truncate(time.Hour).Add(time.Hour)}}
	day := []rollup.Span{{From: evt.Truncate(24 * time.Hour), To: evt.Truncate(24 * time.Hour).Add(24 * time.Hour)}}
	roll := []string{rollup.DLQFirstSQL()}
	for _, r := range rollup.All {
		for _, p := range r.Parts {
			roll = append(roll, r.MinuteSQL(p, spans, 1))
		}
		roll = append(roll, r.HourSQL(hour, 1), r.DaySQL(day, 1))
	}
	for _, src := range rollup.Sources() {
		roll = append(roll, rollup.WatermarkSQL(src, day[0].To.Add(-time.Minute)))
	}
	eng.Run(roll...)
	var checks []string
	macros := strings.NewReplacer("$__fromTime", fmt.Sprintf("toDateTime(%d)", minute.Add(-48*time.Hour).Unix()), "$__toTime", fmt.Sprintf("toDateTime(%d)", minute.Add(48*time.Hour).Unix()))
	for _, r := range rollup.All {
		m := r.Measures[0].Name
		checks = append(checks, macros.Replace(fmt.Sprintf("SELECT toUInt64(sum(%s)) FROM %s", m, r.Range("1", "1"))),
			fmt.Sprintf("SELECT toUInt64(sum(%s)) FROM v_%s_minute", m, r.Name))
	}
	_, res = eng.Run(checks...)
	for i, r := range rollup.All {
		got, want := fmt.Sprint(res[2*i]), fmt.Sprint(res[2*i+1])
		if got != want || want == "[[0]]" {
			t.Errorf("rollup %s on ClickHouse %s: %s from the rollup, %s from the view", r.Name, v.Raw, got, want)
		}
	}
}

// nativeBlock writes rows (a slice of a ch-tagged row struct) to file in ClickHouse's Native
// format, using clickhouse-go's column encoders for the server's types (what PrepareBatch +
// AppendStruct would send), and returns the column list to select from it.
func nativeBlock(t *testing.T, file string, rows any, types map[string]string) string {
	t.Helper()
	rv := reflect.ValueOf(rows)
	rt := rv.Type().Elem()
	block := proto.NewBlock()
	var names []string
	for i := 0; i < rt.NumField(); i++ {
		name := rt.Field(i).Tag.Get("ch")
		typ, ok := types[name]
		if !ok {
			t.Fatalf("column %s of %s is not in the table", name, rt.Name())
		}
		if err := block.AddColumn(name, column.Type(typ)); err != nil {
			t.Fatalf("column %s %s: %v", name, typ, err)
		}
		names = append(names, "`"+name+"`")
	}
	for r := 0; r < rv.Len(); r++ {
		vals := make([]any, rt.NumField())
		for i := range vals {
			vals[i] = rv.Index(r).Field(i).Interface()
		}
		if err := block.Append(vals...); err != nil {
			t.Fatalf("append %s row %d: %v", rt.Name(), r, err)
		}
	}
	var buf chproto.Buffer
	if err := block.Encode(&buf, 0); err != nil { // revision 0: no block info, i.e. the Native format
		t.Fatal(err)
	}
	if err := os.WriteFile(file, buf.Buf, 0o644); err != nil {
		t.Fatal(err)
	}
	return strings.Join(names, ", ")
}
