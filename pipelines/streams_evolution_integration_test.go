package pipelines_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	hamba "github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
	"github.com/backflowhq/backflow/test/pipelinetest"
	"github.com/backflowhq/backflow/test/testenv"
)

// TestStreamFollowsEnumSymbolMidRun: the eval-score stream (deploy/streams/eval-score.avsc: a
// nested record, a map, an array of records, a union, an enum) runs on v1; then v2, which
// the registry accepts under BACKWARD, is registered while the stage runs. v2 appends the
// suite ARC (with an enum default), adds stderr inside the nested score record, makes
// score.samples a long and adds the harness record with a default. The stage follows it
// without stopping: suite and score_samples are modified, the new columns added, the view
// re-created, the change recorded as version 2 (the plan `migrate --dry-run` prints says the
// same). v1 rows keep their values and get the column defaults; v2 rows carry ARC and a
// sample count past Int32; v1 records sent after v2 get v2's Avro defaults. Every record is
// one row, nothing is dead-lettered, every offset is committed.
func TestStreamFollowsEnumSymbolMidRun(t *testing.T) {
	env := pipelinetest.NewEnv(t, "sev")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, conn := env.Database(t, ctx, "")
	topic, group, dlqTopic := "eval-"+env.ID, "stream-eval-"+env.ID, "sdlq-"+env.ID
	subject := topic + "-value"
	testenv.Topics(t, ctx, env.Kafka, 1, topic, dlqTopic) // one partition: the offsets are the send order
	testenv.Groups(t, env.Kafka, group)
	testenv.Subjects(t, env.Registry, subject)

	schemaText := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "deploy", "streams", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if r := env.Registry.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatBackward}, subject); len(r) != 1 || r[0].Err != nil {
		t.Fatalf("set %s's compatibility to BACKWARD: %+v", subject, r)
	}
	register := func(name string) (hamba.Schema, int) {
		t.Helper()
		text := schemaText(name)
		ss, err := env.Registry.CreateSchema(ctx, subject, sr.Schema{Schema: text})
		if err != nil {
			t.Fatalf("register %s under %s (BACKWARD): %v", name, subject, err)
		}
		return hamba.MustParse(text), ss.ID
	}
	prod, err := env.Kafka.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	base := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	send := func(schema hamba.Schema, id int, recs ...map[string]any) {
		t.Helper()
		for _, rec := range recs {
			body, err := hamba.Marshal(schema, rec)
			if err != nil {
				t.Fatalf("encode %v: %v", rec["eval_id"], err)
			}
			value := binary.BigEndian.AppendUint32([]byte{0}, uint32(id))
			r := &kgo.Record{Topic: topic, Key: []byte(rec["eval_id"].(string)), Value: append(value, body...)}
			if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	v1rec := func(n int, suite string) map[string]any {
		return map[string]any{"eval_id": fmt.Sprintf("e%d", n), "event_time": base.Add(time.Duration(n) * time.Minute), "model": "m1", "suite": suite,
			"score": map[string]any{"value": float64(n) / 10, "samples": int32(100 * n)}, "params": map[string]any{"shots": "5"},
			"cases": []any{map[string]any{"name": "c1", "passed": true}}, "judge": nil}
	}
	v2rec := func(n int, suite string, samples int64) map[string]any {
		r := v1rec(n, suite)
		r["score"] = map[string]any{"value": float64(n) / 10, "samples": samples, "stderr": 0.25}
		r["harness"] = map[string]any{"name": "lm-eval", "shots": int32(3)}
		return r
	}

	v1, id1 := register("eval-score.avsc")
	send(v1, id1, v1rec(1, "MMLU"), v1rec(2, "GSM8K"), v1rec(3, "HUMANEVAL"), v1rec(4, "MMLU"))

	run := runOneStream(t, ctx, env, oneStream{name: "eval-score", topic: topic, group: group, dedupeKey: "eval_id", eventTime: "event_time"}, dlqTopic)
	if n := queryStrings(t, ctx, conn, "SELECT toString(count()) FROM v_eval_score")[0]; n != "4" {
		t.Fatalf("v1: %s rows, want 4", n)
	}

	// v2, registered while the stage runs: what `migrate --dry-run` would print for it.
	v2, id2 := register("eval-score.v2.avsc")
	if id2 == id1 {
		t.Fatalf("v2 registered as v1's id %d", id1)
	}
	sc := chschema.StreamConfig{Name: "eval-score", Topic: topic, Group: group, DedupeKey: "eval_id", EventTime: "event_time"}
	plan, err := chschema.PlanStream(ctx, conn, sc, v2, id2, chschema.Capabilities{})
	wantChange := "add columns score_stderr, harness_name, harness_shots; modify columns suite, score_samples"
	if err != nil || plan.Change() != wantChange || plan.Version != 2 {
		t.Fatalf("v2's plan: %q as version %d (%v), want %q as version 2", plan.Change(), plan.Version, err, wantChange)
	}
	wantModify := "ALTER TABLE eval_score MODIFY COLUMN `suite` Enum8('MMLU' = 1, 'GSM8K' = 2, 'HUMANEVAL' = 3, 'ARC' = 4)"
	if len(plan.Statements) != 7 || plan.Statements[0] != wantModify || plan.Statements[5] != "DROP TABLE IF EXISTS v_eval_score" {
		t.Fatalf("v2's plan statements %q: want the two MODIFYs and three ADDs, then the view re-created", plan.Statements)
	}

	// Both versions flow: v2 records (ARC, a sample count past Int32), then v1 records again.
	send(v2, id2, v2rec(5, "ARC", 5_000_000_000), v2rec(6, "GSM8K", 600), v2rec(7, "ARC", 700))
	send(v1, id1, v1rec(8, "HUMANEVAL"), v1rec(9, "MMLU"))
	testenv.WaitCommitted(t, run.Context(), env.Admin, group, topic)

	got := queryStrings(t, ctx, conn, "SELECT concat(eval_id, ' ', toString(suite), ' ', toString(score_value), ' ', toString(score_samples), ' ', "+
		"toString(score_stderr), ' ', harness_name, ' ', toString(harness_shots), ' ', params_values[1], ' ', toString(cases_passed[1]), ' ', "+
		"toString(_offset), ' ', toString(_schema_id = "+fmt.Sprint(id2)+")) FROM v_eval_score ORDER BY _offset")
	want := []string{
		"e1 MMLU 0.1 100 0  0 5 1 0 0", // v1 rows written before v2: the column types' defaults
		"e2 GSM8K 0.2 200 0  0 5 1 1 0",
		"e3 HUMANEVAL 0.3 300 0  0 5 1 2 0",
		"e4 MMLU 0.4 400 0  0 5 1 3 0",
		"e5 ARC 0.5 5000000000 0.25 lm-eval 3 5 1 4 1", // v2 rows
		"e6 GSM8K 0.6 600 0.25 lm-eval 3 5 1 5 1",
		"e7 ARC 0.7 700 0.25 lm-eval 3 5 1 6 1",
		"e8 HUMANEVAL 0.8 800 0 unknown 0 5 1 7 0", // v1 records after v2: v2's Avro defaults
		"e9 MMLU 0.9 900 0 unknown 0 5 1 8 0",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if n := queryStrings(t, ctx, conn, "SELECT toString(count()) FROM eval_score")[0]; n != "9" {
		t.Errorf("eval_score holds %s rows, want 9", n)
	}
	// The table and its re-created view have the new types.
	for _, table := range []string{"eval_score", "v_eval_score"} {
		types := queryStrings(t, ctx, conn, "SELECT concat(name, ' ', type) FROM system.columns WHERE database = currentDatabase() AND table = '"+table+"' AND name IN ('suite', 'score_samples') ORDER BY name")
		if w := []string{"score_samples Int64", "suite Enum8('MMLU' = 1, 'GSM8K' = 2, 'HUMANEVAL' = 3, 'ARC' = 4)"}; strings.Join(types, "; ") != strings.Join(w, "; ") {
			t.Errorf("%s: columns %q, want %q", table, types, w)
		}
	}
	history := queryStrings(t, ctx, conn, "SELECT concat(toString(version), ' ', toString(schema_id), ': ', change) FROM stream_migrations WHERE stream = 'eval-score' ORDER BY version")
	if w := []string{fmt.Sprintf("1 %d: create", id1), fmt.Sprintf("2 %d: %s", id2, wantChange)}; strings.Join(history, "; ") != strings.Join(w, "; ") {
		t.Errorf("stream_migrations %q, want %q", history, w)
	}
	if ends := endOffsets(t, ctx, env.Admin, dlqTopic); ends[0] != 0 {
		t.Errorf("the DLQ holds %d records, want 0", ends[0])
	}
	if c := committedOffsets(t, ctx, env.Admin, group, topic); c[0] != 9 {
		t.Errorf("committed offset %d, want 9 (every record)", c[0])
	}
	run.Stop() // fails the test if the run returned an error
}
