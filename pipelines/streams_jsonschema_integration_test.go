package pipelines_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/pipelines"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
	"github.com/backflowhq/backflow/test/pipelinetest"
	"github.com/backflowhq/backflow/test/testenv"
)

// TestJSONSchemaStreamEndToEnd: the page-view example (deploy/streams/page-view.schema.json)
// is a declared stream like an Avro one, on the real registry, Kafka and ClickHouse: each view
// is one row of v_page_view with the values sent (nested object, array of objects, enum,
// date-time, a nullable property, a map, an open object as JSON), a duplicate key collapsing to
// its latest record; v2 (an optional property and an enum value added), registered under
// BACKWARD while the stage runs, adds the column and extends the enum, and v1 values sent after
// it get null there; text that is not JSON, an unknown schema id and a value its schema rejects
// are each dead-lettered once with their class; every offset is committed.
func TestJSONSchemaStreamEndToEnd(t *testing.T) {
	env := pipelinetest.NewEnv(t, "sjs")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, conn := env.Database(t, ctx, "")
	topic, group, dlqTopic := "views-"+env.ID, "stream-views-"+env.ID, "sdlq-"+env.ID
	subject := topic + "-value"
	testenv.Topics(t, ctx, env.Kafka, 1, topic, dlqTopic) // one partition: the offsets are the send order
	testenv.Groups(t, env.Kafka, group)
	testenv.Subjects(t, env.Registry, subject)
	if r := env.Registry.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatBackward}, subject); len(r) != 1 || r[0].Err != nil {
		t.Fatalf("set %s's compatibility to BACKWARD: %+v", subject, r)
	}
	register := func(name string) int {
		t.Helper()
		b, err := os.ReadFile(filepath.Join("..", "deploy", "streams", name))
		if err != nil {
			t.Fatal(err)
		}
		ss, err := env.Registry.CreateSchema(ctx, subject, sr.Schema{Schema: string(b), Type: sr.TypeJSON})
		if err != nil {
			t.Fatalf("register %s under %s (BACKWARD): %v", name, subject, err)
		}
		return ss.ID
	}
	prod, err := env.Kafka.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	produce := func(id int, texts ...string) {
		t.Helper()
		for _, text := range texts {
			if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: append(avro.AppendFrame(nil, id), text...)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	view := func(n int, device, extra string) string {
		return fmt.Sprintf(`{"view_id": "v%d", "at": "2026-12-0%dT10:00:00Z", "user": {"id": "u%d"}, "device": %q, "duration_ms": %d,
			"items": [{"sku": "s%d", "qty": %d}], "labels": {"k": "l%d"}%s}`, n, n, n, device, 100*n, n, n, n, extra)
	}

	id1 := register("page-view.schema.json")
	produce(id1, view(1, "desktop", `, "score": 0.5`), view(2, "mobile", ""), view(3, "tablet", `, "context": {"a": [1]}`), view(2, "desktop", `, "score": 2`))
	produce(id1, `{"view_id": `)              // offset 4: not JSON
	produce(987654321, view(5, "mobile", "")) // offset 5: an unknown schema id
	produce(id1, view(6, "watch", ""))        // offset 6: an enum value the schema does not list
	poison := map[int64]string{4: avro.ClassCorrupt, 5: avro.ClassUnknownSchema, 6: avro.ClassInvalid}

	st := oneStream{name: "page-view", topic: topic, group: group, dedupeKey: "view_id", eventTime: "at"}
	run := runOneStream(t, ctx, env, st, dlqTopic)
	rows := "SELECT concat(view_id, ' ', toString(toUnixTimestamp(at)), ' ', user_id, ' ', ifNull(user_country, '-'), ' ', toString(device), ' ', " +
		"toString(duration_ms), ' ', ifNull(toString(score), '-'), ' ', toString(items_qty), ' ', toString(labels_values), ' ', ifNull(context, '-'), ' ', " +
		"toString(_offset)%s) FROM v_page_view ORDER BY view_id"
	day := func(n int) int64 { return time.Date(2026, 12, n, 10, 0, 0, 0, time.UTC).Unix() }
	want := []string{
		fmt.Sprintf("v1 %d u1 - desktop 100 0.5 [1] ['l1'] - 0", day(1)),
		fmt.Sprintf("v2 %d u2 - desktop 200 2 [2] ['l2'] - 3", day(2)), // the duplicate key's latest record
		fmt.Sprintf("v3 %d u3 - tablet 300 - [3] ['l3'] {\"a\":[1]} 2", day(3)),
	}
	if got := queryStrings(t, ctx, conn, fmt.Sprintf(rows, "")); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("v1 rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// v2 while the stage runs: referrer added, tv appended to the enum.
	id2 := register("page-view.v2.schema.json")
	// What `migrate --dry-run` plans for it (the subject's latest schema, as the stage reads
	// it), before any v2 record arrives.
	latest, latestID, err := pipelines.LatestSchema(ctx, env.Registry, chschema.StreamConfig{Subject: subject})
	if err != nil || latestID != id2 {
		t.Fatalf("latest schema: id %d (%v), want %d", latestID, err, id2)
	}
	plan, err := chschema.PlanStream(ctx, conn, chschema.StreamConfig{Name: "page-view", Topic: topic, Group: group, DedupeKey: "view_id", EventTime: "at"}, latest, id2, chschema.Capabilities{})
	if err != nil || plan.Change() != "add columns referrer; modify columns device" || plan.Version != 2 {
		t.Fatalf("v2's plan: %q as version %d (%v), want %q as version 2", plan.Change(), plan.Version, err, "add columns referrer; modify columns device")
	}
	produce(id2, view(7, "tv", `, "referrer": "search"`))
	produce(id1, view(8, "mobile", ""))
	testenv.WaitCommitted(t, run.Context(), env.Admin, group, topic)
	want = append(want,
		fmt.Sprintf("v7 %d u7 - tv 700 - [7] ['l7'] - 7 search", day(7)),
		fmt.Sprintf("v8 %d u8 - mobile 800 - [8] ['l8'] - 8 -", day(8))) // v1 after v2: null
	for i := range 3 {
		want[i] += " -" // rows written before v2: the column's default
	}
	if got := queryStrings(t, ctx, conn, fmt.Sprintf(rows, ", ' ', ifNull(referrer, '-')")); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rows after v2:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	checkStreamEnd(t, ctx, env, conn, st, dlqTopic, []string{fmt.Sprintf("1 %d: create", id1), fmt.Sprintf("2 %d: add columns referrer; modify columns device", id2)}, poison, 9)
	run.Stop()
}
