package features_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/feast"
	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/processors/features"
	"github.com/backflowhq/backflow/processors/ingest"
	"github.com/backflowhq/backflow/sinks/redis"
	"github.com/backflowhq/backflow/test/faultproxy"
	"github.com/backflowhq/backflow/test/pipelinetest"
	"github.com/backflowhq/backflow/test/testenv"
	"github.com/backflowhq/backflow/tools/loadgen"
)

// checkUndecodableDeadLettered asserts the sink's DLQ holds exactly the one bad enriched
// record, classed not_framed.
func checkUndecodableDeadLettered(t *testing.T, ctx context.Context, kcfg kafka.Conn, topic, origin, key string) {
	t.Helper()
	entries := testenv.DLQEntries(t, ctx, kcfg, topic)
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
// user's (per (tenant, user): user ids repeat across tenants). The traffic's event times are
// spread over 30 hours (loadgen's simulated clock), so the windowed features differ from the
// totals: each entity's request_count_1h/_24h, flagged_count_<w>, tokens_24h, and per model
// error_count_24h, latency_p95_ms_24h and latency_max_ms_1h must equal what the RESPONSE
// originals imply (their event times, tokens, latencies and statuses), with a request flagged
// when ingest's verdict on any of its records is REVIEW or BLOCK. Then the sink's committed
// offsets are deleted and it re-reads the whole enriched topic: nothing may change.
func TestFeaturesEndToEnd(t *testing.T) { runE2E(t, 0) }

// TestFeaturesRedisOutage: as TestFeaturesEndToEnd, but the sink's Redis is unreachable (through
// a proxy taken down) while all the traffic is sent and for 30 s after. Sampled every 100 ms
// during the outage: the records the sink holds uncommitted (the writer's pending jobs) never
// exceed its cap (QueueSize + MaxBatch; the test sets QueueSize 1024 so the traffic fills it),
// Redis acknowledges nothing, the group's committed offsets on the enriched and loopback topics
// never pass the records whose writes Redis acknowledged (none: not even the undecodable record
// the DLQ took, which sits behind records waiting for Redis), and the heap stays under a bound. Then the sink must end exact once Redis is
// back, with lag 0 on both topics.
func TestFeaturesRedisOutage(t *testing.T) { runE2E(t, 30*time.Second) }

// obs is what the oracle knows of one counted request: its RESPONSE original and ingest's verdicts.
type obs struct {
	at              time.Time
	tokens, latency int64
	flagged, err    bool
}

// expected is what an entity's features must be, from its requests.
type expected struct {
	n, flagged, tokens int64
	win                map[string]expected // by window name; win of a window's value is nil
	errs, p95, max     int64
}

// expectFor computes an entity's features from its requests: the totals, and per window the
// requests whose RESPONSE falls in the window's buckets as of the entity's newest RESPONSE time
// (the Step-aligned buckets ending with that time's; see features.Window).
func expectFor(reqs []obs) expected {
	var asOf time.Time
	for _, o := range reqs {
		if o.at.After(asOf) {
			asOf = o.at
		}
	}
	sum := func(in []obs) expected {
		var e expected
		var lat []int64
		for _, o := range in {
			e.n++
			e.tokens += o.tokens
			if o.flagged {
				e.flagged++
			}
			if o.err {
				e.errs++
			}
			lat = append(lat, o.latency)
			e.max = max(e.max, o.latency)
		}
		if len(lat) > 0 {
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			v := lat[int(math.Ceil(0.95*float64(len(lat))))-1] // the 95th percentile (nearest rank)
			e.p95 = e.max
			for _, b := range features.LatencyBoundsMs { // reported as its histogram bin's upper bound
				if b >= v {
					e.p95 = min(b, e.max)
					break
				}
			}
		}
		return e
	}
	e := sum(reqs)
	e.win = map[string]expected{}
	for _, w := range features.Windows {
		from := asOf.Truncate(w.Step).Add(w.Step - w.Span)
		var in []obs
		for _, o := range reqs {
			if !o.at.Truncate(w.Step).Before(from) {
				in = append(in, o)
			}
		}
		e.win[w.Name] = sum(in)
	}
	return e
}

func runE2E(t *testing.T, outage time.Duration) {
	env := pipelinetest.NewEnv(t, "fe")
	kcfg, reg, admin, id := env.Kafka, env.Registry, env.Admin, env.ID
	icfg, fcfg := env.Ingest, env.Features
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute) // a guard against hangs; the run takes 1 to 4 min
	defer cancel()
	rdb := env.Redis(t, ctx)
	env.SourceTopics(t, ctx, 3)
	if _, err := ingest.Prepare(ctx, admin, icfg, 1); err != nil {
		t.Fatal(err)
	}
	checker := env.Moderation(t)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	runCtx, stopAll := context.WithCancel(ctx)
	defer stopAll()
	ingestDone := make(chan error, 1)
	go func() {
		ingestDone <- ingest.Run(runCtx, icfg, ingest.RunConfig{Kafka: kcfg, Registry: reg, SensitiveWords: checker, StorageDir: t.TempDir(), Logger: log})
	}()
	sinkRedis := rdb
	var wcfg redis.Config
	var px *faultproxy.Proxy
	if outage > 0 {
		wcfg.QueueSize = 1024 // the outage's traffic (about 6,000 jobs) must fill it
		var err error
		if px, err = faultproxy.New(faultproxy.Config{Target: testenv.Get(testenv.RedisAddr)}); err != nil {
			t.Fatal(err)
		}
		defer px.Close()
		sinkRedis = goredis.NewClient(&goredis.Options{Addr: px.Addr(), DialTimeout: time.Second, MaxRetries: -1})
		defer sinkRedis.Close()
	}
	storage := t.TempDir()
	var proc atomic.Pointer[features.Processor]
	startSink := func() (context.CancelFunc, <-chan error) {
		sctx, stop := context.WithCancel(runCtx)
		done := make(chan error, 1)
		go func() {
			done <- features.Run(sctx, fcfg, features.RunConfig{Kafka: kcfg, Registry: reg, Store: redis.NewWriter(sinkRedis, wcfg), StorageDir: storage, Logger: log,
				OnReady: func(p *features.Processor) { proc.Store(p) }})
		}()
		return stop, done
	}
	stopSink, sinkDone := startSink()

	var sampler *outageSampler
	for proc.Load() == nil { // a sink that fails to start says why instead of leaving the test waiting
		select {
		case err := <-sinkDone:
			t.Fatalf("sink-features stopped before it was ready: %v", err)
		case <-ctx.Done():
			t.Fatal("sink-features never became ready")
		case <-time.After(100 * time.Millisecond):
		}
	}
	if px != nil {
		px.Set(faultproxy.Refuse) // the listener and every connection closed: Redis is unreachable
		t.Logf("redis down for the sink")
	}
	// One record in the enriched topic that is not Avro at all: it must reach the sink's DLQ.
	// Without an outage it goes first. With one, it goes in among the first enriched records
	// (at least 5 in every partition before it), so that the sink reads it, and dead-letters it,
	// behind records still waiting for Redis: committing it must wait for them too.
	var badAt atomic.Pointer[kgo.Record]
	produceBad := func() {
		res := admin.ProduceSync(ctx, &kgo.Record{Topic: icfg.EnrichedTopic, Key: []byte("bad-" + id), Value: []byte("not avro")})
		if err := res.FirstErr(); err != nil {
			t.Error(err)
			return
		}
		badAt.Store(res[0].Record)
	}
	if px == nil {
		produceBad()
	} else {
		sampler = startOutageSampler(ctx, kadm.NewClient(admin), proc.Load(), fcfg, wcfg.QueueSize, badAt.Load)
	}
	// Traffic.
	// 1,000 requests over the last 30 hours of event time (one every 108 s), sent flat out.
	const requests, span = 1000, 30 * time.Hour
	lcfg := loadgen.Config{Requests: requests, DuplicateRate: 0.05, PoisonRate: 0.03, SensitiveShare: 0.2,
		EventStart: time.Now().Add(-span).UTC(), EventStep: span / requests}
	if px != nil {
		// Paced, so that the undecodable record lands among the first enriched records: sent
		// flat out, ingest emits hundreds per partition between two looks at the end offsets,
		// and a record that lands deeper than the sink's cap of pending records lets it read
		// during the outage is never read before Redis is back.
		lcfg.Rate = 250
	}
	badDone := make(chan struct{})
	if px != nil {
		go func() {
			defer close(badDone)
			adm := kadm.NewClient(admin)
			for ctx.Err() == nil {
				ends, err := adm.ListEndOffsets(ctx, icfg.EnrichedTopic)
				least := int64(-1)
				ends.Each(func(o kadm.ListedOffset) {
					if least < 0 || o.Offset < least {
						least = o.Offset
					}
				})
				if err == nil && least >= 5 {
					produceBad()
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
	} else {
		close(badDone)
	}
	m, st, err := env.TryLoad(ctx, lcfg)
	<-badDone
	bad := badAt.Load()
	if bad == nil {
		t.Fatal("the undecodable record was not produced")
	}
	t.Logf("undecodable record at %s/%d/%d", bad.Topic, bad.Partition, bad.Offset)
	if err != nil {
		t.Fatalf("loadgen: %v (%v)", err, st)
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
	respOf := map[string]obs{}                  // requestId -> its RESPONSE original
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
			respOf[rid] = obs{at: g.EventTime.UTC(), tokens: int64(g.PromptTokens) + int64(g.CompletionTokens), latency: int64(g.LatencyMs), err: g.StatusCode >= 500}
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

	// Flags: ingest's verdicts, from every record it emitted (one per original).
	originals := map[string]bool{} // topic/requestId/phase of every original
	for _, e := range m.Entries {
		if e.Kind == loadgen.KindOriginal {
			originals[e.Topic+"/"+e.RequestID+"/"+e.Phase] = true
		}
	}
	edec, err := avro.NewDecoder[avro.EnrichedRecord](reg, avro.EnrichedSchema, avro.DecoderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	econs, err := kcfg.NewClient(kgo.ConsumeTopics(icfg.EnrichedTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	flagged := map[string]bool{}
	emitted := map[string]bool{}
	for len(emitted) < len(originals) {
		fs := econs.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d enriched originals", len(emitted), len(originals))
		}
		fs.EachRecord(func(r *kgo.Record) {
			e, _, err := edec.Decode(ctx, r.Value)
			if err != nil {
				return // the undecodable record planted above
			}
			phase := ""
			if e.Gateway != nil {
				phase = e.Gateway.Phase
			}
			emitted[e.SourceTopic+"/"+e.RequestID+"/"+phase] = true
			if e.Moderation.Verdict == "REVIEW" || e.Moderation.Verdict == "BLOCK" {
				flagged[e.RequestID] = true
			}
		})
	}
	econs.Close()
	expectOf := func(reqs map[string]bool) expected {
		var os []obs
		for rid := range reqs {
			o := respOf[rid]
			o.flagged = flagged[rid]
			os = append(os, o)
		}
		return expectFor(os)
	}
	tenantExp, userExp, modelExp := map[string]expected{}, map[[2]string]expected{}, map[string]expected{}
	var in1h, in24h, flagged24h int64
	for k, r := range tenantReqs {
		tenantExp[k] = expectOf(r)
		in1h, in24h, flagged24h = in1h+tenantExp[k].win["1h"].n, in24h+tenantExp[k].win["24h"].n, flagged24h+tenantExp[k].win["24h"].flagged
	}
	for k, r := range userReqs {
		userExp[k] = expectOf(r)
	}
	for k, r := range modelReqs {
		modelExp[k] = expectOf(r)
	}
	t.Logf("oracle windows: of %d requests (%d flagged) over %v of event time, the tenants' 24h windows hold %d (%d flagged), their 1h windows %d",
		total, len(flagged), span, in24h, flagged24h, in1h)
	if in1h == 0 || in24h == int64(total) || flagged24h == 0 {
		t.Fatalf("the windows do not discriminate: 1h %d, 24h %d of %d, flagged in 24h %d", in1h, in24h, total, flagged24h)
	}

	// compare polls Redis until every tenant's, user's and model's features equal the oracle.
	type check struct {
		feat string
		want func(e expected) int64
	}
	win := func(w string, f func(e expected) int64) func(e expected) int64 {
		return func(e expected) int64 { return f(e.win[w]) }
	}
	n := func(e expected) int64 { return e.n }
	fl := func(e expected) int64 { return e.flagged }
	tok := func(e expected) int64 { return e.tokens }
	partyChecks := []check{{"request_count", n}, {"flagged_count", fl}, {"tokens", tok},
		{"request_count_1h", win("1h", n)}, {"flagged_count_1h", win("1h", fl)}, {"tokens_1h", win("1h", tok)},
		{"request_count_24h", win("24h", n)}, {"flagged_count_24h", win("24h", fl)}, {"tokens_24h", win("24h", tok)}}
	modelChecks := []check{{"request_count", n}, {"error_count", func(e expected) int64 { return e.errs }},
		{"latency_max_ms", func(e expected) int64 { return e.max }}, {"latency_p95_ms", func(e expected) int64 { return e.p95 }},
		{"request_count_1h", win("1h", n)}, {"latency_max_ms_1h", win("1h", func(e expected) int64 { return e.max })},
		{"request_count_24h", win("24h", n)}, {"error_count_24h", win("24h", func(e expected) int64 { return e.errs })},
		{"latency_p95_ms_24h", win("24h", func(e expected) int64 { return e.p95 })}}
	compare := func(label string) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for {
			var diffs []string
			diff := func(what, key, view string, e expected, checks []check) {
				for _, c := range checks {
					got, _, err := testenv.Int64Feature(ctx, rdb, key, view, c.feat)
					if err != nil {
						t.Fatal(err)
					}
					if want := c.want(e); got != want {
						diffs = append(diffs, fmt.Sprintf("%s %s: %d, want %d", what, c.feat, got, want))
					}
				}
			}
			for tenant, e := range tenantExp {
				diff("tenant "+tenant, feast.RedisKey(fcfg.Project, feast.StringEntity(features.TenantEntity, tenant)), features.TenantView, e, partyChecks)
			}
			for u, e := range userExp {
				diff("user "+u[0]+"/"+u[1], feast.RedisKey(fcfg.Project, feast.StringEntity(features.TenantEntity, u[0]), feast.StringEntity(features.UserEntity, u[1])),
					features.UserView, e, partyChecks)
			}
			for model, e := range modelExp {
				diff("model "+model, feast.RedisKey(fcfg.Project, feast.StringEntity(features.ModelEntity, model)), features.ModelView, e, modelChecks)
			}
			if len(diffs) == 0 {
				t.Logf("%s: all %d tenants, %d users and %d models equal the manifest (%d features each, totals and windows)",
					label, len(tenantReqs), len(userReqs), len(modelReqs), len(partyChecks))
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
		sampler.stop(t)
		p := proc.Load()
		if n := p.Stats.Undecoded.Load(); n != 1 {
			t.Fatalf("the sink dead-lettered %d records during the outage, want the 1 undecodable one (behind records waiting for Redis)", n)
		}
		if p.RedisRetries() == 0 {
			t.Fatalf("no Redis retries during a %v outage", outage)
		}
		t.Logf("after %v down: %d enriched records applied, %d Redis pipeline retries; redis up again", outage, p.Stats.Records.Load(), p.RedisRetries())
		px.Set(faultproxy.Forward)
		compare("after redis outage")
		testenv.WaitCommitted(t, ctx, admin, fcfg.Group, fcfg.EnrichedTopic)
		testenv.WaitCommitted(t, ctx, admin, fcfg.Group, fcfg.LoopTopic())
		if n := p.Pending(); n != 0 {
			t.Fatalf("%d records still pending after lag 0", n)
		}
		checkUndecodableDeadLettered(t, ctx, kcfg, fcfg.DLQTopic, icfg.EnrichedTopic, "bad-"+id)
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
	testenv.WaitCommitted(t, ctx, admin, fcfg.Group, fcfg.EnrichedTopic)
	testenv.WaitCommitted(t, ctx, admin, fcfg.Group, fcfg.LoopTopic())
	checkUndecodableDeadLettered(t, ctx, kcfg, fcfg.DLQTopic, icfg.EnrichedTopic, "bad-"+id)

	// A sample read through Feast's own SDK (a private Feast project named like the test's).
	python, repo := testenv.FeastSetup(t, fcfg.Project, t.TempDir())
	var sample []string
	var rows []map[string]any
	for tenant := range tenantReqs {
		if len(sample) == 8 {
			break
		}
		sample = append(sample, tenant)
		rows = append(rows, map[string]any{"tenant_id": tenant})
	}
	feastChecks := func(view string, checks []check) []string {
		var out []string
		for _, c := range checks {
			out = append(out, view+":"+c.feat)
		}
		return out
	}
	assertFeast := func(what string, got map[string][]any, i int, e expected, checks []check) {
		t.Helper()
		for _, c := range checks {
			if v, ok := got[c.feat][i].(float64); !ok || int64(v) != c.want(e) {
				t.Fatalf("Feast SDK: %s %s = %v, want %d", what, c.feat, got[c.feat][i], c.want(e))
			}
		}
	}
	got := testenv.FeastReadOnline(t, python, repo, feastChecks(features.TenantView, partyChecks), rows)
	for i, tenant := range sample {
		assertFeast("tenant "+tenant, got, i, tenantExp[tenant], partyChecks)
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
	got = testenv.FeastReadOnline(t, python, repo, feastChecks(features.UserView, partyChecks), rows)
	for i, u := range usample {
		assertFeast("user "+u[0]+"/"+u[1], got, i, userExp[u], partyChecks)
	}
	t.Logf("Feast SDK read %d users %v equal to the manifest: %v", len(usample), usample, got)
	rows = nil
	var msample []string
	for model := range modelExp {
		msample = append(msample, model)
		rows = append(rows, map[string]any{"model": model})
	}
	got = testenv.FeastReadOnline(t, python, repo, feastChecks(features.ModelView, modelChecks), rows)
	for i, model := range msample {
		assertFeast("model "+model, got, i, modelExp[model], modelChecks)
	}
	t.Logf("Feast SDK read all %d models equal to the manifest: %v", len(msample), got)
	// Every request's row is there too, with its TTL.
	for _, rid := range want {
		key := feast.RedisKey(fcfg.Project, feast.StringEntity(features.RequestEntity, rid))
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
	// The re-sent deltas have come back through the loopback once the group committed the end
	// of both topics (an enriched record commits only after its deltas' batch was acknowledged),
	// not after a fixed pause that a loaded machine may outlast.
	testenv.WaitCommitted(t, ctx, admin, fcfg.Group, fcfg.EnrichedTopic)
	testenv.WaitCommitted(t, ctx, admin, fcfg.Group, fcfg.LoopTopic())
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

// outageSampler watches the sink every 100 ms while its Redis is away (see
// TestFeaturesRedisOutage) and reports what it saw when stopped.
type outageSampler struct {
	p                   *features.Processor
	stopc, done         chan struct{}
	queueSize           int64
	written0            int64
	liveBase, liveBound uint64
	heapBound           uint64

	samples    int
	maxPending int64
	maxHeap    uint64
	committed  map[string]map[int32]int64 // highest committed offset seen, by topic and partition
	violations []string
}

func heapInuse(gc bool) uint64 {
	if gc {
		runtime.GC()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// startOutageSampler starts sampling right after Redis went away and before any traffic: nothing
// the sink will read can be acknowledged by Redis until it is back, so it may commit nothing.
// The undecodable record bad (nil until produced) needs no Redis write, but it sits behind
// records that do, so it may not be committed either (only if it were first in its partition).
func startOutageSampler(ctx context.Context, adm *kadm.Client, p *features.Processor, fcfg features.Config, queueSize int, bad func() *kgo.Record) *outageSampler {
	s := &outageSampler{p: p, stopc: make(chan struct{}), done: make(chan struct{}), queueSize: int64(queueSize),
		written0: p.RedisWritten(), committed: map[string]map[int32]int64{}}
	// The heap bound, as in the ClickHouse sink's outage test: the sink holds at most PendingCap
	// jobs (a record's or delta's Redis ops: a hash of up to 17 small fields, well under 16 KiB
	// each), and the rest of the process (ingest, loadgen's producer, the test's consumers) gets
	// 96 MiB; between GCs the heap in use may reach twice the live heap.
	s.liveBase = heapInuse(true)
	s.liveBound = s.liveBase + uint64(p.PendingCap())*16<<10 + 96<<20
	s.heapBound = 2 * s.liveBound
	allowed := func(topic string, partition int32) int64 {
		if b := bad(); b != nil && topic == fcfg.EnrichedTopic && partition == b.Partition && b.Offset == 0 {
			return 1
		}
		return 0
	}
	go func() {
		defer close(s.done)
		start := time.Now()
		for {
			select {
			case <-s.stopc:
				return
			case <-time.After(100 * time.Millisecond):
			}
			at := time.Since(start).Round(time.Millisecond)
			s.samples++
			pending, h := p.Pending(), heapInuse(false)
			s.maxPending, s.maxHeap = max(s.maxPending, pending), max(s.maxHeap, h)
			if pending > p.PendingCap() {
				s.violations = append(s.violations, fmt.Sprintf("%v: %d records pending, cap %d", at, pending, p.PendingCap()))
			}
			if h > s.heapBound {
				s.violations = append(s.violations, fmt.Sprintf("%v: heap in use %.1f MiB, bound %.1f MiB", at, float64(h)/(1<<20), float64(s.heapBound)/(1<<20)))
			}
			if w := p.RedisWritten(); w != s.written0 {
				s.violations = append(s.violations, fmt.Sprintf("%v: Redis acknowledged %d ops while unreachable", at, w-s.written0))
			}
			offs, err := adm.FetchOffsets(ctx, fcfg.Group)
			if err != nil {
				if ctx.Err() == nil {
					s.violations = append(s.violations, fmt.Sprintf("%v: fetch committed offsets: %v", at, err))
				}
				continue
			}
			offs.Each(func(o kadm.OffsetResponse) {
				if o.Topic != fcfg.EnrichedTopic && o.Topic != fcfg.LoopTopic() {
					return
				}
				if s.committed[o.Topic] == nil {
					s.committed[o.Topic] = map[int32]int64{}
				}
				s.committed[o.Topic][o.Partition] = max(s.committed[o.Topic][o.Partition], o.At)
				if o.At > allowed(o.Topic, o.Partition) {
					s.violations = append(s.violations, fmt.Sprintf("%v: %s/%d committed at %d while Redis acknowledged nothing", at, o.Topic, o.Partition, o.At))
				}
			})
		}
	}()
	return s
}

// stop ends the sampling (Redis still away) and fails t on anything it saw.
func (s *outageSampler) stop(t *testing.T) {
	t.Helper()
	close(s.stopc)
	<-s.done
	liveEnd := heapInuse(true)
	t.Logf("during the outage (%d samples): at most %d records pending (cap %d, queue %d); heap in use peaked at %.1f MiB (bound %.1f MiB); "+
		"live heap %.1f MiB before, %.1f MiB at the end (bound %.1f MiB); Redis acknowledged %d ops; committed %v",
		s.samples, s.maxPending, s.p.PendingCap(), s.queueSize, float64(s.maxHeap)/(1<<20), float64(s.heapBound)/(1<<20),
		float64(s.liveBase)/(1<<20), float64(liveEnd)/(1<<20), float64(s.liveBound)/(1<<20), s.p.RedisWritten()-s.written0, s.committed)
	if len(s.violations) > 0 {
		t.Fatalf("%d violations during the outage, e.g. %v", len(s.violations), s.violations[:min(5, len(s.violations))])
	}
	if liveEnd > s.liveBound {
		t.Fatalf("live heap at the end of the outage %.1f MiB, bound %.1f MiB", float64(liveEnd)/(1<<20), float64(s.liveBound)/(1<<20))
	}
	if s.maxPending < s.queueSize {
		t.Fatalf("at most %d records pending: the outage's traffic never filled the writer's queue of %d, so the cap was not tested", s.maxPending, s.queueSize)
	}
}
