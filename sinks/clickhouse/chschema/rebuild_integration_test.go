package chschema_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
)

var timeKey = chschema.Rebuild{Version: 99, Table: "inference_results", PartitionBy: "toYYYYMMDD(event_time)",
	OrderBy: "(toStartOfMinute(event_time), source_topic, request_id)", ChunkRows: 4000}

// fingerprint is what must not change in a rebuild: the row count, raw and deduplicated, and a
// checksum of every row's values, raw and deduplicated.
func fingerprint(t *testing.T, conn driver.Conn, table string) string {
	t.Helper()
	var n, nf, sum, sumf uint64
	cols := "source_topic, request_id, model, event_time, latency_ms, status, version, event_time_ms"
	if err := conn.QueryRow(context.Background(), fmt.Sprintf("SELECT count(), sum(cityHash64(%s)) FROM %s", cols, table)).Scan(&n, &sum); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(context.Background(), fmt.Sprintf("SELECT count(), sum(cityHash64(%s)) FROM %s FINAL", cols, table)).Scan(&nf, &sumf); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d rows (%d deduplicated), checksums %x %x", n, nf, sum, sumf)
}

func sortingKey(t *testing.T, conn driver.Conn, table string) string {
	t.Helper()
	var k string
	if err := conn.QueryRow(context.Background(), "SELECT sorting_key FROM system.tables WHERE database = currentDatabase() AND name = ?", table).Scan(&k); err != nil {
		t.Fatal(err)
	}
	return k
}

// TestRebuildKeepsEveryRow gives inference_results (three months, 12,000 requests, a quarter
// of them written twice with a newer version, as a replay does) the time-leading key in chunks
// of 4,000 rows. The first run stops after two chunks; rows of a later chunk are then put in
// the copy, as a run that stopped half way through a chunk leaves them; the second run finishes.
// Every row, raw and deduplicated, is there after the swap, the views read the rebuilt table,
// and the old one is kept under inference_results_before_0099.
func TestRebuildKeepsEveryRow(t *testing.T) {
	_, conn := testDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := chschema.MigrateWith(ctx, conn, chschema.MigrateOptions{UpTo: 15}); err != nil { // the layout before 0016
		t.Fatal(err)
	}
	for ver, keep := range map[int]string{1: "1", 2: "number % 4 = 0"} {
		if err := conn.Exec(ctx, fmt.Sprintf(`INSERT INTO inference_results (source_topic, request_id, model, event_time, latency_ms, status, version)
SELECT if(number %% 3 = 0, 'gw', 'inf'), toString(cityHash64(number)), concat('m', toString(number %% 7 + %d)), toDateTime('2026-09-01 00:00:00') + number * 650, toUInt32(number %% 1000), 'OK', %d
FROM numbers(12000) WHERE %s`, ver, ver, keep)); err != nil {
			t.Fatal(err)
		}
	}
	before := fingerprint(t, conn, "inference_results")
	oldKey := sortingKey(t, conn, "inference_results")

	st, err := chschema.RebuildStatus(ctx, conn, timeKey)
	if err != nil || st.Done || st.Rows != 15000 || st.Chunks != 0 {
		t.Fatalf("status before: %+v, %v", st, err)
	}
	if err := chschema.RunRebuild(ctx, conn, timeKey, 10000, nil); !errors.Is(err, chschema.ErrRebuildNeeded) {
		t.Fatalf("a rebuild of 15,000 rows with a limit of 10,000: %v, want ErrRebuildNeeded", err)
	}

	stop, cancelRun := context.WithCancel(ctx)
	err = chschema.RunRebuild(stop, conn, timeKey, 0, func(s chschema.RebuildState) {
		if s.Copied == 2 {
			cancelRun()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("first run: %v, want it stopped after two chunks", err)
	}
	st, err = chschema.RebuildStatus(ctx, conn, timeKey)
	if err != nil || st.Done || st.Copied != 2 || st.Chunks < 6 {
		t.Fatalf("status after two chunks: %+v, %v; want 2 copied of at least 6", st, err)
	}
	t.Logf("stopped: %s", st)
	// Half a chunk, left behind by a run that stopped while copying it: November's rows.
	if err := conn.Exec(ctx, "INSERT INTO inference_results_rebuild SELECT * FROM inference_results WHERE toYYYYMM(event_time) = 202611 AND request_id < '5'"); err != nil {
		t.Fatal(err)
	}
	if err := chschema.RunRebuild(ctx, conn, timeKey, 0, nil); err != nil {
		t.Fatalf("second run: %v", err)
	}

	if after := fingerprint(t, conn, "inference_results"); after != before {
		t.Fatalf("after the rebuild %s, before %s", after, before)
	}
	if k := sortingKey(t, conn, "inference_results"); k != "toStartOfMinute(event_time), source_topic, request_id" {
		t.Fatalf("sorting key after the rebuild: %q", k)
	}
	if k := sortingKey(t, conn, "inference_results_before_0099"); k != oldKey {
		t.Fatalf("the old table's key %q, want %q", k, oldKey)
	}
	if old := fingerprint(t, conn, "inference_results_before_0099"); old != before {
		t.Fatalf("the old table holds %s, want %s", old, before)
	}
	var viewRows uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM v_inference_results").Scan(&viewRows); err != nil || viewRows != 12000 {
		t.Fatalf("v_inference_results: %d rows (%v), want 12000", viewRows, err)
	}
	st, err = chschema.RebuildStatus(ctx, conn, timeKey)
	if err != nil || !st.Done {
		t.Fatalf("status after: %+v, %v", st, err)
	}
	// Once rebuilt, a run does nothing.
	if err := chschema.RunRebuild(ctx, conn, timeKey, 0, nil); err != nil {
		t.Fatal(err)
	}
	if after := fingerprint(t, conn, "inference_results"); after != before {
		t.Fatalf("after a second rebuild %s, before %s", after, before)
	}
}

// TestRebuildRefusesATableThatChanged: a row written while the table is being copied (a sink
// still running) would be lost at the swap. The rebuild sees the count move, drops its copy and
// says so; run again with the table still, it rebuilds every row.
func TestRebuildRefusesATableThatChanged(t *testing.T) {
	_, conn := testDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := chschema.MigrateWith(ctx, conn, chschema.MigrateOptions{UpTo: 15}); err != nil { // the layout before 0016
		t.Fatal(err)
	}
	insert := func(from, n int) {
		if err := conn.Exec(ctx, fmt.Sprintf(`INSERT INTO inference_results (source_topic, request_id, event_time, version)
SELECT 'inf', toString(number), toDateTime('2026-10-01 00:00:00') + number * 60, 1 FROM numbers(%d, %d)`, from, n)); err != nil {
			t.Fatal(err)
		}
	}
	insert(0, 9000)
	stop, cancelRun := context.WithCancel(ctx)
	_ = chschema.RunRebuild(stop, conn, timeKey, 0, func(s chschema.RebuildState) { cancelRun() })
	insert(9000, 10)
	err := chschema.RunRebuild(ctx, conn, timeKey, 0, nil)
	if !errors.Is(err, chschema.ErrRebuildSourceChanged) {
		t.Fatalf("rebuild of a table that changed: %v, want ErrRebuildSourceChanged", err)
	}
	t.Logf("refused: %v", err)
	// The plan is forgotten by the time the refusal returns (a DELETE is applied in the
	// background): a run started now must not skip chunks the dropped copy had.
	var left uint64
	if err := conn.QueryRow(ctx, "SELECT toUInt64(count()) FROM "+chschema.RebuildsTable+" WHERE table_name = 'inference_results'").Scan(&left); err != nil || left != 0 {
		t.Fatalf("the refused rebuild's log still holds %d rows (%v)", left, err)
	}
	before := fingerprint(t, conn, "inference_results")
	if err := chschema.RunRebuild(ctx, conn, timeKey, 0, nil); err != nil {
		t.Fatalf("rebuild again: %v", err)
	}
	if after := fingerprint(t, conn, "inference_results"); after != before || sortingKey(t, conn, "inference_results") == "source_topic, request_id" {
		t.Fatalf("after %s (key %s), before %s", after, sortingKey(t, conn, "inference_results"), before)
	}
}
