package features

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/tester"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/dlq"
	"github.com/backflowhq/backflow/internal/feast"
)

// memStore is the Store side of a unit test: it keeps the ops it is given, reports each
// submission written at once, and builds each op's row on a goroutine of its own, as the Redis
// writer does later, while the processor goes on (the race detector sees what is not guarded).
type memStore struct {
	mu   sync.Mutex
	keys map[string]int // ops per Redis key
	jobs int
	last map[string]feast.Op // the newest op per Redis key
	wg   sync.WaitGroup
}

func (m *memStore) Run(ctx context.Context) error { <-ctx.Done(); return nil }
func (m *memStore) Submit(_ context.Context, ops []feast.Op, done func(error)) error {
	m.mu.Lock()
	m.jobs++
	for _, op := range ops {
		m.keys[op.Key]++
		m.last[op.Key] = op
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			op.Row()
		}()
	}
	m.mu.Unlock()
	done(nil)
	return nil
}
func (m *memStore) Pending() int64   { return 0 }
func (m *memStore) Cap() int64       { return 1 }
func (m *memStore) Retries() int64   { return 0 }
func (m *memStore) Written() int64   { return 0 }
func (m *memStore) Coalesced() int64 { return 0 }

// deadLetters keeps the records written to the DLQ.
type deadLetters struct {
	mu      sync.Mutex
	origins []dlq.Origin
}

func (d *deadLetters) Write(_ context.Context, o dlq.Origin, _ error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.origins = append(d.origins, o)
	return nil
}

type featHarness struct {
	t     *testing.T
	tt    *tester.Tester
	p     *Processor
	store *memStore
	dead  *deadLetters
	enc   *avro.Encoder[avro.EnrichedRecord]
	table goka.Table
	cfg   Config
}

// newFeatHarness runs the feature processor on goka's tester, its table's storage wrapped as
// Run wraps it, the folder sending each record's deltas at once (FoldRecords 1), so every
// Consume returns after the record and the deltas it forwarded were applied.
func newFeatHarness(t *testing.T) *featHarness {
	t.Helper()
	fake := srfake.New()
	t.Cleanup(fake.Close)
	h := &featHarness{t: t, store: &memStore{keys: map[string]int{}, last: map[string]feast.Op{}}, dead: &deadLetters{}, cfg: Config{FoldRecords: 1}.withDefaults()}
	ctx, cancel := context.WithCancel(context.Background())
	reg, err := avro.NewRegistryClient(avro.RegistryConn{URL: fake.URL()})
	if err == nil {
		h.p, err = NewProcessor(ctx, h.cfg, reg, h.dead, h.store, nil)
	}
	if err == nil {
		h.enc, err = avro.NewEncoder[avro.EnrichedRecord](reg, avro.EnrichedSchema, avro.TopicName.Subject(h.cfg.EnrichedTopic, avro.EnrichedSchema))
	}
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	h.tt = tester.New(t)
	prod, err := h.tt.ProducerBuilder()(nil, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	h.p.fold = newFolder(prod, h.cfg.LoopTopic(), time.Hour, 1)
	h.table = goka.GroupTable(goka.Group(h.cfg.Group))
	proc, err := goka.NewProcessor(nil, h.p.Graph(), goka.WithTester(h.tt), goka.WithStorageBuilder(h.p.StorageBuilder(h.tt.StorageBuilder())))
	if err != nil {
		t.Fatal(err)
	}
	var running sync.WaitGroup
	running.Go(func() { proc.Run(ctx) })
	t.Cleanup(func() { cancel(); running.Wait() })
	return h
}

var evt = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func (h *featHarness) gateway(req, phase, tenant, user, model string) {
	h.t.Helper()
	v, err := h.enc.Encode(context.Background(), avro.EnrichedRecord{RequestID: req, SourceTopic: "gateway-log",
		Gateway: &avro.GatewayLog{RequestID: req, Phase: phase, EventTime: evt, TenantID: tenant, UserID: user, Model: model,
			StatusCode: 200, LatencyMs: 120, PromptTokens: 10, CompletionTokens: 5},
		Moderation: avro.Moderation{Status: avro.ModerationChecked, Verdict: avro.VerdictAllow}})
	if err != nil {
		h.t.Fatal(err)
	}
	h.tt.Consume(h.cfg.EnrichedTopic, req, v)
}

func (h *featHarness) entry(key string) *Entry {
	h.t.Helper()
	e, _ := h.tt.TableValue(h.table, key).(*Entry)
	return e
}

// TestConsumeCountsARequestOnceThroughItsDeltas: a request's REQUEST and RESPONSE records go
// to its request entry and Redis row; the RESPONSE forwards one delta each to its tenant, user
// and model, applied through the loopback (consumeDelta) and written to their rows.
func TestConsumeCountsARequestOnceThroughItsDeltas(t *testing.T) {
	h := newFeatHarness(t)
	h.gateway("r1", avro.PhaseRequest, "t1", "u1", "m1")
	if e := h.entry("r1"); e == nil || e.Request == nil || e.Request.Tenant != "t1" || e.Request.Counted != nil {
		t.Fatalf("after the REQUEST: entry %+v", e)
	}
	if e := h.entry(TenantKeyPrefix + "t1"); e != nil {
		t.Fatalf("a REQUEST alone counted the tenant: %+v", e.Tenant)
	}
	h.gateway("r1", avro.PhaseResponse, "t1", "u1", "m1")
	tn, us, md := h.entry(TenantKeyPrefix+"t1"), h.entry(UserKey("t1", "u1")), h.entry(ModelKeyPrefix+"m1")
	if tn == nil || tn.Tenant.RequestCount != 1 || tn.Tenant.Tokens != 15 {
		t.Fatalf("tenant: %+v", tn)
	}
	if us == nil || us.User.RequestCount != 1 {
		t.Fatalf("user: %+v", us)
	}
	if md == nil || md.Model.RequestCount != 1 || md.Model.LatencySumMs != 120 {
		t.Fatalf("model: %+v", md)
	}
	// A second RESPONSE record of the request (a duplicate re-emitted by ingest) counts nothing.
	h.gateway("r1", avro.PhaseResponse, "t1", "u1", "m1")
	if n := h.entry(TenantKeyPrefix + "t1").Tenant.RequestCount; n != 1 {
		t.Fatalf("the request counted %d times", n)
	}
	if got := h.p.Stats.Records.Load(); got != 3 {
		t.Fatalf("%d records applied, want 3", got)
	}
	if got := h.p.Stats.Deltas.Load(); got != 3 {
		t.Fatalf("%d deltas applied, want 3 (tenant, user, model once)", got)
	}
	h.store.wg.Wait()
	h.store.mu.Lock()
	defer h.store.mu.Unlock()
	reqKey := RequestOp(h.cfg.Project, "r1", &RequestState{}, 0).Key
	tenantKey := TenantOp(h.cfg.Project, "t1", &TenantState{}).Key
	if h.store.keys[reqKey] != 3 || h.store.keys[tenantKey] != 1 {
		t.Fatalf("Redis writes: request row %d (want 3), tenant row %d (want 1)", h.store.keys[reqKey], h.store.keys[tenantKey])
	}
}

// TestEntriesDecodedOnce: an aggregate entry this processor wrote is taken from memory on its
// next delta batch, not decoded again; an entry whose stored bytes changed behind its back
// (here the tester's SetTableValue, as a restore after a rebalance would) is decoded afresh and
// updated on top of what is stored.
func TestEntriesDecodedOnce(t *testing.T) {
	h := newFeatHarness(t)
	for _, r := range []string{"r1", "r2", "r3", "r4"} {
		h.gateway(r, avro.PhaseRequest, "t1", "u1", "m1")
		h.gateway(r, avro.PhaseResponse, "t1", "u1", "m1")
	}
	if n := h.entry(TenantKeyPrefix + "t1").Tenant.RequestCount; n != 4 {
		t.Fatalf("tenant counted %d requests, want 4", n)
	}
	if n := h.p.ents.decoded.Load(); n != 0 {
		t.Fatalf("%d aggregate entries decoded: every one was written by the processor and should come from memory", n)
	}
	stored := h.entry(TenantKeyPrefix + "t1")
	stored.Tenant.RequestCount = 100
	h.tt.SetTableValue(h.table, TenantKeyPrefix+"t1", stored)
	h.gateway("r5", avro.PhaseRequest, "t1", "u1", "m1")
	h.gateway("r5", avro.PhaseResponse, "t1", "u1", "m1")
	if n := h.entry(TenantKeyPrefix + "t1").Tenant.RequestCount; n != 101 {
		t.Fatalf("tenant counted %d, want 101: the changed entry was not read from storage", n)
	}
	if n := h.p.ents.decoded.Load(); n != 1 {
		t.Fatalf("%d entries decoded, want 1 (the tenant entry changed behind the processor)", n)
	}
	// The entries stay in memory and change in place while the writer builds rows from them:
	// the newest row of the tenant is its final state's.
	h.store.wg.Wait()
	tenantKey := TenantOp(h.cfg.Project, "t1", &TenantState{}).Key
	h.store.mu.Lock()
	got := h.store.last[tenantKey].Row()
	h.store.mu.Unlock()
	if want := TenantOp(h.cfg.Project, "t1", h.entry(TenantKeyPrefix+"t1").Tenant).Row(); !reflect.DeepEqual(got, want) {
		t.Fatalf("the tenant's last row is not its final state's")
	}
}

// TestUndecodableRecordDeadLettered: an enriched record that does not decode goes to the DLQ
// with its origin, touches no entry, and the records after it are applied.
func TestUndecodableRecordDeadLettered(t *testing.T) {
	h := newFeatHarness(t)
	h.tt.Consume(h.cfg.EnrichedTopic, "bad", []byte{9, 0, 0, 0, 1, 2}) // not Confluent-framed
	h.gateway("r1", avro.PhaseRequest, "t1", "", "m1")
	h.dead.mu.Lock()
	defer h.dead.mu.Unlock()
	if len(h.dead.origins) != 1 || string(h.dead.origins[0].Key) != "bad" || h.dead.origins[0].Topic != h.cfg.EnrichedTopic {
		t.Fatalf("DLQ: %+v", h.dead.origins)
	}
	if h.entry("bad") != nil || h.entry("r1") == nil {
		t.Fatalf("entries: bad %+v, r1 %+v", h.entry("bad"), h.entry("r1"))
	}
	if h.p.Stats.Undecoded.Load() != 1 || h.p.Stats.Records.Load() != 1 {
		t.Fatalf("stats: undecoded %d, records %d", h.p.Stats.Undecoded.Load(), h.p.Stats.Records.Load())
	}
}
