package features_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/dlq"
	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/internal/loadgen"
	"github.com/backflowhq/backflow/internal/testenv"
	"github.com/backflowhq/backflow/moderation"
	"github.com/backflowhq/backflow/processors/ingest"
	"github.com/backflowhq/backflow/sinks/features"
)

// int64Feature reads an Int64 Value of a feature from an entity's hash; ok false when absent.
func int64Feature(ctx context.Context, rdb *redis.Client, key, view, feat string) (int64, bool, error) {
	b, err := rdb.HGet(ctx, key, features.FieldKey(view, feat)).Bytes()
	if err == redis.Nil {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 || num != 4 || typ != protowire.VarintType {
		return 0, false, fmt.Errorf("%s: not an int64 Value: %x", feat, b)
	}
	v, m := protowire.ConsumeVarint(b[n:])
	if m < 0 {
		return 0, false, fmt.Errorf("%s: bad varint %x", feat, b)
	}
	return int64(v), true, nil
}

// waitCommitted waits until group has committed every partition of topic to its end offset.
func waitCommitted(t *testing.T, ctx context.Context, adm *kadm.Client, group, topic string) {
	t.Helper()
	for {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		committed, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		behind := 0
		ends.Each(func(o kadm.ListedOffset) {
			c, ok := committed.Lookup(topic, o.Partition)
			if !ok || c.At < o.Offset {
				behind++
			}
		})
		if behind == 0 {
			t.Logf("group %s committed %s to its end", group, topic)
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("group %s: %d partitions of %s not committed to the end", group, behind, topic)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkDLQ asserts the sink's DLQ holds exactly the one bad enriched record, classed not_framed.
func checkDLQ(t *testing.T, ctx context.Context, kcfg kafka.Config, topic, origin, key string) {
	t.Helper()
	var entries []dlq.Entry
	if err := dlq.Scan(ctx, kcfg, topic, func(r *kgo.Record) error {
		e, err := dlq.Decode(r)
		if err != nil {
			return err
		}
		entries = append(entries, e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Fatalf("sink DLQ holds %d entries, want 1", len(entries))
	}
	e := entries[0]
	if e.Origin.Topic != origin || string(e.Origin.Key) != key || e.Class != "not_framed" || e.Stage != "sink-features" {
		t.Fatalf("sink DLQ entry = origin %s key %q class %s stage %s", e.Origin.Topic, e.Origin.Key, e.Class, e.Stage)
	}
	t.Logf("sink DLQ: 1 entry, %s/%d/%d class %s", e.Origin.Topic, e.Origin.Partition, e.Origin.Offset, e.Class)
}

// TestFeaturesEndToEnd: loadgen -> ingest -> sink-features on private topics. A request is
// counted when its gateway RESPONSE record is; so each tenant's request_count must equal the
// number of distinct requestIds whose RESPONSE original the manifest lists (duplicates and poison
// excluded), with the tenant read from that original record; likewise each model's, and each
// user's (per (tenant, user): user ids repeat across tenants). Then the sink's committed offsets
// are deleted and it re-reads the whole enriched topic: the counts must not change.
func TestFeaturesEndToEnd(t *testing.T) { runE2E(t, 0) }

// TestFeaturesRedisOutage: as TestFeaturesEndToEnd, but the sink's Redis is unreachable (through
// a proxy taken down) while all the traffic is sent and for 30 s after; the sink must retry, hold
// up consumption, and end exact once Redis is back.
func TestFeaturesRedisOutage(t *testing.T) { runE2E(t, 30*time.Second) }

func runE2E(t *testing.T, outage time.Duration) {
	testenv.Integration(t)
	kcfg := kafka.Config{Brokers: kafka.ParseBrokers(testenv.Get(testenv.KafkaBrokers)), ClientID: "features-e2e"}
	reg, err := avro.NewRegistryClient(avro.RegistryConfig{URL: testenv.Get(testenv.RegistryURL)})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := kcfg.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rdb, err := features.Open(ctx, features.Config{Addr: testenv.Get(testenv.RedisAddr)})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()

	id := fmt.Sprintf("fe%d", time.Now().UnixNano())
	icfg := ingest.Config{Group: "ingest-" + id, InferenceTopic: "inf-" + id, GatewayTopic: "gw-" + id,
		EnrichedTopic: "enriched-" + id, DLQTopic: "dlq-" + id, ControlTopic: "control-" + id}
	fcfg := features.SinkConfig{Group: "features-" + id, EnrichedTopic: icfg.EnrichedTopic, Project: "p" + id, RequestTTL: time.Hour,
		DLQTopic: "fdlq-" + id}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		adm := kadm.NewClient(admin)
		adm.DeleteTopics(ctx, icfg.InferenceTopic, icfg.GatewayTopic, icfg.EnrichedTopic, icfg.DLQTopic, icfg.ControlTopic,
			icfg.LoopTopic(), icfg.TableTopic(), fcfg.LoopTopic(), fcfg.Group+"-table", fcfg.DLQTopic)
		adm.DeleteGroup(ctx, icfg.Group)
		adm.DeleteGroup(ctx, fcfg.Group)
		for _, sub := range []string{icfg.InferenceTopic + "-value", icfg.GatewayTopic + "-value", icfg.EnrichedTopic + "-value"} {
			reg.DeleteSubject(ctx, sub, sr.SoftDelete)
		}
		var cursor uint64
		for {
			keys, next, err := rdb.Scan(ctx, cursor, "*"+fcfg.Project, 1000).Result()
			if err != nil {
				return
			}
			if len(keys) > 0 {
				rdb.Del(ctx, keys...)
			}
			if cursor = next; cursor == 0 {
				return
			}
		}
	})
	if err := loadgen.EnsureTopics(ctx, admin, 3, 1, icfg.InferenceTopic, icfg.GatewayTopic); err != nil {
		t.Fatal(err)
	}
	if _, err := ingest.Prepare(ctx, admin, icfg, 1); err != nil {
		t.Fatal(err)
	}
	checker, err := moderation.New(moderation.Config{URL: testenv.Get(testenv.SensitiveURL)})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	runCtx, stopAll := context.WithCancel(ctx)
	defer stopAll()
	ingestDone := make(chan error, 1)
	go func() {
		ingestDone <- ingest.Run(runCtx, icfg, ingest.RunConfig{Kafka: kcfg, Registry: reg, Checker: checker, StorageDir: t.TempDir(), Logger: log})
	}()
	sinkRedis := rdb
	var px *switchProxy
	if outage > 0 {
		px = newSwitchProxy(t, testenv.Get(testenv.RedisAddr))
		sinkRedis = redis.NewClient(&redis.Options{Addr: px.addr, DialTimeout: time.Second, MaxRetries: -1})
		defer sinkRedis.Close()
	}
	storage := t.TempDir()
	var proc atomic.Pointer[features.Processor]
	startSink := func() (context.CancelFunc, <-chan error) {
		sctx, stop := context.WithCancel(runCtx)
		done := make(chan error, 1)
		go func() {
			done <- features.Run(sctx, fcfg, features.RunConfig{Kafka: kcfg, Registry: reg, Redis: sinkRedis, StorageDir: storage, Logger: log,
				OnReady: func(p *features.Processor) { proc.Store(p) }})
		}()
		return stop, done
	}
	stopSink, sinkDone := startSink()

	if px != nil {
		for proc.Load() == nil {
			time.Sleep(100 * time.Millisecond)
		}
		px.down()
		t.Logf("redis down for the sink")
	}
	// One record in the enriched topic that is not Avro at all: it must reach the sink's DLQ.
	if err := admin.ProduceSync(ctx, &kgo.Record{Topic: icfg.EnrichedTopic, Key: []byte("bad-" + id), Value: []byte("not avro")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// Traffic.
	prod, err := kcfg.NewClient(loadgen.ProducerOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	lcfg := loadgen.Config{Requests: 1000, DuplicateRate: 0.05, PoisonRate: 0.03, InferenceTopic: icfg.InferenceTopic, GatewayTopic: icfg.GatewayTopic}
	st, err := loadgen.Run(ctx, lcfg, prod, reg, loadgen.Options{RunID: id, Manifest: &buf})
	prod.Close()
	if err != nil || st.Failed != 0 {
		t.Fatalf("loadgen: %v (%v)", err, st)
	}
	m, err := loadgen.ParseManifest(&buf)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("loadgen: %v", st)

	// Oracle: RESPONSE originals from the manifest, their tenants from the records themselves.
	want := map[loadgen.Location]string{} // location -> requestId
	for _, e := range m.Entries {
		if e.Kind == loadgen.KindOriginal && e.Topic == icfg.GatewayTopic && e.Phase == avro.PhaseResponse {
			want[loadgen.Location{Topic: e.Topic, Partition: e.Partition, Offset: e.Offset}] = e.RequestID
		}
	}
	dec, err := avro.NewDecoder[avro.GatewayLog](reg, avro.GatewayLogSchema, avro.DecoderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	cons, err := kcfg.NewClient(kgo.ConsumeTopics(icfg.GatewayTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	tenantReqs := map[string]map[string]bool{}
	modelReqs := map[string]map[string]bool{}
	userReqs := map[[2]string]map[string]bool{} // (tenant, user) -> requestIds
	found := 0
	for found < len(want) {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d RESPONSE originals", found, len(want))
		}
		fs.EachRecord(func(r *kgo.Record) {
			rid, ok := want[loadgen.Location{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}]
			if !ok {
				return
			}
			found++
			g, _, err := dec.Decode(ctx, r.Value)
			if err != nil || g.RequestID != rid {
				t.Fatalf("RESPONSE original at %d/%d: %v (%s vs %s)", r.Partition, r.Offset, err, g.RequestID, rid)
			}
			if tenantReqs[g.TenantID] == nil {
				tenantReqs[g.TenantID] = map[string]bool{}
			}
			tenantReqs[g.TenantID][rid] = true
			if modelReqs[g.Model] == nil {
				modelReqs[g.Model] = map[string]bool{}
			}
			modelReqs[g.Model][rid] = true
			if g.UserID == "" {
				t.Fatalf("RESPONSE original %s has no userId", rid)
			}
			u := [2]string{g.TenantID, g.UserID}
			if userReqs[u] == nil {
				userReqs[u] = map[string]bool{}
			}
			userReqs[u][rid] = true
		})
	}
	cons.Close()
	total := 0
	for _, r := range tenantReqs {
		total += len(r)
	}
	userIDs := map[string]map[string]bool{} // userId -> tenants it appears in
	for u := range userReqs {
		if userIDs[u[1]] == nil {
			userIDs[u[1]] = map[string]bool{}
		}
		userIDs[u[1]][u[0]] = true
	}
	shared := 0
	for _, ts := range userIDs {
		if len(ts) > 1 {
			shared++
		}
	}
	t.Logf("oracle: %d requests over %d tenants, %d (tenant, user) pairs (%d user ids in more than one tenant) and %d models",
		total, len(tenantReqs), len(userReqs), shared, len(modelReqs))

	// compare polls Redis until every tenant's, user's and model's request_count equals the oracle.
	compare := func(label string) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for {
			var diffs []string
			for tenant, reqs := range tenantReqs {
				key := features.RedisKey(fcfg.Project, features.StringEntity(features.TenantEntity, tenant))
				n, _, err := int64Feature(ctx, rdb, key, features.TenantView, "request_count")
				if err != nil {
					t.Fatal(err)
				}
				if n != int64(len(reqs)) {
					diffs = append(diffs, fmt.Sprintf("tenant %s: %d, want %d", tenant, n, len(reqs)))
				}
			}
			for u, reqs := range userReqs {
				key := features.RedisKey(fcfg.Project, features.StringEntity(features.TenantEntity, u[0]), features.StringEntity(features.UserEntity, u[1]))
				n, _, err := int64Feature(ctx, rdb, key, features.UserView, "request_count")
				if err != nil {
					t.Fatal(err)
				}
				if n != int64(len(reqs)) {
					diffs = append(diffs, fmt.Sprintf("user %s/%s: %d, want %d", u[0], u[1], n, len(reqs)))
				}
			}
			for model, reqs := range modelReqs {
				key := features.RedisKey(fcfg.Project, features.StringEntity(features.ModelEntity, model))
				n, _, err := int64Feature(ctx, rdb, key, features.ModelView, "request_count")
				if err != nil {
					t.Fatal(err)
				}
				if n != int64(len(reqs)) {
					diffs = append(diffs, fmt.Sprintf("model %s: %d, want %d", model, n, len(reqs)))
				}
			}
			if len(diffs) == 0 {
				t.Logf("%s: all %d tenants, %d users and %d models equal the manifest", label, len(tenantReqs), len(userReqs), len(modelReqs))
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d mismatches, e.g. %v", label, len(diffs), diffs[:min(5, len(diffs))])
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	if px != nil {
		time.Sleep(outage)
		p := proc.Load()
		if p.RedisRetries() == 0 {
			t.Fatalf("no Redis retries during a %v outage", outage)
		}
		t.Logf("after %v down: %d enriched records applied, %d Redis pipeline retries; redis up again", outage, p.Stats.Records.Load(), p.RedisRetries())
		px.up()
		compare("after redis outage")
		waitCommitted(t, ctx, kadm.NewClient(admin), fcfg.Group, fcfg.EnrichedTopic)
		checkDLQ(t, ctx, kcfg, fcfg.DLQTopic, icfg.EnrichedTopic, "bad-"+id)
		stopSink()
		if err := <-sinkDone; err != nil {
			t.Fatalf("sink-features: %v", err)
		}
		stopAll()
		if err := <-ingestDone; err != nil {
			t.Fatalf("ingest: %v", err)
		}
		return
	}
	compare("first pass")
	waitCommitted(t, ctx, kadm.NewClient(admin), fcfg.Group, fcfg.EnrichedTopic)
	checkDLQ(t, ctx, kcfg, fcfg.DLQTopic, icfg.EnrichedTopic, "bad-"+id)

	// A sample read through Feast's own SDK (a private Feast project named like the test's).
	python, repo := feastSetup(t, fcfg.Project, t.TempDir())
	var sample []string
	var rows []map[string]any
	for tenant := range tenantReqs {
		if len(sample) == 8 {
			break
		}
		sample = append(sample, tenant)
		rows = append(rows, map[string]any{"tenant_id": tenant})
	}
	got := readOnline(t, python, repo, []string{"tenant_features:request_count", "tenant_features:flagged_count", "tenant_features:tokens"}, rows)
	for i, tenant := range sample {
		if n, _ := got["request_count"][i].(float64); int(n) != len(tenantReqs[tenant]) {
			t.Fatalf("Feast SDK: tenant %s request_count = %v, want %d", tenant, got["request_count"][i], len(tenantReqs[tenant]))
		}
	}
	t.Logf("Feast SDK read %d tenants equal to the manifest: %v", len(sample), got)
	// A few users the same way, by (tenant_id, user_id): first every tenant of two user ids
	// that occur in several tenants (same user_id, different rows), then others.
	var usample [][2]string
	inSample := map[[2]string]bool{}
	sharedIDs := 0
	for uid, tenants := range userIDs {
		if len(tenants) < 2 || sharedIDs == 2 {
			continue
		}
		sharedIDs++
		for tenant := range tenants {
			if len(usample) < 6 {
				usample = append(usample, [2]string{tenant, uid})
				inSample[[2]string{tenant, uid}] = true
			}
		}
	}
	for u := range userReqs {
		if len(usample) >= 10 {
			break
		}
		if !inSample[u] {
			usample = append(usample, u)
		}
	}
	rows = nil
	for _, u := range usample {
		rows = append(rows, map[string]any{"tenant_id": u[0], "user_id": u[1]})
	}
	got = readOnline(t, python, repo, []string{"user_features:request_count", "user_features:flagged_count", "user_features:tokens"}, rows)
	for i, u := range usample {
		if n, _ := got["request_count"][i].(float64); int(n) != len(userReqs[u]) {
			t.Fatalf("Feast SDK: user %s/%s request_count = %v, want %d", u[0], u[1], got["request_count"][i], len(userReqs[u]))
		}
	}
	t.Logf("Feast SDK read %d users %v equal to the manifest: %v", len(usample), usample, got)
	// Every request's row is there too, with its TTL.
	for _, rid := range want {
		key := features.RedisKey(fcfg.Project, features.StringEntity(features.RequestEntity, rid))
		if ttl := rdb.TTL(ctx, key).Val(); ttl <= 0 || ttl > time.Hour {
			t.Fatalf("request %s: ttl %v, want (0, 1h]", rid, ttl)
		}
		break
	}

	// Replay this group: stop it, delete its committed offsets, start it again. It re-reads the
	// whole enriched topic; request entries re-send their deltas, tenant/user/model marks drop them.
	stopSink()
	if err := <-sinkDone; err != nil {
		t.Fatalf("sink-features: %v", err)
	}
	if _, err := kadm.NewClient(admin).DeleteGroup(ctx, fcfg.Group); err != nil {
		t.Fatalf("delete group: %v", err)
	}
	first := proc.Load()
	enriched := first.Stats.Records.Load()
	stopSink, sinkDone = startSink()
	for proc.Load() == first || proc.Load().Stats.Records.Load() < enriched {
		if ctx.Err() != nil {
			t.Fatalf("replay read %d of %d enriched records", proc.Load().Stats.Records.Load(), enriched)
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // let the re-sent deltas through the loopback
	compare("after replay")
	second := proc.Load()
	t.Logf("replay: %d enriched records re-read (first run %d), %d deltas applied, %d re-sent deltas dropped",
		second.Stats.Records.Load(), enriched, second.Stats.Deltas.Load(), second.Stats.Duplicates.Load())
	if second.Stats.Deltas.Load() != 0 || second.Stats.Duplicates.Load() == 0 {
		t.Fatalf("replay applied %d deltas and dropped %d; want 0 applied, some dropped", second.Stats.Deltas.Load(), second.Stats.Duplicates.Load())
	}
	stopSink()
	if err := <-sinkDone; err != nil {
		t.Fatalf("sink-features after replay: %v", err)
	}

	// The sweep: with a tiny window every request entry (1000 requests' worth) goes, tenant,
	// user and model entries stay and Redis is untouched.
	fcfg.RequestWindow, fcfg.SweepEvery = time.Nanosecond, 300*time.Millisecond
	stopSink, sinkDone = startSink()
	for proc.Load() == second || proc.Load().Stats.Swept.Load() < int64(total) {
		if ctx.Err() != nil {
			t.Fatalf("sweep deleted %d of %d request entries", proc.Load().Stats.Swept.Load(), total)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("sweep deleted %d request entries", proc.Load().Stats.Swept.Load())
	compare("after sweep")
	stopSink()
	if err := <-sinkDone; err != nil {
		t.Fatalf("sink-features after sweep: %v", err)
	}
	stopAll()
	if err := <-ingestDone; err != nil {
		t.Fatalf("ingest: %v", err)
	}
}
