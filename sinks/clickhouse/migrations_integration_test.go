package clickhouse_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/backflowhq/backflow/internal/testenv"
	"github.com/backflowhq/backflow/sinks/clickhouse"
)

// testDB creates a database of its own for t on the real ClickHouse, drops it in Cleanup, and
// returns a Config pointing at it with a connection open on it.
func testDB(t *testing.T) (clickhouse.Config, driver.Conn) {
	t.Helper()
	testenv.Integration(t)
	return testDBAt(t, testenv.Get(testenv.ClickHouseAddr))
}

// testDBAt is testDB on the ClickHouse at addr.
func testDBAt(t *testing.T, addr string) (clickhouse.Config, driver.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	base := clickhouse.Config{Addr: addr}
	admin, err := clickhouse.Open(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	db := fmt.Sprintf("it_%d", time.Now().UnixNano())
	if err := admin.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+db); err != nil {
			t.Errorf("drop database %s: %v", db, err)
		}
		admin.Close()
	})
	cfg := base
	cfg.Database = db
	conn, err := clickhouse.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return cfg, conn
}

// TestMigrateTwice applies every migration to an empty database, then again: the second run
// applies nothing, every migration is recorded once, and every table and view exists.
func TestMigrateTwice(t *testing.T) {
	cfg, conn := testDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	all, err := clickhouse.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	pending, err := clickhouse.Pending(ctx, conn)
	if err != nil || len(pending) != len(all) {
		t.Fatalf("pending on an empty database: %d (%v), want %d", len(pending), err, len(all))
	}
	first, err := clickhouse.Migrate(ctx, conn)
	if err != nil {
		t.Fatalf("first migrate: %v", err)
	}
	if len(first) != len(all) {
		t.Fatalf("first migrate applied %d, want %d", len(first), len(all))
	}
	second, err := clickhouse.Migrate(ctx, conn)
	if err != nil || len(second) != 0 {
		t.Fatalf("second migrate applied %d (%v), want 0", len(second), err)
	}
	var recorded, distinct uint64
	if err := conn.QueryRow(ctx, "SELECT count(), uniqExact(version) FROM "+clickhouse.MigrationsTable).Scan(&recorded, &distinct); err != nil {
		t.Fatal(err)
	}
	if recorded != uint64(len(all)) || distinct != uint64(len(all)) {
		t.Fatalf("%s holds %d rows over %d versions, want %d each", clickhouse.MigrationsTable, recorded, distinct, len(all))
	}
	want := []string{clickhouse.MigrationsTable, "dlq_entries", "gateway_logs", "inference_results", "moderation_hits", "sink_ledger",
		"v_dlq_entries", "v_gateway_logs", "v_inference_results", "v_moderation_hits"}
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

	// Every statement is safe to run again, ALTER TABLE ... ADD COLUMN (0012) included: with
	// the tracking table gone, as if each migration had been interrupted before its tracking
	// row, a third run applies them all again without error and adds no column twice.
	if err := conn.Exec(ctx, "DROP TABLE "+clickhouse.MigrationsTable); err != nil {
		t.Fatal(err)
	}
	third, err := clickhouse.Migrate(ctx, conn)
	if err != nil || len(third) != len(all) {
		t.Fatalf("migrate after losing the tracking table applied %d (%v), want %d", len(third), err, len(all))
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
