package chschema_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
	"github.com/backflowhq/backflow/test/testenv"
)

// clusterDB creates a database of its own for t on every host of the cluster stack
// (ON CLUSTER), drops it on every host when t ends, and returns a Conn in cluster mode on it.
func clusterDB(t *testing.T) (chschema.Conn, []string) {
	t.Helper()
	testenv.Integration(t)
	cl := testenv.Cluster(t)
	hosts := cl.List(testenv.ClusterClickHouseAddrs)
	name := cl.Get(testenv.ClusterClickHouseName)
	if len(hosts) != 4 || name == "" {
		t.Fatalf("cluster stack env: hosts %v, cluster %q; want 4 hosts and a name", hosts, name)
	}
	db := testenv.ID("it_")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin, err := chschema.Open(ctx, chschema.Conn{Addr: hosts[0]})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.Exec(ctx, fmt.Sprintf("CREATE DATABASE IF NOT EXISTS %s ON CLUSTER %s", db, name)); err != nil {
		t.Fatal(err)
	}
	testenv.AtEnd(t, "drop database "+db+" on cluster "+name, func(ctx context.Context) error {
		conn, err := chschema.Open(ctx, chschema.Conn{Addr: hosts[0]})
		if err != nil {
			return err
		}
		defer conn.Close()
		return conn.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s ON CLUSTER %s", db, name))
	})
	return chschema.Conn{Addr: hosts[0], Database: db, Cluster: name}, hosts
}

func queryUint(t *testing.T, ctx context.Context, conn driver.Conn, q string, args ...any) uint64 {
	t.Helper()
	var n uint64
	if err := conn.QueryRow(ctx, q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// TestMigrateCluster applies every migration to a fresh database on the 2 x 2 cluster (after a
// dry run that lists them all on every host), then again: every host records every migration once, each table is a replicated *_local table
// under a Distributed one, and a second run records nothing. Then a block inserted twice
// through the Distributed table (a retried flush) is stored once, each row on one shard and
// both of its replicas, and the view reads each key once through the Distributed table. Last,
// an unknown cluster name is refused.
func TestMigrateCluster(t *testing.T) {
	cfg, hosts := clusterDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	all, err := chschema.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	reports, err := chschema.MigrateCluster(ctx, cfg, true)
	if err != nil {
		t.Fatalf("dry run: %v", err)
	}
	for _, r := range reports {
		if len(r.Pending) != len(all) || len(r.Recorded) != 0 {
			t.Errorf("dry run, host %s: pending %d, recorded %d; want %d and 0", r.Addr, len(r.Pending), len(r.Recorded), len(all))
		}
	}
	reports, err = chschema.MigrateCluster(ctx, cfg, false)
	if err != nil {
		t.Fatalf("first migrate: %v", err)
	}
	if len(reports) != 4 {
		t.Fatalf("reports for %d hosts, want 4", len(reports))
	}
	for _, r := range reports {
		if r.Had != 0 || len(r.Recorded) != len(all) {
			t.Errorf("host %s: had %d, recorded %d; want 0 and %d", r.Addr, r.Had, len(r.Recorded), len(all))
		}
	}
	reports, err = chschema.MigrateCluster(ctx, cfg, false)
	if err != nil {
		t.Fatalf("second migrate: %v", err)
	}
	for _, r := range reports {
		if r.Had != len(all) || len(r.Recorded) != 0 {
			t.Errorf("second run, host %s: had %d, recorded %d; want %d and 0", r.Addr, r.Had, len(r.Recorded), len(all))
		}
	}

	conns := make([]driver.Conn, len(hosts))
	for i, h := range hosts {
		c := cfg
		c.Addr = h
		if conns[i], err = chschema.Open(ctx, c); err != nil {
			t.Fatal(err)
		}
		defer conns[i].Close()
		for _, tc := range []struct{ table, engine string }{
			{"inference_results_local", "ReplicatedReplacingMergeTree"}, {"inference_results", "Distributed"},
			{"sink_ledger_local", "ReplicatedMergeTree"}, {"sink_ledger", "Distributed"}, {"v_inference_results", "View"},
		} {
			var engine string
			if err := conns[i].QueryRow(ctx, "SELECT engine FROM system.tables WHERE database = ? AND name = ?", cfg.Database, tc.table).Scan(&engine); err != nil || engine != tc.engine {
				t.Errorf("host %s: %s engine %q (%v), want %s", h, tc.table, engine, err, tc.engine)
			}
		}
		// 0012 added columns to both the local and the Distributed table.
		if n := queryUint(t, ctx, conns[i], "SELECT count() FROM system.columns WHERE database = ? AND table IN ('inference_results', 'inference_results_local') AND name = 'landed_time_ms'", cfg.Database); n != 2 {
			t.Errorf("host %s: landed_time_ms in %d of the 2 tables", h, n)
		}
	}

	// A retried flush: the same block twice through the Distributed table.
	const rows = 40
	insert := func() {
		b, err := conns[0].PrepareBatch(ctx, "INSERT INTO inference_results (source_topic, request_id, event_time, version)")
		if err != nil {
			t.Fatal(err)
		}
		at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
		for i := 0; i < rows; i++ {
			if err := b.Append("topic", fmt.Sprintf("req-%03d", i), at, uint64(1)); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Send(); err != nil {
			t.Fatal(err)
		}
	}
	insert()
	insert()
	perShard := map[int]uint64{}
	for i, c := range conns {
		if err := c.Exec(ctx, "SYSTEM SYNC REPLICA inference_results_local"); err != nil {
			t.Fatal(err)
		}
		n := queryUint(t, ctx, c, "SELECT count() FROM inference_results_local")
		if prev, ok := perShard[i/2]; ok && prev != n {
			t.Errorf("shard %d: replicas hold %d and %d rows", i/2+1, prev, n)
		}
		perShard[i/2] = n
	}
	t.Logf("rows per shard after the block went in twice: %v", perShard)
	if perShard[0]+perShard[1] != rows || perShard[0] == 0 || perShard[1] == 0 {
		t.Errorf("rows per shard %v: want %d in all, on both shards", perShard, rows)
	}
	for i, c := range conns {
		if n := queryUint(t, ctx, c, "SELECT count() FROM inference_results"); n != rows {
			t.Errorf("host %s: %d rows through the Distributed table, want %d", hosts[i], n, rows)
		}
	}
	// A newer version of one key lands on that key's shard and the view shows it once.
	b, err := conns[3].PrepareBatch(ctx, "INSERT INTO inference_results (source_topic, request_id, event_time, version)")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Append("topic", "req-007", time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), uint64(2)); err != nil {
		t.Fatal(err)
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
	// The other replica of the key's shard fetches the part a moment later (docs/scaling.md):
	// wait for it, as a read on any replica follows.
	for _, c := range conns {
		if err := c.Exec(ctx, "SYSTEM SYNC REPLICA inference_results_local"); err != nil {
			t.Fatal(err)
		}
	}
	if n := queryUint(t, ctx, conns[1], "SELECT count() FROM v_inference_results"); n != rows {
		t.Errorf("v_inference_results: %d rows, want %d", n, rows)
	}
	if v := queryUint(t, ctx, conns[2], "SELECT max(version) FROM v_inference_results WHERE request_id = 'req-007'"); v != 2 {
		t.Errorf("req-007 version %d through the view, want 2", v)
	}

	// A cluster the server does not define is an error that names it, before anything runs.
	bad := cfg
	bad.Cluster = "no_such_cluster"
	if _, err := chschema.MigrateCluster(ctx, bad, false); err == nil || !strings.Contains(err.Error(), `"no_such_cluster" is not in the server's system.clusters`) {
		t.Fatalf("migrate on an unknown cluster: %v, want it named as not in system.clusters", err)
	}
}
