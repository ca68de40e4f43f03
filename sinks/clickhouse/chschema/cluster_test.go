package chschema

import (
	"strings"
	"testing"
)

// TestClusterStatements: each kind of statement the migrations hold has its cluster form, and
// every name in it is qualified with the database (ON CLUSTER runs in the other hosts'
// default database).
func TestClusterStatements(t *testing.T) {
	names := map[string]bool{"inference_results": true, "sink_ledger": true, "v_dlq_entries": true, "dlq_first": true, "dlq_first_local": true}
	for _, tt := range []struct {
		name, stmt string
		want       []string
		perHost    []bool
	}{
		{"replacing table sharded by request_id",
			"CREATE TABLE IF NOT EXISTS inference_results (\n    request_id String,\n    version UInt64\n) ENGINE = ReplacingMergeTree(version)\nPARTITION BY toYYYYMM(event_time)\nORDER BY (source_topic, request_id)",
			[]string{"CREATE TABLE IF NOT EXISTS `db`.inference_results_local ON CLUSTER c (\n    request_id String,\n    version UInt64\n) ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/db/inference_results_local', '{replica}', version)\nPARTITION BY toYYYYMM(event_time)\nORDER BY (source_topic, request_id)",
				"CREATE TABLE IF NOT EXISTS `db`.inference_results ON CLUSTER c AS `db`.inference_results_local ENGINE = Distributed(c, `db`, inference_results_local, cityHash64(request_id))"},
			[]bool{false, false}},
		{"plain table sharded by its key",
			"CREATE TABLE IF NOT EXISTS sink_ledger (\n    group String\n) ENGINE = MergeTree\nORDER BY (group, topic, partition, min_offset)",
			[]string{"CREATE TABLE IF NOT EXISTS `db`.sink_ledger_local ON CLUSTER c (\n    group String\n) ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/db/sink_ledger_local', '{replica}')\nORDER BY (group, topic, partition, min_offset)",
				"CREATE TABLE IF NOT EXISTS `db`.sink_ledger ON CLUSTER c AS `db`.sink_ledger_local ENGINE = Distributed(c, `db`, sink_ledger_local, cityHash64(group, topic, partition, min_offset))"},
			[]bool{false, false}},
		{"a stream's table: a UUID or Enum key is hashed as text (18.16's cityHash64 refuses them)",
			"CREATE TABLE IF NOT EXISTS agent_task_event (\n    `event_id` UUID,\n    `state` Enum8('A' = 1),\n    `_window` UInt64\n) ENGINE = ReplacingMergeTree(`_offset`)\nORDER BY (`event_id`, `state`, `_window`)",
			[]string{"CREATE TABLE IF NOT EXISTS `db`.agent_task_event_local ON CLUSTER c (\n    `event_id` UUID,\n    `state` Enum8('A' = 1),\n    `_window` UInt64\n) ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/db/agent_task_event_local', '{replica}', `_offset`)\nORDER BY (`event_id`, `state`, `_window`)",
				"CREATE TABLE IF NOT EXISTS `db`.agent_task_event ON CLUSTER c AS `db`.agent_task_event_local ENGINE = Distributed(c, `db`, agent_task_event_local, cityHash64(toString(`event_id`), toString(`state`), _window))"},
			[]bool{false, false}},
		{"view reads the distributed tables",
			"CREATE VIEW IF NOT EXISTS v_x AS SELECT count() FROM inference_results FINAL WHERE x = 'from sink_ledger' AND y IN (SELECT 1 FROM numbers(1))",
			[]string{"CREATE VIEW IF NOT EXISTS `db`.v_x ON CLUSTER c AS SELECT count() FROM `db`.inference_results FINAL WHERE x = 'from `db`.sink_ledger' AND y IN (SELECT 1 FROM numbers(1))"},
			[]bool{false}},
		{"drop", "DROP TABLE IF EXISTS v_dlq_entries", []string{"DROP TABLE IF EXISTS `db`.v_dlq_entries ON CLUSTER c"}, []bool{false}},
		{"drop a table: its local table too, so that it is created anew", "DROP TABLE IF EXISTS dlq_first",
			[]string{"DROP TABLE IF EXISTS `db`.dlq_first ON CLUSTER c", "DROP TABLE IF EXISTS `db`.dlq_first_local ON CLUSTER c"}, []bool{false, false}},
		{"add column: local on cluster, distributed per host",
			"ALTER TABLE inference_results ADD COLUMN landed_time_ms Int64 DEFAULT 0",
			[]string{"ALTER TABLE `db`.inference_results_local ON CLUSTER c ADD COLUMN landed_time_ms Int64 DEFAULT 0",
				"ALTER TABLE inference_results ADD COLUMN landed_time_ms Int64 DEFAULT 0"},
			[]bool{false, true}},
		{"modify column (an enum's new symbol): local on cluster, distributed per host, each skipped where the type is there",
			"ALTER TABLE eval_score MODIFY COLUMN `suite` Enum8('MMLU' = 1, 'ARC' = 2)",
			[]string{"ALTER TABLE `db`.eval_score_local ON CLUSTER c MODIFY COLUMN `suite` Enum8('MMLU' = 1, 'ARC' = 2)",
				"ALTER TABLE eval_score MODIFY COLUMN `suite` Enum8('MMLU' = 1, 'ARC' = 2)"},
			[]bool{false, true}},
		{"ttl: local tables only", "ALTER TABLE sink_ledger MODIFY TTL flushed_at + INTERVAL 90 DAY",
			[]string{"ALTER TABLE `db`.sink_ledger_local ON CLUSTER c MODIFY TTL flushed_at + INTERVAL 90 DAY"}, []bool{false}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := clusterStatements(tt.stmt, "c", "db", DefaultZooKeeperPath, names)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("%d statements, want %d: %+v", len(got), len(tt.want), got)
			}
			for i := range got {
				if got[i].SQL != tt.want[i] || got[i].PerHost != tt.perHost[i] {
					t.Errorf("statement %d:\n got %q (per host %v)\nwant %q (per host %v)", i, got[i].SQL, got[i].PerHost, tt.want[i], tt.perHost[i])
				}
			}
			if strings.Contains(tt.stmt, "MODIFY COLUMN") {
				for i, table := range []string{"eval_score_local", "eval_score"} {
					if got[i].Table != table || got[i].Column != "suite" || got[i].Type != "Enum8('MMLU' = 1, 'ARC' = 2)" {
						t.Errorf("statement %d checks %s.%s for type %q, want %s.suite for the new Enum8", i, got[i].Table, got[i].Column, got[i].Type, table)
					}
				}
			}
		})
	}
	// The view's string literal above shows the one limit of qualify: it also rewrites a FROM
	// inside a string. No migration has one; this test holds that.
	all, err := Migrations()
	if err != nil {
		t.Fatal(err)
	}
	every := objectNames(all)
	for _, m := range all {
		for _, s := range m.Statements {
			if _, ok := parseRebuild(m.Version, s); ok || isBackfill(s) {
				continue // the engine runs these itself, ON CLUSTER where it must (rebuild.go, backfill.go)
			}
			if _, err := clusterStatements(s, "c", "db", DefaultZooKeeperPath, every); err != nil {
				t.Errorf("%04d_%s: %v", m.Version, m.Name, err)
			}
			if strings.Contains(s, "'from ") || strings.Contains(s, "'FROM ") {
				t.Errorf("%04d_%s: a string literal holds FROM, which qualify would rewrite", m.Version, m.Name)
			}
		}
	}
}
