package chschema_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/backflowhq/backflow/internal/rollup"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
	"github.com/backflowhq/backflow/test/dashdata"
	"github.com/backflowhq/backflow/test/rollupcheck"
)

// keyed are the tables 0016 rebuilds, with the columns that identify a row.
var keyed = map[string]string{
	"inference_results": "source_topic, request_id",
	"gateway_logs":      "source_topic, request_id, phase",
	"moderation_hits":   "source_topic, request_id, phase, start",
	"dlq_entries":       "dlq_topic, dlq_partition, dlq_offset",
	"sink_ledger":       "batch_id, group, topic, partition, min_offset",
}

// census is each rebuilt table's rows, raw and deduplicated, and a checksum of its keys and
// versions: what a migration must keep.
func census(t *testing.T, ctx context.Context, conn driver.Conn) map[string]string {
	t.Helper()
	out := map[string]string{}
	for table, key := range keyed {
		ver := "version"
		if table == "sink_ledger" {
			ver = "rows"
		}
		var n, sum uint64
		if err := conn.QueryRow(ctx, fmt.Sprintf("SELECT count(), sum(cityHash64(%s, %s)) FROM %s", key, ver, table)).Scan(&n, &sum); err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		out[table] = fmt.Sprintf("%d rows, checksum %x", n, sum)
		if table != "sink_ledger" {
			var nf uint64
			if err := conn.QueryRow(ctx, "SELECT count() FROM "+table+" FINAL").Scan(&nf); err != nil {
				t.Fatalf("%s FINAL: %v", table, err)
			}
			out[table] += fmt.Sprintf(", %d deduplicated", nf)
		}
	}
	return out
}

// syncReplicas waits on every host for its replicas of the rebuilt and rollup tables to hold every part
// (a count through a Distributed table reads one replica of each shard); nothing on one server.
func syncReplicas(t *testing.T, ctx context.Context, conn driver.Conn, hosts []string, db string) {
	t.Helper()
	if localSuffix(conn) == "" {
		return
	}
	for _, h := range hosts {
		hc, err := chschema.Open(ctx, chschema.Conn{Addr: h, Database: db})
		if err != nil {
			t.Fatal(err)
		}
		tables := []string{rollup.DLQFirst, rollup.Watermarks}
		for table := range keyed {
			tables = append(tables, table)
		}
		for _, r := range rollup.All {
			tables = append(tables, r.Tables()...)
		}
		for _, table := range tables {
			if ok, err := chschema.TableExists(ctx, hc, table+chschema.LocalSuffix); err != nil || !ok {
				continue // not created yet: the layout before a migration (the day level, 0018)
			}
			if err := hc.Exec(ctx, "SYSTEM SYNC REPLICA "+table+chschema.LocalSuffix); err != nil {
				t.Fatalf("%s: %v", h, err)
			}
		}
		hc.Close()
	}
}

// moveOver fills a database left at 0015 (the layout of before) with two days of traffic and
// a replay of its last hours, migrates it with migrate, and checks that every table holds the
// same rows after, under the new key, and that the rollups built for them equal the views.
func moveOver(t *testing.T, ctx context.Context, conn driver.Conn, hosts []string, db string, migrate func(chschema.MigrateOptions) error) {
	t.Helper()
	if err := migrate(chschema.MigrateOptions{UpTo: 15}); err != nil {
		t.Fatal(err)
	}
	end := time.Now().UTC().Truncate(time.Minute)
	for _, s := range []dashdata.Spec{
		{Requests: 6000, From: end.Add(-48 * time.Hour), To: end},
		{Requests: 1000, First: 5000, From: end.Add(-8 * time.Hour), To: end, Epoch: 1},
	} {
		if err := dashdata.Fill(ctx, conn, s); err != nil {
			t.Fatal(err)
		}
	}
	syncReplicas(t, ctx, conn, hosts, db)
	before := census(t, ctx, conn)
	// A stage would not rebuild tables this size at start-up: it leaves them to migrate.
	if err := migrate(chschema.MigrateOptions{RebuildLimit: 1000}); !errors.Is(err, chschema.ErrRebuildNeeded) {
		t.Fatalf("migration with a rebuild limit of 1,000 rows: %v, want ErrRebuildNeeded", err)
	}
	var lines int
	if err := migrate(chschema.MigrateOptions{Progress: func(s string) { lines++ }}); err != nil {
		t.Fatal(err)
	}
	syncReplicas(t, ctx, conn, hosts, db)
	after := census(t, ctx, conn)
	for table, b := range before {
		if after[table] != b {
			t.Errorf("%s: before the migration %s, after %s", table, b, after[table])
		}
		var key string
		if err := conn.QueryRow(ctx, "SELECT sorting_key FROM system.tables WHERE database = currentDatabase() AND name = ?", table+localSuffix(conn)).Scan(&key); err != nil {
			t.Fatal(err)
		}
		if len(key) < 16 || key[:16] != "toStartOfMinute(" {
			t.Errorf("%s is sorted by %q after the migration", table, key)
		}
	}
	t.Logf("every row kept: %v; %d progress lines", after, lines)
	syncReplicas(t, ctx, conn, hosts, db) // the rollups too
	ws := rollupcheck.Windows(end.Add(-48*time.Hour), end)
	if n := rollupcheck.Equal(t, conn, "migrated", ws); n < len(rollup.All)*len(ws) {
		t.Errorf("%d of %d comparisons had rows", n, len(rollup.All)*len(ws))
	}
}

// localSuffix is "_local" on a cluster's database (its tables are Distributed over _local
// ones), "" on one server.
func localSuffix(conn driver.Conn) string {
	var n uint64
	_ = conn.QueryRow(context.Background(), "SELECT count() FROM system.tables WHERE database = currentDatabase() AND name = 'inference_results_local'").Scan(&n)
	if n > 0 {
		return chschema.LocalSuffix
	}
	return ""
}

// TestMigrationMovesAnExistingDatabaseOver: a database of the layout before 0016, with rows,
// moves over on one server: 0016 rebuilds its tables under the time key, 0017 builds their
// rollups; every row and count is the same after.
func TestMigrationMovesAnExistingDatabaseOver(t *testing.T) {
	_, conn := testDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	moveOver(t, ctx, conn, nil, "", func(o chschema.MigrateOptions) error {
		_, err := chschema.MigrateWith(ctx, conn, o)
		return err
	})
}

// TestMigrationMovesAClusterOver is the same on the 2 x 2 cluster: the rebuilds run ON CLUSTER
// on the replicated _local tables, the Distributed tables keep their names.
func TestMigrationMovesAClusterOver(t *testing.T) {
	cfg, hosts := clusterDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	conn, err := chschema.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	moveOver(t, ctx, conn, hosts, cfg.Database, func(o chschema.MigrateOptions) error {
		_, err := chschema.MigrateClusterWith(ctx, cfg, false, o)
		return err
	})
}
