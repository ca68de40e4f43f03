package chschema_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/hamba/avro/v2"

	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
)

// TestStreamTableOnTheCluster: on the 2 x 2 cluster stack, a stream's plan creates a replicated
// agent_task_event_local and a Distributed agent_task_event on every host, with its view; v2's
// plan adds its two columns on every host (local and Distributed tables) and re-creates the
// view with them; applying a plan again changes nothing. eval-score's v2 appends an enum
// symbol and promotes int to long: the MODIFY COLUMNs reach every host's local and
// Distributed tables and the re-created view.
func TestStreamTableOnTheCluster(t *testing.T) {
	c, hosts := clusterDB(t)
	// A bound against a hang, not a pace: every built-in migration goes through the cluster's
	// DDL queue on four 18.16 servers, which on a loaded 2-core machine took more than 2 minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	conn, err := chschema.Open(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	schema := func(name string) avro.Schema {
		b, err := os.ReadFile("../../../deploy/streams/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return avro.MustParse(string(b))
	}
	// The built-in migrations make stream_migrations, where each applied plan is recorded.
	if _, err := chschema.MigrateCluster(ctx, c, false); err != nil {
		t.Fatal(err)
	}
	sc := chschema.StreamConfig{Name: "agent-task-event", Topic: "agent-task-event", DedupeKey: "event_id", EventTime: "event_time"}
	eval := chschema.StreamConfig{Name: "eval-score", Topic: "eval-score", DedupeKey: "eval_id", EventTime: "event_time"}
	for i, step := range []struct {
		sc      chschema.StreamConfig
		file    string
		version uint32 // the version the plan is recorded as (0: nothing to apply)
	}{{sc, "agent-task-event.avsc", 1}, {sc, "agent-task-event.v2.avsc", 2}, {sc, "agent-task-event.v2.avsc", 0},
		{eval, "eval-score.avsc", 1}, {eval, "eval-score.v2.avsc", 2}, {eval, "eval-score.v2.avsc", 0}} {
		p, err := chschema.PlanStream(ctx, conn, step.sc, schema(step.file), 100+i, chschema.Capabilities{})
		if err != nil {
			t.Fatalf("%s: %v", step.file, err)
		}
		t.Logf("%s: %s, %d statements", step.file, p.Change(), len(p.Statements))
		v, err := chschema.ApplyStream(ctx, c, p)
		if err != nil {
			t.Fatalf("%s: %v", step.file, err)
		}
		if v != step.version {
			t.Fatalf("%s: recorded as version %d, want %d", step.file, v, step.version)
		}
	}
	for _, h := range hosts {
		hc := c
		hc.Addr, hc.Cluster = h, ""
		hconn, err := chschema.Open(ctx, hc)
		if err != nil {
			t.Fatal(err)
		}
		for _, table := range []string{"agent_task_event_local", "agent_task_event", "v_agent_task_event"} {
			n := queryUint(t, ctx, hconn, "SELECT count() FROM system.columns WHERE database = currentDatabase() AND table = ? AND name IN ('priority', 'reviewer', 'event_id')", table)
			if n != 3 {
				t.Errorf("host %s: %s has %d of event_id, priority, reviewer", h, table, n)
			}
		}
		for _, table := range []string{"eval_score_local", "eval_score", "v_eval_score"} {
			n := queryUint(t, ctx, hconn, "SELECT count() FROM system.columns WHERE database = currentDatabase() AND table = ? AND "+
				"(name, type) IN (('suite', 'Enum8(\\'MMLU\\' = 1, \\'GSM8K\\' = 2, \\'HUMANEVAL\\' = 3, \\'ARC\\' = 4)'), ('score_samples', 'Int64'), ('harness_shots', 'Int32'))", table)
			if n != 3 {
				t.Errorf("host %s: %s has %d of suite with ARC, score_samples Int64, harness_shots", h, table, n)
			}
		}
		// The history is one Distributed table: every host reads the same two versions.
		var history string
		if err := hconn.QueryRow(ctx, "SELECT arrayStringConcat(groupArray(concat(toString(version), ' id ', toString(schema_id), ': ', change)), '; ') "+
			"FROM (SELECT version, schema_id, change FROM stream_migrations WHERE stream = ? ORDER BY version)", sc.Name).Scan(&history); err != nil ||
			history != "1 id 100: create; 2 id 101: add columns priority, reviewer" {
			t.Errorf("host %s: stream migrations %q (%v), want version 1 create (id 100) and 2 adding priority, reviewer (id 101)", h, history, err)
		}
		if err := hconn.QueryRow(ctx, "SELECT change FROM stream_migrations WHERE stream = 'eval-score' AND version = 2").Scan(&history); err != nil ||
			history != "add columns score_stderr, harness_name, harness_shots; modify columns suite, score_samples" {
			t.Errorf("host %s: eval-score's version 2 %q (%v), want its added and modified columns", h, history, err)
		}
		if n := queryUint(t, ctx, hconn, "SELECT count() FROM system.tables WHERE database = currentDatabase() AND name = 'agent_task_event_local' AND engine = 'ReplicatedReplacingMergeTree'"); n != 1 {
			t.Errorf("host %s: agent_task_event_local is not a ReplicatedReplacingMergeTree", h)
		}
		hconn.Close()
	}
}
