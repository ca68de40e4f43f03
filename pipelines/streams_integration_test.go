package pipelines_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/moderation"
	"github.com/backflowhq/backflow/pipelines"
	"github.com/backflowhq/backflow/sinks/clickhouse"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
	"github.com/backflowhq/backflow/test/pipelinetest"
	"github.com/backflowhq/backflow/test/testenv"
	"github.com/backflowhq/backflow/tools/loadgen"
)

// streamUnderTest is one of the example streams on private topics, with what was sent to it.
type streamUnderTest struct {
	name, topic, group, table, key string
	sent                           []loadgen.Entry // every manifest's entries so far
	// passes is how many times the stream's group read its topic: a replay reads the poison
	// again, and dead-letters it again.
	passes int
	check  []valueCheck // columns compared with the records sent
}

// valueCheck is one column of a stream's view, read as text, and what the record sent makes it.
type valueCheck struct {
	sql  string
	want func(rec map[string]any) string
}

// TestStreamsEndToEnd runs the two example streams, declared only in YAML (deploy/streams/
// streams.yaml), with `backflow run`'s pipelines.Run on the stack, loadgen's manifests as the
// oracle:
//   - every valid record's key is one row of v_<table>, from one of the offsets the key was
//     sent at, with the values sent; duplicates collapse; each poison record is in the DLQ
//     once, with its origin and class, and nothing else is;
//   - agent-task-event v2 (two defaulted fields) arrives while v1 traffic flows: the columns
//     are added, and v1 and v2 records both land, v1 ones with the defaults;
//   - a replay of the agent stream's group from the start converges to the same rows;
//   - an incompatible v3 (attempt int → string) stops the run with an error naming the field,
//     its records neither in the table nor in the DLQ, their offsets uncommitted.
func TestStreamsEndToEnd(t *testing.T) {
	env := pipelinetest.NewEnv(t, "st")
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	chcfg, conn := env.Database(t, ctx, "")
	if _, err := chschema.Migrate(ctx, conn); err != nil {
		t.Fatal(err)
	}
	dlqTopic := "sdlq-" + env.ID
	agent := &streamUnderTest{name: "agent-task-event", topic: "agent-" + env.ID, group: "stream-agent-" + env.ID, table: "agent_task_event", key: "event_id", passes: 1}
	train := &streamUnderTest{name: "training-data-pipeline", topic: "train-" + env.ID, group: "stream-train-" + env.ID, table: "training_data", key: "record_id", passes: 1}
	testenv.Topics(t, ctx, env.Kafka, 3, agent.topic, train.topic, dlqTopic)
	testenv.Groups(t, env.Kafka, agent.group, train.group)

	str := func(v any) string {
		if m, ok := v.(map[string]any); ok && len(m) == 1 { // a union's value, keyed by its type
			for _, x := range m {
				v = x
			}
		}
		switch x := v.(type) {
		case nil:
			return "NULL"
		case bool:
			if x {
				return "1"
			}
			return "0"
		case time.Time:
			return strconv.FormatInt(x.Unix(), 10)
		case []any:
			return strconv.Itoa(len(x))
		}
		return fmt.Sprint(v)
	}
	field := func(path string) func(map[string]any) string {
		return func(m map[string]any) string {
			var v any = m
			for _, p := range strings.Split(path, ".") {
				v = v.(map[string]any)[p]
			}
			return str(v)
		}
	}
	agent.check = []valueCheck{{"task_id", field("task_id")}, {"toString(state)", field("state")}, {"toString(event_type)", field("event_type")},
		{"toString(attempt)", field("attempt")}, {"agent_id", field("agent.id")}, {"ifNull(agent_model, 'NULL')", field("agent.model")},
		{"toString(length(tool_calls_tool))", field("tool_calls")}, {"toString(toUnixTimestamp(event_time))", field("event_time")}}
	// The training stream screens feedback_text: the oracle of its words is the service itself.
	mod := env.Moderation(t)
	screened := map[string]string{}
	sensitive := func(m map[string]any) string {
		text := field("feedback_text")(m)
		if text == "NULL" {
			return ""
		}
		if w, ok := screened[text]; ok {
			return w
		}
		res, err := mod.Check(ctx, []moderation.Item{{ID: "1", Text: text}})
		if err != nil {
			t.Fatal(err)
		}
		var words []string
		for _, h := range res[0].Hits {
			words = append(words, h.Word)
		}
		slices.Sort(words)
		screened[text] = strings.Join(slices.Compact(words), ",")
		return screened[text]
	}
	train.check = []valueCheck{{"toString(kind)", field("kind")}, {"user_id", field("user.id")}, {"tenant_id", field("user.tenant")},
		{"toString(accepted)", field("accepted")}, {"dataset", field("dataset")}, {"ifNull(toString(rating), 'NULL')", field("rating")},
		{"toString(length(actions))", field("actions")}, {"toString(toUnixTimestamp(event_time))", field("event_time")},
		{"arrayStringConcat(_sensitive_words, ',')", sensitive}}

	schemaFile := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "deploy", "streams", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	send := func(s *streamUnderTest, schema string, runID string, records int, seed uint64, poison float64) {
		t.Helper()
		prod, err := env.Kafka.NewClient(loadgen.ProducerOpts()...)
		if err != nil {
			t.Error(err)
			return
		}
		defer prod.Close()
		var buf bytes.Buffer
		st, err := loadgen.RunStream(ctx, loadgen.StreamConfig{Topic: s.topic, Schema: schemaFile(schema), KeyField: s.key, TimeField: "event_time",
			Records: records, DuplicateRate: 0.05, PoisonRate: poison, Seed: seed}, prod, env.Registry, loadgen.Options{RunID: runID, Manifest: &buf})
		if err != nil || st.Failed > 0 {
			t.Errorf("loadgen %s: %v (%v)", s.name, err, st)
			return
		}
		m, err := loadgen.ParseManifest(&buf)
		if err != nil {
			t.Error(err)
			return
		}
		t.Logf("loadgen %s (%s): %v", s.name, schema, st)
		s.sent = append(s.sent, m.Entries...)
	}

	// v1 traffic on both streams, then the pipeline, configured by YAML alone.
	send(agent, "agent-task-event.avsc", env.ID+"-a", 1200, 1, 0.02)
	send(train, "training-data-pipeline.avsc", env.ID+"-t", 800, 2, 0.02)
	if t.Failed() {
		t.FailNow()
	}
	example, err := os.ReadFile(filepath.Join("..", "deploy", "streams", "streams.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	yaml := strings.NewReplacer(
		"topic: agent-task-event", "topic: "+agent.topic+"\n    group: "+agent.group,
		"topic: training-data-pipeline", "topic: "+train.topic+"\n    group: "+train.group).Replace(string(example))
	yaml = streamsConfigHead("stream-agent-task-event, stream-training-data-pipeline", env.DB, dlqTopic) + yaml
	path := filepath.Join(t.TempDir(), "backflow.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) string {
		if k == "BACKFLOW_CLICKHOUSE_DATABASE" {
			return "" // the file's
		}
		return os.Getenv(k)
	}
	loaded, err := pipelines.Load(path, getenv)
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	start := func() *testenv.Stage {
		return testenv.StartStage(t, ctx, "backflow run (streams)", func(ctx context.Context) error {
			return pipelines.Run(ctx, loaded, pipelines.RunOptions{Logger: quiet})
		})
	}
	run := start()
	waitStreams := func(s *testenv.Stage) {
		t.Helper()
		testenv.WaitCommitted(t, s.Context(), env.Admin, agent.group, agent.topic)
		testenv.WaitCommitted(t, s.Context(), env.Admin, train.group, train.topic)
	}
	waitStreams(run)
	for _, s := range []*streamUnderTest{agent, train} {
		checkStream(t, ctx, env, conn, s)
	}
	checkPoisonDeadLettered(t, ctx, env, dlqTopic, agent, train)
	if hits := queryStrings(t, ctx, conn, "SELECT toString(countIf(length(_sensitive_words) > 0)) FROM v_training_data")[0]; hits == "0" {
		t.Error("no training row has a sensitive word: the screening was not exercised")
	} else {
		t.Logf("training-data-pipeline: %s rows with sensitive words in feedback_text", hits)
	}
	// The dashboard's pipeline section reads the ledger: each stream's group has its row in
	// v_freshness, counting every record landed (duplicates included, poison not).
	fresh := queryStrings(t, ctx, conn, "SELECT concat(group, ' ', toString(rows_total)) FROM v_freshness WHERE group IN ('"+agent.group+"', '"+train.group+"') ORDER BY group")
	if want := []string{fmt.Sprintf("%s %d", agent.group, countValid(agent.sent)), fmt.Sprintf("%s %d", train.group, countValid(train.sent))}; strings.Join(fresh, ",") != strings.Join(want, ",") {
		t.Errorf("v_freshness rows %q, want %q", fresh, want)
	}

	// v2 while v1 traffic flows: the table gains priority and reviewer; both land.
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i, schema := range []string{"agent-task-event.v2.avsc", "agent-task-event.avsc"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := &streamUnderTest{name: agent.name, topic: agent.topic, key: agent.key}
			send(s, schema, fmt.Sprintf("%s-v%d", env.ID, 2-i), 600, uint64(10+i), 0.01)
			mu.Lock()
			agent.sent = append(agent.sent, s.sent...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	waitStreams(run)
	agent.check = append(agent.check, valueCheck{"toString(priority)", func(m map[string]any) string {
		if v, ok := m["priority"]; ok {
			return str(v)
		}
		return "0" // a v1 record: the column's default
	}}, valueCheck{"ifNull(reviewer, 'NULL')", func(m map[string]any) string { return str(m["reviewer"]) }})
	checkStream(t, ctx, env, conn, agent)
	checkPoisonDeadLettered(t, ctx, env, dlqTopic, agent, train)
	bySchema := queryStrings(t, ctx, conn, "SELECT toString(uniqExact(_schema_id)) FROM v_agent_task_event")
	if bySchema[0] != "2" {
		t.Errorf("rows of %s schema ids after v2, want 2 (v1 and v2)", bySchema[0])
	}
	// The table's DDL is versioned: created at start-up (v1), columns added by the running
	// stage when v2 arrived (v2), each under the schema id it followed.
	history := func(when string) {
		t.Helper()
		got := queryStrings(t, ctx, conn, "SELECT concat(stream, ' v', toString(version), ': ', change) FROM stream_migrations ORDER BY stream, version")
		want := []string{"agent-task-event v1: create", "agent-task-event v2: add columns priority, reviewer", "training-data-pipeline v1: create"}
		if strings.Join(got, "; ") != strings.Join(want, "; ") {
			t.Errorf("stream_migrations %s: %q, want %q", when, got, want)
		}
		ids := queryStrings(t, ctx, conn, "SELECT toString(schema_id) FROM stream_migrations WHERE stream = 'agent-task-event' ORDER BY schema_id")
		rowIDs := queryStrings(t, ctx, conn, "SELECT DISTINCT toString(_schema_id) FROM v_agent_task_event ORDER BY _schema_id")
		if strings.Join(ids, ",") != strings.Join(rowIDs, ",") {
			t.Errorf("stream_migrations %s: agent-task-event's versions follow schema ids %v, its rows carry %v", when, ids, rowIDs)
		}
	}
	history("after v2")

	// A replay of the agent stream's group from the start converges to the same rows.
	run.Stop()
	before := queryStrings(t, ctx, conn, "SELECT toString(count()) FROM agent_task_event")[0]
	p := replayToEarliest(t, ctx, env, agent.group, chcfg, "streams test")
	agent.passes++
	run = start()
	waitStreams(run)
	after := queryStrings(t, ctx, conn, "SELECT toString(count()) FROM agent_task_event")[0]
	t.Logf("replay re-read %d records of %s: rows stored %s before, %s after", p.Plan.Reread(), agent.group, before, after)
	checkStream(t, ctx, env, conn, agent)
	checkPoisonDeadLettered(t, ctx, env, dlqTopic, agent, train)
	history("after the replay") // a replay re-reads records; the table is already at v2

	// v3 changes attempt's type: the run stops naming the field; nothing of v3 lands.
	subject := agent.topic + "-value"
	for _, r := range env.Registry.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatNone}, subject) {
		if r.Err != nil {
			t.Logf("setting %s's compatibility to NONE: %v (the registry may enforce none)", subject, r.Err)
		}
	}
	ends := endOffsets(t, ctx, env.Admin, agent.topic)
	v3 := &streamUnderTest{name: agent.name, topic: agent.topic, key: agent.key}
	send(v3, "agent-task-event.v3.avsc", env.ID+"-v3", 30, 20, loadgen.None)
	<-run.Done()
	err = run.Err()
	if !errors.Is(err, clickhouse.ErrStreamStopped) || !strings.Contains(err.Error(), "field attempt changed type") {
		t.Fatalf("after v3 the run returned %v, want ErrStreamStopped naming the field attempt", err)
	}
	t.Logf("v3 stopped the run: %v", err)
	committed := committedOffsets(t, ctx, env.Admin, agent.group, agent.topic)
	for p, end := range ends {
		if committed[p] != end {
			t.Errorf("partition %d: committed %d, want %d (the first v3 record's offset, left uncommitted)", p, committed[p], end)
		}
	}
	if n := queryStrings(t, ctx, conn, "SELECT toString(count()) FROM agent_task_event WHERE event_id IN ("+strings.Join(uuidsOf(t, ctx, env, v3.sent), ",")+")")[0]; n != "0" {
		t.Errorf("%s v3 rows in the table, want 0", n)
	}
	checkStream(t, ctx, env, conn, agent) // unchanged: the v3 records are not in the oracle
	checkPoisonDeadLettered(t, ctx, env, dlqTopic, agent, train)
}

// checkStream compares the stream's view with what was sent: every valid key once, from one
// of the locations it was sent at, with the values of the record there.
func checkStream(t *testing.T, ctx context.Context, env *pipelinetest.Env, conn driver.Conn, s *streamUnderTest) {
	t.Helper()
	records := readTopic(t, ctx, env, s.topic)
	locs := map[string]map[loadgen.Location]bool{}
	for _, e := range s.sent {
		if !e.Valid() {
			continue
		}
		if locs[e.RequestID] == nil {
			locs[e.RequestID] = map[loadgen.Location]bool{}
		}
		locs[e.RequestID][loadgen.Location{Topic: e.Topic, Partition: e.Partition, Offset: e.Offset}] = true
	}
	exprs := []string{"toString(" + s.key + ")", "toString(_partition)", "toString(_offset)"}
	for _, c := range s.check {
		exprs = append(exprs, c.sql)
	}
	rows, err := conn.Query(ctx, "SELECT "+strings.Join(exprs, ", ")+" FROM v_"+s.table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := map[string]bool{}
	bad := 0
	for rows.Next() {
		vals := make([]string, len(exprs))
		ptrs := make([]any, len(exprs))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		key := vals[0]
		part, _ := strconv.Atoi(vals[1])
		off, _ := strconv.ParseInt(vals[2], 10, 64)
		loc := loadgen.Location{Topic: s.topic, Partition: int32(part), Offset: off}
		rec, known := records[loc]
		switch {
		case seen[key]:
			t.Errorf("%s: key %s twice", s.name, key)
		case locs[key] == nil:
			t.Errorf("%s: key %s was not sent", s.name, key)
		case !locs[key][loc] || !known:
			t.Errorf("%s: key %s from %v, where it was not sent", s.name, key, loc)
		default:
			for i, c := range s.check {
				if want := c.want(rec); vals[3+i] != want && bad < 10 {
					bad++
					t.Errorf("%s: key %s: %s is %q, sent %q", s.name, key, c.sql, vals[3+i], want)
				}
			}
		}
		seen[key] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(seen) != len(locs) {
		t.Errorf("%s: %d keys in v_%s, %d valid keys sent", s.name, len(seen), s.table, len(locs))
	}
	t.Logf("%s: %d rows in v_%s = %d keys sent (%d valid records, %d columns compared each)", s.name, len(seen), s.table, len(locs), countValid(s.sent), len(s.check))
}

func countValid(es []loadgen.Entry) int {
	n := 0
	for _, e := range es {
		if e.Valid() {
			n++
		}
	}
	return n
}

// checkPoisonDeadLettered: each poison record of the streams is in the DLQ once per pass over
// it (a replay dead-letters it again), with its origin, its stream's stage and the class its
// kind names, and nothing else is.
func checkPoisonDeadLettered(t *testing.T, ctx context.Context, env *pipelinetest.Env, topic string, streams ...*streamUnderTest) {
	t.Helper()
	want := map[loadgen.Location]string{}
	stage := map[string]string{}
	passes := map[string]int{}
	for _, s := range streams {
		stage[s.topic] = chschema.StreamStagePrefix + s.name
		passes[s.topic] = s.passes
		for _, e := range s.sent {
			if !e.Valid() {
				want[loadgen.Location{Topic: e.Topic, Partition: e.Partition, Offset: e.Offset}] = e.Class
			}
		}
	}
	got := map[loadgen.Location]int{}
	for _, e := range testenv.DLQEntries(t, ctx, env.Kafka, topic) {
		loc := loadgen.Location{Topic: e.Origin.Topic, Partition: e.Origin.Partition, Offset: e.Origin.Offset}
		got[loc]++
		class, ok := want[loc]
		switch {
		case !ok:
			t.Errorf("DLQ holds %v (%s: %s), which is no poison", loc, e.Class, e.Message)
		case e.Class != class || e.Stage != stage[loc.Topic]:
			t.Errorf("DLQ entry of %v: class %s stage %s, want %s %s", loc, e.Class, e.Stage, class, stage[loc.Topic])
		}
	}
	for loc := range want {
		if got[loc] != passes[loc.Topic] {
			t.Errorf("poison at %v is in the DLQ %d times, want %d", loc, got[loc], passes[loc.Topic])
		}
	}
	t.Logf("DLQ: %d entries for %d poison records", len(got), len(want))
}

// readTopic decodes every valid record of topic by its writer schema, by location.
func readTopic(t *testing.T, ctx context.Context, env *pipelinetest.Env, topic string) map[loadgen.Location]map[string]any {
	t.Helper()
	dec, err := avro.NewGenericDecoder(env.Registry, avro.DecoderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ends := endOffsets(t, ctx, env.Admin, topic)
	cl, err := env.Kafka.NewClient(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	out := map[loadgen.Location]map[string]any{}
	left := 0
	for _, e := range ends {
		left += int(e)
	}
	for left > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("reading %s: %v", topic, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= ends[r.Partition] {
				return
			}
			left--
			id, body, err := dec.Frame(r.Value)
			if err != nil {
				return
			}
			w, err := dec.Writer(ctx, id)
			if err != nil {
				return
			}
			if m, err := dec.Decode(id, body, w, w); err == nil {
				out[loadgen.Location{Topic: topic, Partition: r.Partition, Offset: r.Offset}] = m
			}
		})
	}
	return out
}

// uuidsOf are the event ids of the entries' records, quoted for SQL.
func uuidsOf(t *testing.T, ctx context.Context, env *pipelinetest.Env, es []loadgen.Entry) []string {
	t.Helper()
	recs := readTopic(t, ctx, env, es[0].Topic)
	var out []string
	for _, e := range es {
		if m, ok := recs[loadgen.Location{Topic: e.Topic, Partition: e.Partition, Offset: e.Offset}]; ok {
			out = append(out, "toUUID('"+fmt.Sprint(m["event_id"])+"')")
		}
	}
	if len(out) == 0 {
		t.Fatal("no v3 record read back")
	}
	return out
}

func endOffsets(t *testing.T, ctx context.Context, cl *kgo.Client, topic string) map[int32]int64 {
	t.Helper()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

func committedOffsets(t *testing.T, ctx context.Context, cl *kgo.Client, group, topic string) map[int32]int64 {
	t.Helper()
	offs, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic {
			out[o.Partition] = o.At
		}
	})
	return out
}

func queryStrings(t *testing.T, ctx context.Context, conn driver.Conn, q string) []string {
	t.Helper()
	rows, err := conn.Query(ctx, q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// streamsConfigHead is the config file of a test that runs declared streams, up to its
// streams: section: stages, no metrics, the test's database and DLQ, short batches and
// backoffs, migrate on.
func streamsConfigHead(stages, db, dlqTopic string) string {
	return fmt.Sprintf(`stages: [%s]
metrics:
  addr: "off"
clickhouse:
  database: %s
sink_clickhouse:
  dlq_topic: %s
  batch_interval: 200ms
  backoff_min: 20ms
  backoff_max: 1s
  migrate: true
`, stages, db, dlqTopic)
}

// oneStream is a declared stream a test runs alone: its name (also the stage's, stream-<name>),
// its topic and group, and the fields its table is keyed and timed by.
type oneStream struct {
	name, topic, group, dedupeKey, eventTime string
}

// runOneStream starts `backflow run` (pipelines.Run) of st alone, on the test's database and DLQ
// topic, with a config file written as a user would, and waits until its group has committed
// everything on its topic.
func runOneStream(t *testing.T, ctx context.Context, env *pipelinetest.Env, st oneStream, dlqTopic string) *testenv.Stage {
	t.Helper()
	yaml := streamsConfigHead("stream-"+st.name, env.DB, dlqTopic) + fmt.Sprintf(`streams:
  - name: %s
    topic: %s
    group: %s
    dedupe_key: %s
    event_time: %s
`, st.name, st.topic, st.group, st.dedupeKey, st.eventTime)
	path := filepath.Join(t.TempDir(), "backflow.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	loaded, err := pipelines.Load(path, func(k string) string {
		if k == "BACKFLOW_CLICKHOUSE_DATABASE" {
			return "" // the file's
		}
		return os.Getenv(k)
	})
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	run := testenv.StartStage(t, ctx, "backflow run ("+st.name+")", func(ctx context.Context) error {
		return pipelines.Run(ctx, loaded, pipelines.RunOptions{Logger: quiet})
	})
	testenv.WaitCommitted(t, run.Context(), env.Admin, st.group, st.topic)
	return run
}

// checkStreamEnd checks what a one-stream test leaves: the stream's versions in
// stream_migrations (history, "version schema_id: change"), each poison record dead-lettered
// once by the stream's stage with its class (by offset), and every record of the topic's one
// partition committed (records).
func checkStreamEnd(t *testing.T, ctx context.Context, env *pipelinetest.Env, conn driver.Conn, st oneStream, dlqTopic string, history []string, poison map[int64]string, records int64) {
	t.Helper()
	got := queryStrings(t, ctx, conn, "SELECT concat(toString(version), ' ', toString(schema_id), ': ', change) FROM stream_migrations WHERE stream = '"+st.name+"' ORDER BY version")
	if strings.Join(got, "; ") != strings.Join(history, "; ") {
		t.Errorf("stream_migrations %q, want %q", got, history)
	}
	dead := map[int64]string{}
	for _, e := range testenv.DLQEntries(t, ctx, env.Kafka, dlqTopic) {
		if e.Origin.Topic != st.topic || e.Stage != "stream-"+st.name {
			t.Errorf("DLQ entry from %s stage %s, want %s stream-%s", e.Origin.Topic, e.Stage, st.topic, st.name)
		}
		if _, twice := dead[e.Origin.Offset]; twice {
			t.Errorf("offset %d dead-lettered twice", e.Origin.Offset)
		}
		dead[e.Origin.Offset] = e.Class
	}
	if fmt.Sprint(dead) != fmt.Sprint(poison) {
		t.Errorf("DLQ by offset %v, want %v", dead, poison)
	}
	if c := committedOffsets(t, ctx, env.Admin, st.group, st.topic); c[0] != records {
		t.Errorf("committed offset %d, want %d (every record)", c[0], records)
	}
}
