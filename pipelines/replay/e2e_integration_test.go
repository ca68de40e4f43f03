package replay_test

import (
	"context"
	"log/slog"
	"os"
	"reflect"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	goredis "github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/control"
	"github.com/backflowhq/backflow/pipelines/replay"
	"github.com/backflowhq/backflow/processors/features"
	"github.com/backflowhq/backflow/processors/ingest"
	"github.com/backflowhq/backflow/sinks/clickhouse"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
	"github.com/backflowhq/backflow/sinks/redis"
	"github.com/backflowhq/backflow/test/pipelinetest"
	"github.com/backflowhq/backflow/test/testenv"
	"github.com/backflowhq/backflow/tools/loadgen"
)

// pipeline is one test's private topics, groups, ClickHouse database and Feast project.
type pipeline struct {
	*pipelinetest.Env
	t        *testing.T
	adm      *kadm.Client
	chcfg    chschema.Conn
	ch       driver.Conn
	rdb      goredis.UniversalClient
	ingestSt string // ingest's local table storage, kept across runs
	featSt   string // the feature sink's
	log      *slog.Logger
}

func newPipeline(t *testing.T, ctx context.Context) *pipeline {
	t.Helper()
	p := &pipeline{Env: pipelinetest.NewEnv(t, "rp"), t: t, ingestSt: t.TempDir(), featSt: t.TempDir(),
		log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	p.adm = kadm.NewClient(p.Admin)
	p.chcfg, p.ch = p.Database(t, ctx, "")
	if _, err := chschema.Migrate(ctx, p.ch); err != nil {
		t.Fatal(err)
	}
	p.rdb = p.Redis(t, ctx)
	p.SourceTopics(t, ctx, 3, p.SinkDLQ)
	if _, err := ingest.Prepare(ctx, p.Admin, p.Ingest, 1); err != nil {
		t.Fatal(err)
	}
	return p
}

// waitCommitted waits until group committed the end offset of every partition of topics (a
// partition that never held a record needs no commit).
func (p *pipeline) waitCommitted(ctx context.Context, group string, topics ...string) {
	p.t.Helper()
	testenv.WaitCommittedOrEmpty(p.t, ctx, p.Admin, group, topics...)
}

// runIngest runs ingest until it committed the end of both source topics, then stops it.
func (p *pipeline) runIngest(ctx context.Context) {
	p.t.Helper()
	mod := p.Moderation(p.t)
	p.run(ctx, "ingest", func(ctx context.Context) error {
		return ingest.Run(ctx, p.Ingest, ingest.RunConfig{Kafka: p.Kafka, Registry: p.Registry, SensitiveWords: mod, StorageDir: p.ingestSt, Logger: p.log})
	}, func() { p.waitCommitted(ctx, p.Ingest.Group, p.Ingest.InferenceTopic, p.Ingest.GatewayTopic) })
}

// runClickHouse runs the ClickHouse sink until it committed the enriched topic's end.
func (p *pipeline) runClickHouse(ctx context.Context) clickhouse.Stats {
	p.t.Helper()
	sink, err := clickhouse.New(clickhouse.Config{Group: p.SinkGroup, Topic: p.Ingest.EnrichedTopic, DLQTopic: p.SinkDLQ,
		BatchRows: 1000, BatchInterval: 200 * time.Millisecond, FromStart: true},
		clickhouse.RunConfig{Kafka: p.Kafka, Registry: p.Registry, ClickHouse: p.chcfg, Logger: p.log})
	if err != nil {
		p.t.Fatal(err)
	}
	p.run(ctx, "sink-clickhouse", sink.Run, func() { p.waitCommitted(ctx, p.SinkGroup, p.Ingest.EnrichedTopic) })
	return sink.Stats()
}

// runFeatures runs the feature sink until it committed the ends of the enriched topic and then
// of its loopback (whose deltas are emitted before the enriched records commit); its stats.
func (p *pipeline) runFeatures(ctx context.Context) (records, deltas, resent int64) {
	p.t.Helper()
	var proc atomic.Pointer[features.Processor]
	p.run(ctx, "sink-features", func(ctx context.Context) error {
		return features.Run(ctx, p.Features, features.RunConfig{Kafka: p.Kafka, Registry: p.Registry, Store: redis.NewWriter(p.rdb, redis.Config{}), StorageDir: p.featSt, Logger: p.log,
			OnReady: func(pr *features.Processor) { proc.Store(pr) }})
	}, func() {
		p.waitCommitted(ctx, p.Features.Group, p.Features.EnrichedTopic)
		p.waitCommitted(ctx, p.Features.Group, p.Features.LoopTopic())
	})
	st := &proc.Load().Stats
	return st.Records.Load(), st.Deltas.Load(), st.Duplicates.Load()
}

func (p *pipeline) run(ctx context.Context, name string, run func(context.Context) error, wait func()) {
	p.t.Helper()
	st := testenv.StartStage(p.t, ctx, name, run)
	wait()
	st.Stop()
}

// replay plans args for group and executes the plan with the given actions, recording it in
// the control topic and ClickHouse.
func (p *pipeline) replay(ctx context.Context, group string, args []string, toEnd []string, actions ...replay.Action) (*replay.Plan, replay.Record) {
	p.t.Helper()
	req, err := replay.ParseArgs(group, args)
	if err != nil {
		p.t.Fatal(err)
	}
	req.ToEnd = toEnd
	plan, err := replay.Build(ctx, p.Admin, req)
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Logf("plan for %s: %d partition(s), %d record(s) to re-read, rows %+v", group, len(plan.Rows), plan.Reread(), plan.Rows)
	rec, err := replay.Apply(ctx, p.Admin, plan, replay.Config{Actions: actions, By: "e2e-test", Reason: "test",
		Recorders: []replay.Recorder{replay.ControlTopic{Client: p.Admin, Topic: p.Ingest.ControlTopic}, replay.ClickHouseLog{Conn: p.ch}}})
	if err != nil {
		p.t.Fatalf("replay %s %v: %v", group, args, err)
	}
	return plan, rec
}

type slot struct{ topic, phase string }

// counts reads the deduplicated (FINAL) count and uniqExact(request_id) per slot, and the rows
// the sink wrote by its ledger (the raw tables are no measure: ClickHouse collapses them in
// background merges).
func (p *pipeline) counts(ctx context.Context) (final map[slot][2]uint64, written uint64) {
	p.t.Helper()
	final = map[slot][2]uint64{}
	for _, q := range []string{
		`SELECT source_topic, '', count(), uniqExact(request_id) FROM v_inference_results GROUP BY source_topic`,
		`SELECT source_topic, phase, count(), uniqExact(request_id) FROM v_gateway_logs GROUP BY source_topic, phase`,
	} {
		rows, err := p.ch.Query(ctx, q)
		if err != nil {
			p.t.Fatal(err)
		}
		for rows.Next() {
			var k slot
			var c, u uint64
			if err := rows.Scan(&k.topic, &k.phase, &c, &u); err != nil {
				p.t.Fatal(err)
			}
			final[k] = [2]uint64{c, u}
		}
		rows.Close()
	}
	if err := p.ch.QueryRow(ctx, "SELECT toUInt64(sum(rows)) FROM sink_ledger").Scan(&written); err != nil {
		p.t.Fatal(err)
	}
	return final, written
}

func (p *pipeline) redisKeys(ctx context.Context) []string {
	var out []string
	var cursor uint64
	for {
		keys, next, err := p.rdb.Scan(ctx, cursor, "*"+p.Features.Project, 1000).Result()
		if err != nil {
			return out
		}
		out = append(out, keys...)
		if cursor = next; cursor == 0 {
			return out
		}
	}
}

// features reads every Redis row of the project: key -> field -> value.
func (p *pipeline) features(ctx context.Context) map[string]map[string]string {
	p.t.Helper()
	out := map[string]map[string]string{}
	for _, k := range p.redisKeys(ctx) {
		h, err := p.rdb.HGetAll(ctx, k).Result()
		if err != nil {
			p.t.Fatal(err)
		}
		out[k] = h
	}
	return out
}

func sameFeatures(t *testing.T, label string, want, got map[string]map[string]string) {
	t.Helper()
	if reflect.DeepEqual(want, got) {
		return
	}
	diff := 0
	for k, h := range want {
		if !reflect.DeepEqual(h, got[k]) {
			diff++
		}
	}
	t.Fatalf("%s: feature rows differ: %d rows before, %d after, %d rows changed or missing", label, len(want), len(got), diff)
}

// TestReplayEndToEnd runs loadgen -> ingest -> ClickHouse sink + feature sink on the real stack,
// then replays each stage with the replay package, as `backflow replay --execute` does:
//
//  1. ingest from the earliest source offsets with a new epoch: the enriched topic must gain
//     exactly one record per valid original (request id and slot each once, every one in the new
//     epoch); the ClickHouse sink then re-writes them: the deduplicated counts do not change while
//     the rows written (by the ledger) double; the feature sink re-reads them: every Redis row is unchanged and no
//     delta is applied (each request already counted);
//  2. the feature sink from the earliest enriched offset: no delta applied, rows unchanged;
//  3. the feature sink with its state reset: the aggregates are recomputed from the enriched
//     topic (deltas applied again) and every Redis row equals what it was;
//  4. the ClickHouse sink from the earliest: the deduplicated counts do not change.
//
// Each replay must be recorded in the control topic and in replay_log, from -> to.
func TestReplayEndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	p := newPipeline(t, ctx)

	m := p.Load(t, ctx, loadgen.Config{Requests: 600, DuplicateRate: 0.05, CrossPartitionShare: 0.5, PoisonRate: 0.03,
		SensitiveShare: 0.2, Seed: 6})
	originals := map[[2]string]bool{} // (requestId, slot)
	slotOf := func(topic, phase string) string {
		if phase != "" {
			return topic + "/" + phase
		}
		return topic
	}
	for _, e := range m.Entries {
		if e.Kind == loadgen.KindOriginal {
			originals[[2]string{e.RequestID, slotOf(e.Topic, e.Phase)}] = true
		}
	}
	t.Logf("%d valid originals", len(originals))

	p.runIngest(ctx)
	chSt := p.runClickHouse(ctx)
	_, deltas0, _ := p.runFeatures(ctx)
	final0, raw0 := p.counts(ctx)
	feats0 := p.features(ctx)
	var sum0 uint64
	for _, c := range final0 {
		sum0 += c[0]
	}
	if sum0 != uint64(len(originals)) || raw0 != uint64(len(originals)) || chSt.Rows != int64(len(originals)) {
		t.Fatalf("first pass: FINAL %d, ledger %d, sink rows %d, want %d", sum0, raw0, chSt.Rows, len(originals))
	}
	if deltas0 == 0 || len(feats0) == 0 {
		t.Fatalf("first pass: %d deltas, %d feature rows", deltas0, len(feats0))
	}
	ends0, err := p.adm.ListEndOffsets(ctx, p.Ingest.EnrichedTopic)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first pass: %d rows FINAL = written by the ledger, %d feature rows in Redis, %d deltas applied", sum0, len(feats0), deltas0)

	// 1. ingest, from the earliest source offsets, in a new epoch.
	_, rec := p.replay(ctx, p.Ingest.Group, []string{"--to-earliest", "--topic", p.Ingest.InferenceTopic, "--topic", p.Ingest.GatewayTopic}, nil,
		&replay.Epoch{Client: p.Admin, ControlTopic: p.Ingest.ControlTopic, Group: p.Ingest.Group})
	if rec.Epoch == nil || rec.Epoch.From != 0 || rec.Epoch.To != 1 {
		t.Fatalf("record epoch %+v, want 0 -> 1", rec.Epoch)
	}
	if e, err := control.ReadEpoch(ctx, p.Admin, p.Ingest.ControlTopic, p.Ingest.Group); err != nil || e != 1 {
		t.Fatalf("epoch after the replay: %d (%v), want 1", e, err)
	}
	p.runIngest(ctx)
	// Every record re-processed once: the enriched records past the old ends.
	dec, err := avro.NewDecoder[avro.EnrichedRecord](p.Registry, avro.EnrichedSchema, avro.DecoderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ends1, err := p.adm.ListEndOffsets(ctx, p.Ingest.EnrichedTopic)
	if err != nil {
		t.Fatal(err)
	}
	from := map[string]map[int32]kgo.Offset{p.Ingest.EnrichedTopic: {}}
	want := map[int32]int64{}
	var added int64
	ends1.Each(func(o kadm.ListedOffset) {
		e0, _ := ends0.Lookup(o.Topic, o.Partition)
		from[o.Topic][o.Partition] = kgo.NewOffset().At(e0.Offset)
		if o.Offset > e0.Offset {
			want[o.Partition] = o.Offset
			added += o.Offset - e0.Offset
		}
	})
	if added != int64(len(originals)) {
		t.Fatalf("the replay added %d enriched records, want %d (one per valid original)", added, len(originals))
	}
	rd, err := p.Kafka.NewClient(kgo.ConsumePartitions(from))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[[2]string]int{}
	for len(want) > 0 {
		fs := rd.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("reading the replayed enriched records: timed out")
		}
		fs.EachRecord(func(r *kgo.Record) {
			e, _, err := dec.Decode(ctx, r.Value)
			if err != nil {
				t.Fatalf("enriched %d/%d: %v", r.Partition, r.Offset, err)
			}
			phase := ""
			if e.Gateway != nil {
				phase = e.Gateway.Phase
			}
			k := [2]string{e.RequestID, slotOf(e.SourceTopic, phase)}
			if e.Epoch != 1 || !originals[k] {
				t.Fatalf("replayed enriched %d/%d: epoch %d, %v in manifest %v", r.Partition, r.Offset, e.Epoch, k, originals[k])
			}
			seen[k]++
			if r.Offset+1 >= want[r.Partition] {
				delete(want, r.Partition)
			}
		})
	}
	rd.Close()
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("%v re-processed %d times", k, n)
		}
	}
	if len(seen) != len(originals) {
		t.Fatalf("%d of %d originals re-processed", len(seen), len(originals))
	}
	t.Logf("ingest replay: %d enriched records added, every valid original once, all in epoch 1", added)

	chSt = p.runClickHouse(ctx)
	final1, raw1 := p.counts(ctx)
	if !reflect.DeepEqual(final0, final1) || raw1 != 2*raw0 {
		t.Fatalf("after the ingest replay: FINAL %v (was %v), ledger rows %d (was %d)", final1, final0, raw1, raw0)
	}
	var newEpochRows uint64
	if err := p.ch.QueryRow(ctx, `SELECT toUInt64(sum(rows)) FROM sink_ledger WHERE epoch = 1`).Scan(&newEpochRows); err != nil {
		t.Fatal(err)
	}
	if newEpochRows != uint64(len(originals)) {
		t.Fatalf("ledger: %d rows written in epoch 1, want %d", newEpochRows, len(originals))
	}
	_, deltas, resent := p.runFeatures(ctx)
	sameFeatures(t, "after the ingest replay", feats0, p.features(ctx))
	if deltas != 0 {
		t.Fatalf("after the ingest replay the feature sink applied %d deltas, want 0", deltas)
	}
	t.Logf("after the ingest replay: FINAL unchanged %v, ledger rows %d -> %d, ledger epoch-1 rows %d; features unchanged, 0 deltas (%d re-sends dropped)",
		final1, raw0, raw1, newEpochRows, resent)

	// 2. the feature sink from the earliest enriched offset: its idempotence key makes it a no-op.
	plan2, _ := p.replay(ctx, p.Features.Group, []string{"--to-earliest", "--all-topics"}, nil)
	if plan2.Reread() != 2*int64(len(originals)) {
		t.Fatalf("feature replay plan re-reads %d records, want %d", plan2.Reread(), 2*len(originals))
	}
	recs, deltas, resent := p.runFeatures(ctx)
	sameFeatures(t, "after replaying the feature sink", feats0, p.features(ctx))
	if deltas != 0 || recs != 2*int64(len(originals)) || resent == 0 {
		t.Fatalf("feature replay: %d records, %d deltas applied (want 0), %d re-sends", recs, deltas, resent)
	}
	t.Logf("feature replay: %d records re-read, %d re-sent deltas dropped, 0 applied, rows unchanged", recs, resent)

	// 3. the feature sink with its state reset: recomputed, equal.
	_, rec3 := p.replay(ctx, p.Features.Group, []string{"--to-earliest", "--topic", p.Features.EnrichedTopic}, []string{p.Features.LoopTopic()},
		&replay.FeatureReset{Client: p.Admin, Redis: p.rdb, Sink: p.Features, StorageDir: p.featSt})
	if len(p.features(ctx)) >= len(feats0) {
		t.Fatalf("after the reset %d feature rows remain of %d: aggregate rows not deleted", len(p.features(ctx)), len(feats0))
	}
	_, deltas, _ = p.runFeatures(ctx)
	sameFeatures(t, "after the state reset", feats0, p.features(ctx))
	if deltas != deltas0 {
		t.Fatalf("after the state reset %d deltas applied, the first pass applied %d", deltas, deltas0)
	}
	t.Logf("feature state reset (%v): recomputed with %d deltas, every row equal", rec3.Actions, deltas)

	// 4. the ClickHouse sink from the earliest: re-written rows collapse.
	p.replay(ctx, p.SinkGroup, []string{"--to-earliest", "--all-topics"}, nil)
	p.runClickHouse(ctx)
	final4, raw4 := p.counts(ctx)
	if !reflect.DeepEqual(final0, final4) || raw4 != 2*raw1 {
		t.Fatalf("after the ClickHouse replay: FINAL %v (was %v), ledger rows %d (was %d)", final4, final0, raw4, raw1)
	}
	t.Logf("ClickHouse replay: FINAL unchanged, ledger rows %d -> %d", raw1, raw4)

	// Every replay recorded, from -> to.
	recs4, err := replay.ReadRecords(ctx, p.Admin, p.Ingest.ControlTopic, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(recs4) != 4 || recs4[0].Group != p.Ingest.Group || recs4[0].Spec != "--to-earliest" || recs4[0].By != "e2e-test" {
		t.Fatalf("control topic records: %+v", recs4)
	}
	for _, mv := range recs4[0].Partitions {
		if mv.To != 0 || mv.From <= 0 {
			t.Fatalf("ingest replay move %+v, want from the end to 0", mv)
		}
	}
	var rows, replays uint64
	if err := p.ch.QueryRow(ctx, `SELECT count(), uniqExact(replay_id) FROM replay_log`).Scan(&rows, &replays); err != nil {
		t.Fatal(err)
	}
	wantRows := 0
	for _, r := range recs4 {
		wantRows += len(r.Partitions)
	}
	if replays != 4 || rows != uint64(wantRows) {
		t.Fatalf("replay_log: %d rows over %d replays, want %d over 4", rows, replays, wantRows)
	}
	var epochTo int32
	var fromSum, toSum int64
	if err := p.ch.QueryRow(ctx, `SELECT any(epoch_to), sum(from_offset), sum(to_offset) FROM replay_log WHERE replay_id = ?`, recs4[0].ID).Scan(&epochTo, &fromSum, &toSum); err != nil {
		t.Fatal(err)
	}
	srcRecords := int64(len(m.Entries)) // every acknowledged source record: originals, duplicates, poison
	if epochTo != 1 || toSum != 0 || fromSum != srcRecords {
		t.Fatalf("replay_log of the ingest replay: epoch_to %d, from %d (want %d source records), to %d", epochTo, fromSum, srcRecords, toSum)
	}
	ids := make([]string, len(recs4))
	for i, r := range recs4 {
		ids[i] = r.Group
	}
	sort.Strings(ids)
	t.Logf("recorded: %d replays (%v) in the control topic, %d rows in replay_log", len(recs4), ids, rows)
}
