package chschema_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
	"github.com/backflowhq/backflow/sinks/clickhouse/dlqmirror"
	"github.com/backflowhq/backflow/test/pipelinetest"
	"github.com/backflowhq/backflow/test/testenv"
)

// testDB creates a database of its own for t on the real ClickHouse, drops it in Cleanup, and
// returns a Config pointing at it with a connection open on it.
func testDB(t *testing.T) (chschema.Conn, driver.Conn) {
	t.Helper()
	testenv.Integration(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return pipelinetest.Database(t, ctx, pipelinetest.Plain().ClickHouse, testenv.ID("it_"))
}

// TestMigrateTwice applies every migration to an empty database, then again: the second run
// applies nothing, every migration is recorded once, and every table and view exists.
func TestMigrateTwice(t *testing.T) {
	cfg, conn := testDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	all, err := chschema.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	pending, err := chschema.Pending(ctx, conn)
	if err != nil || len(pending) != len(all) {
		t.Fatalf("pending on an empty database: %d (%v), want %d", len(pending), err, len(all))
	}
	first, err := chschema.Migrate(ctx, conn)
	if err != nil {
		t.Fatalf("first migrate: %v", err)
	}
	if len(first) != len(all) {
		t.Fatalf("first migrate applied %d, want %d", len(first), len(all))
	}
	second, err := chschema.Migrate(ctx, conn)
	if err != nil || len(second) != 0 {
		t.Fatalf("second migrate applied %d (%v), want 0", len(second), err)
	}
	var recorded, distinct uint64
	if err := conn.QueryRow(ctx, "SELECT count(), uniqExact(version) FROM "+chschema.MigrationsTable).Scan(&recorded, &distinct); err != nil {
		t.Fatal(err)
	}
	if recorded != uint64(len(all)) || distinct != uint64(len(all)) {
		t.Fatalf("%s holds %d rows over %d versions, want %d each", chschema.MigrationsTable, recorded, distinct, len(all))
	}
	// The rollups' tables (0015, their day level 0018) besides the sunk ones; 0016 rebuilt empty tables, so it kept
	// no old copies (a table with rows is kept as <table>_before_0016).
	want := []string{chschema.MigrationsTable, chschema.RebuildsTable, "dlq_entries", "dlq_first", "gateway_logs", "inference_results", "moderation_hits", "replay_log",
		"rollup_category_day", "rollup_category_hour", "rollup_category_minute", "rollup_dlq_day", "rollup_dlq_hour", "rollup_dlq_minute",
		"rollup_model_day", "rollup_model_hour", "rollup_model_minute", "rollup_moderation_day", "rollup_moderation_hour", "rollup_moderation_minute",
		"rollup_sink_day", "rollup_sink_hour", "rollup_sink_minute", "rollup_tenant_day", "rollup_tenant_hour", "rollup_tenant_minute",
		"rollup_watermarks", "sink_ledger", chschema.StreamMigrationsTable,
		"v_category_minute", "v_dlq_entries", "v_dlq_minute", "v_freshness", "v_gateway_logs", "v_inference_results", "v_model_minute",
		"v_moderation_hits", "v_moderation_minute", "v_replay_history", "v_sink_minute", "v_tenant_minute"}
	rows, err := conn.Query(ctx, "SELECT name FROM system.tables WHERE database = ? ORDER BY name", cfg.Database)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		got = append(got, n)
	}
	rows.Close()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("tables %v, want %v", got, want)
	}
	t.Logf("applied %d migrations, then 0; tables %v", len(first), got)

	// Forgetting what ran and migrating again re-runs every statement on the migrated database:
	// CREATE ... IF NOT EXISTS leaves each table alone and an ADD COLUMN whose column exists is
	// skipped, so every migration applies again without error and nothing changes.
	if err := conn.Exec(ctx, "DROP TABLE "+chschema.MigrationsTable); err != nil {
		t.Fatal(err)
	}
	again, err := chschema.Migrate(ctx, conn)
	if err != nil || len(again) != len(all) {
		t.Fatalf("migrate after forgetting: applied %d (%v), want %d", len(again), err, len(all))
	}
	var ledgerCols uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM system.columns WHERE database = ? AND table = 'sink_ledger' AND name = 'max_event_time'", cfg.Database).Scan(&ledgerCols); err != nil || ledgerCols != 1 {
		t.Fatalf("sink_ledger.max_event_time listed %d times (%v), want 1", ledgerCols, err)
	}
	var msCols uint64
	if err := conn.QueryRow(ctx, `SELECT count() FROM system.columns WHERE database = ? AND table IN ('inference_results', 'gateway_logs')
		AND name IN ('event_time_ms', 'landed_time_ms') AND type = 'Int64'`, cfg.Database).Scan(&msCols); err != nil {
		t.Fatal(err)
	}
	if msCols != 4 {
		t.Fatalf("%d millisecond columns, want 4 (event_time_ms and landed_time_ms in two tables)", msCols)
	}
}

// TestDLQViewCountsEachOriginOnce: a replay in a new ingest epoch dead-letters the same bad
// record again at a new DLQ position. The mirror keeps both rows; v_dlq_entries shows the
// record once (the first by DLQ position), while entries without an origin (unreadable DLQ
// records) are each kept.
func TestDLQViewCountsEachOriginOnce(t *testing.T) {
	_, conn := testDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := chschema.Migrate(ctx, conn); err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Truncate(time.Second)
	row := func(dlqOffset int64, originTopic string, originOffset int64, class string) dlqmirror.DLQRow {
		return dlqmirror.DLQRow{DLQTopic: "backflow.dlq", DLQPartition: 1, DLQOffset: dlqOffset, OriginTopic: originTopic, OriginPartition: 2,
			OriginOffset: originOffset, OriginTime: at, Stage: "ingest", Class: class, Message: "m", ErrorTime: at.Add(time.Duration(dlqOffset) * time.Second),
			RecordKey: "k", Version: uint64(dlqOffset)}
	}
	rows := []dlqmirror.DLQRow{
		row(10, "gateway-log", 7, "corrupt"), // first dead-lettering
		row(55, "gateway-log", 7, "corrupt"), // the same record, dead-lettered again by a replay
		row(56, "gateway-log", 8, "invalid"), // another record
		row(60, "", 0, "unreadable_entry"),   // two entries without an origin: both kept
		row(61, "", 0, "unreadable_entry"),
	}
	b, err := conn.PrepareBatch(ctx, `INSERT INTO dlq_entries (dlq_topic, dlq_partition, dlq_offset, origin_topic, origin_partition, origin_offset,
		origin_time, stage, class, message, error_time, record_key, value_bytes, truncated_from, version) VALUES`)
	if err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		if err := b.AppendStruct(&rows[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
	q, err := conn.Query(ctx, `SELECT dlq_offset FROM v_dlq_entries ORDER BY dlq_offset`)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	var got []int64
	for q.Next() {
		var o int64
		if err := q.Scan(&o); err != nil {
			t.Fatal(err)
		}
		got = append(got, o)
	}
	if fmt.Sprint(got) != "[10 56 60 61]" {
		t.Fatalf("v_dlq_entries holds DLQ offsets %v, want [10 56 60 61]", got)
	}
	var raw uint64
	if err := conn.QueryRow(ctx, `SELECT count() FROM dlq_entries FINAL`).Scan(&raw); err != nil || raw != 5 {
		t.Fatalf("dlq_entries holds %d rows (%v), want all 5", raw, err)
	}
}
