package ingest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/tester"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/dlq"
	"github.com/backflowhq/backflow/internal/moderation"
	"github.com/backflowhq/backflow/internal/ops"
	"github.com/backflowhq/backflow/test/testenv"
)

// capture is an in-process Producer: it acknowledges every record at once and keeps them.
type capture struct {
	mu   sync.Mutex
	recs []*kgo.Record
}

func (c *capture) Produce(_ context.Context, r *kgo.Record, promise func(*kgo.Record, error)) {
	c.mu.Lock()
	c.recs = append(c.recs, r)
	c.mu.Unlock()
	promise(r, nil)
}

func (c *capture) topic(t string) []*kgo.Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*kgo.Record
	for _, r := range c.recs {
		if r.Topic == t {
			out = append(out, r)
		}
	}
	return out
}

// deadBox is an in-process DeadLetters.
type deadBox struct {
	mu      sync.Mutex
	entries []dlq.Entry
	refuse  int           // the next writes to refuse, as a broker does with a record it will not take
	gate    chan struct{} // when set, each Write waits for a value on it
}

func (d *deadBox) Write(ctx context.Context, o dlq.Origin, err error) error {
	if d.gate != nil {
		select {
		case <-d.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.refuse > 0 {
		d.refuse--
		return fmt.Errorf("dlq: write 1 record(s): %w", kerr.MessageTooLarge)
	}
	d.entries = append(d.entries, dlq.NewEntry(o, err))
	return nil
}

func (d *deadBox) list() []dlq.Entry {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]dlq.Entry(nil), d.entries...)
}

// script is an in-process Checker whose behaviour a test sets: it answers like the service
// (a hit for "bluefin"), or fails with err, or drops the last item of its reply.
type script struct {
	mu      sync.Mutex
	err     error
	drop    func(items []moderation.Item) bool
	batches [][]moderation.Item
}

func (s *script) Check(_ context.Context, items []moderation.Item) ([]moderation.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches = append(s.batches, items)
	if s.err != nil {
		return nil, s.err
	}
	out := make([]moderation.Result, 0, len(items))
	for _, it := range items {
		r := moderation.Result{ID: it.ID, Verdict: "ALLOW", Categories: []string{}}
		if i := strings.Index(it.Text, "bluefin"); i >= 0 {
			r.Verdict, r.RiskScore, r.Categories = "REVIEW", 0.5, []string{"demo-fraud"}
			r.Hits = []moderation.Hit{{Word: "bluefin", Category: "demo-fraud", Weight: 0.5, Start: int32(i), End: int32(i + 7)}}
		}
		out = append(out, r)
	}
	if s.drop != nil && s.drop(items) {
		return nil, &moderation.MismatchError{Missing: []string{items[len(items)-1].ID}}
	}
	return out, nil
}

func (s *script) set(err error) {
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
}

func (s *script) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.batches)
}

type harness struct {
	t     *testing.T
	tt    *tester.Tester
	p     *Processor
	out   *capture
	dead  *deadBox
	check *script
	infV2 *avro.Encoder[avro.InferenceResult]
	gw    *avro.Encoder[avro.GatewayLog]
	now   time.Time
	reg   avro.Registry
	fake  *srfake.Registry
	fails chan error           // what the processor passed to Deps.Fail
	prom  *prometheus.Registry // what the processor's metrics are registered on
}

// newHarness runs a processor on goka's tester. wrap, when given, wraps the tester's producer
// builder (to hold or fail goka's own writes).
func newHarness(t *testing.T, cfg Config, epoch int32, wrap ...func(goka.ProducerBuilder) goka.ProducerBuilder) *harness {
	t.Helper()
	reg, fake := testenv.FakeRegistry(t)
	h := &harness{t: t, out: &capture{}, dead: &deadBox{}, check: &script{}, now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC), reg: reg,
		fake: fake, fails: make(chan error, 16), prom: prometheus.NewRegistry()}
	if cfg.BackoffMin == 0 {
		cfg.BackoffMin, cfg.BackoffMax = time.Millisecond, 5*time.Millisecond
	}
	ctx, cancel := context.WithCancel(context.Background())
	var err error
	h.p, err = NewProcessor(ctx, cfg, 1, epoch, Deps{Registry: reg, Producer: h.out, DeadLetters: h.dead, SensitiveWords: h.check,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Fail: func(err error) { h.fails <- err },
		Metrics: NewMetrics(ops.NewMetrics(h.prom).Stage("ingest"), cfg.withDefaults().Group)})
	if err != nil {
		t.Fatal(err)
	}
	h.p.now = func() time.Time { return h.now }
	h.p.infDec, _ = avro.NewDecoder[avro.InferenceResult](reg, avro.InferenceResultSchema, avro.DecoderConfig{Now: func() time.Time { return h.now }})
	h.p.gwDec, _ = avro.NewDecoder[avro.GatewayLog](reg, avro.GatewayLogSchema, avro.DecoderConfig{Now: func() time.Time { return h.now }})
	h.infV2, _ = avro.NewEncoder[avro.InferenceResult](reg, avro.InferenceResultV2, "model-inference-result-value")
	h.gw, _ = avro.NewEncoder[avro.GatewayLog](reg, avro.GatewayLogSchema, "gateway-log-value")

	h.tt = tester.New(t)
	pb := h.tt.ProducerBuilder()
	for _, w := range wrap {
		pb = w(pb)
	}
	proc, err := goka.NewProcessor(nil, h.p.Graph(), append([]goka.ProcessorOption{goka.WithTester(h.tt)},
		append(GokaOptions(), h.p.ProducerOption(pb))...)...)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		proc.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		h.p.Close()
		<-done
	})
	return h
}

// metric is the value of the metric family name whose labels include want (nil: the only
// series), or -1 when there is none.
func (h *harness) metric(name string, want map[string]string) float64 {
	h.t.Helper()
	mfs, err := h.prom.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue series
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return -1
}

func (h *harness) inference(id, text string) []byte {
	b, err := h.infV2.Encode(context.Background(), avro.InferenceResult{RequestID: id, Model: "m", ModelVersion: "v1",
		EventTime: h.now.Add(-time.Second), Labels: []avro.Label{}, OutputText: text, Status: "OK"})
	if err != nil {
		h.t.Fatal(err)
	}
	return b
}

func (h *harness) gateway(id, phase, text string) []byte {
	b, err := h.gw.Encode(context.Background(), avro.GatewayLog{RequestID: id, Phase: phase, EventTime: h.now.Add(-time.Second),
		TenantID: "t", UserID: "u", Route: "/r", Model: "m", PromptText: text})
	if err != nil {
		h.t.Fatal(err)
	}
	return b
}

// waitFor polls cond for up to 5 s.
func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s (stats %+v, in flight %d)", what, h.p.Stats.Snapshot(), h.p.InFlight())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (h *harness) enriched() []avro.EnrichedRecord {
	var out []avro.EnrichedRecord
	dec, _ := avro.NewDecoder[avro.EnrichedRecord](h.reg, avro.EnrichedSchema, avro.DecoderConfig{})
	for _, r := range h.out.topic(h.p.cfg.EnrichedTopic) {
		e, _, err := dec.Decode(context.Background(), r.Value)
		if err != nil {
			h.t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

const infTopic = "model-inference-result"

func TestDuplicateDroppedOtherSlotsKept(t *testing.T) {
	h := newHarness(t, Config{BatchLinger: time.Millisecond}, 0)
	rec := h.inference("r1", "plain text")
	h.tt.Consume(infTopic, "r1", rec)
	h.tt.Consume(infTopic, "r1", rec) // same bytes, another offset: a duplicate
	h.tt.Consume("gateway-log", "r1", h.gateway("r1", avro.PhaseRequest, "hi"))
	h.tt.Consume("gateway-log", "r1", h.gateway("r1", avro.PhaseResponse, ""))
	h.waitFor("3 emitted", func() bool { return h.p.Stats.Emitted.Load() == 3 && h.p.InFlight() == 0 })
	st := h.p.Stats.Snapshot()
	if st.Duplicates != 1 || st.Claimed != 3 || len(h.dead.list()) != 0 {
		t.Fatalf("stats %+v, dlq %d", st, len(h.dead.list()))
	}
	got := h.enriched()
	if got[0].SourceTopic != infTopic || got[0].SourceOffset != 0 || got[0].Inference == nil || got[0].Moderation.Status != "CHECKED" {
		t.Fatalf("first enriched record %+v", got[0])
	}
	if state := h.tt.TableValue(goka.GroupTable(goka.Group(h.p.cfg.Group)), "r1").(*State); len(state.Slots) != 3 {
		t.Fatalf("table holds %d slots, want 3: %+v", len(state.Slots), state.Slots)
	}
	// The metrics agree: 4 in, 3 out, 1 duplicate, no DLQ; two moderation batches (the
	// RESPONSE has no text), each one call.
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{ops.MetricRecordsIn, map[string]string{"stage": "ingest"}, 4},
		{ops.MetricRecordsOut, map[string]string{"stage": "ingest"}, 3},
		{ops.MetricRecordsDLQ, nil, -1},
		{MetricDuplicates, map[string]string{"group": "backflow-ingest"}, 1},
		{ops.MetricBatchRecords, map[string]string{"stage": "ingest"}, 2},
		{MetricModerationLatency, nil, 2},
		{MetricBreakerState, nil, BreakerClosed},
	} {
		if got := h.metric(c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}

// TestRedeliveryIsProcessedAgain: the record that claimed a key, delivered again (same topic,
// partition, offset), is emitted again; it is not a duplicate (invariant 2).
func TestRedeliveryIsProcessedAgain(t *testing.T) {
	h := newHarness(t, Config{BatchLinger: time.Millisecond}, 0)
	table := goka.GroupTable(goka.Group(h.p.cfg.Group))
	// The claim says offset 0 of the topic claimed r1: the next consumed record is offset 0.
	h.tt.SetTableValue(table, "r1", &State{Slots: map[string]Claim{infTopic: {Origin: Origin{infTopic, 0, 0}, Seen: h.now.UnixMilli()}}})
	h.tt.Consume(infTopic, "r1", h.inference("r1", "text"))
	h.waitFor("emitted", func() bool { return h.p.Stats.Emitted.Load() == 1 })
	if st := h.p.Stats.Snapshot(); st.Redelivered != 1 || st.Duplicates != 0 {
		t.Fatalf("stats %+v, want one redelivery", st)
	}
	// A different record claiming the same slot is a duplicate.
	h.tt.Consume(infTopic, "r1", h.inference("r1", "text"))
	h.waitFor("duplicate", func() bool { return h.p.Stats.Duplicates.Load() == 1 })
}

// TestRefusedEnrichedSchemaStopsTheStage (regression): when the registry refused the
// enriched schema, ingest logged the error and returned without releasing the record, so its
// partition never committed again while the stage looked healthy. Now the stage is stopped
// through Deps.Fail, and the record goes neither to the enriched topic nor to the DLQ.
func TestRefusedEnrichedSchemaStopsTheStage(t *testing.T) {
	h := newHarness(t, Config{BatchLinger: time.Millisecond}, 0)
	subject := avro.TopicName.Subject(h.p.cfg.EnrichedTopic, avro.EnrichedSchema)
	h.fake.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/subjects/"+subject) {
			w.WriteHeader(http.StatusUnprocessableEntity)
			w.Write([]byte(`{"error_code":42201,"message":"Invalid schema"}`))
			return true
		}
		return false
	})
	// The tester's Consume returns once the record is committed, which must not happen here.
	go h.tt.Consume(infTopic, "r1", h.inference("r1", "text"))
	select {
	case err := <-h.fails:
		if !strings.Contains(err.Error(), "encode enriched record") {
			t.Fatalf("stopped with %v, want an encode error", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the stage was not stopped (stats %+v)", h.p.Stats.Snapshot())
	}
	if st := h.p.Stats.Snapshot(); st.Emitted != 0 || st.DeadLettered != 0 || h.p.InFlight() != 1 {
		t.Fatalf("stats %+v, in flight %d: want nothing emitted or dead-lettered and the record still in flight", st, h.p.InFlight())
	}
}

// TestOlderEpochDoesNotCount: after a replay bumps the epoch, a claim from the older epoch
// does not make a record "already seen".
func TestOlderEpochDoesNotCount(t *testing.T) {
	h := newHarness(t, Config{BatchLinger: time.Millisecond}, 2)
	table := goka.GroupTable(goka.Group(h.p.cfg.Group))
	h.tt.SetTableValue(table, "r1", &State{Slots: map[string]Claim{infTopic: {Origin: Origin{infTopic, 0, 99}, Epoch: 1, Seen: h.now.UnixMilli()}}})
	h.tt.Consume(infTopic, "r1", h.inference("r1", "text"))
	h.waitFor("emitted", func() bool { return h.p.Stats.Emitted.Load() == 1 })
	if e := h.enriched()[0]; e.Epoch != 2 {
		t.Fatalf("enriched epoch %d, want 2", e.Epoch)
	}
	if c := h.tt.TableValue(table, "r1").(*State).Slots[infTopic]; c.Epoch != 2 || c.Origin.Offset != 0 {
		t.Fatalf("claim %+v, want epoch 2 at offset 0", c)
	}
}

func TestPoisonToDLQ(t *testing.T) {
	h := newHarness(t, Config{BatchLinger: time.Millisecond}, 0)
	good := h.inference("r1", "x")
	h.tt.Consume(infTopic, "p1", append([]byte{7}, good[1:]...))
	h.tt.Consume(infTopic, "p2", nil) // a tombstone is not a record
	h.tt.Consume(infTopic, "p3", h.inference("", "x"))
	h.tt.Consume(infTopic, "r1", good)
	h.waitFor("done", func() bool { return h.p.Stats.Emitted.Load() == 1 && h.p.InFlight() == 0 })
	var classes []string
	for _, e := range h.dead.list() {
		classes = append(classes, e.Class)
	}
	if want := []string{"not_framed", "not_framed", "invalid"}; fmt.Sprint(classes) != fmt.Sprint(want) {
		t.Fatalf("DLQ classes %v, want %v", classes, want)
	}
	if nf, inv, in := h.metric(ops.MetricRecordsDLQ, map[string]string{"class": "not_framed"}), h.metric(ops.MetricRecordsDLQ, map[string]string{"class": "invalid"}),
		h.metric(ops.MetricRecordsIn, nil); nf != 2 || inv != 1 || in != 4 {
		t.Fatalf("metrics: dlq not_framed %v, invalid %v, in %v; want 2, 1, 4", nf, inv, in)
	}
}

// TestRefusedDLQWriteIsCountedAndRetried (reliability.md #18): a DLQ the broker refuses to
// write to held the source offset back, and logged, but /metrics showed nothing, so an alert
// could not see a stage stuck behind its DLQ. Each refused write must count in
// backflow_dlq_write_errors_total, and the record must still reach the DLQ once writes work.
func TestRefusedDLQWriteIsCountedAndRetried(t *testing.T) {
	h := newHarness(t, Config{BatchLinger: time.Millisecond}, 0)
	h.dead.refuse = 3
	good := h.inference("r1", "x")
	h.tt.Consume(infTopic, "p1", append([]byte{7}, good[1:]...))
	h.waitFor("dead-lettered", func() bool { return len(h.dead.list()) == 1 && h.p.InFlight() == 0 })
	if n := h.metric(ops.MetricDLQWriteErrors, map[string]string{"stage": "ingest"}); n != 3 {
		t.Fatalf("%s = %v, want 3 (one per refused write)", ops.MetricDLQWriteErrors, n)
	}
	if n := h.metric(ops.MetricRecordsDLQ, map[string]string{"class": "not_framed"}); n != 1 {
		t.Fatalf("dead-lettered %v, want 1", n)
	}
}

// TestDeadLettersOffThePartition: handing bad records to the DLQ returns at once while their
// writes wait (the partition goes on), their commits wait for the writes, and the writes land
// in the order the records came.
func TestDeadLettersOffThePartition(t *testing.T) {
	h := newHarness(t, Config{}, 0)
	h.dead.gate = make(chan struct{})
	q := h.p.queues.get("direct", 0)
	var committed atomic.Int32
	for i := range 3 {
		pc, err := q.Add(context.Background(), func(error) { committed.Add(1) })
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			h.p.deadLetterAsync(0, dlq.Origin{Topic: infTopic, Offset: int64(i), Key: []byte("p")}, avro.ErrNotFramed, pc)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("record %d: handing it to the DLQ waited for the write", i)
		}
	}
	time.Sleep(20 * time.Millisecond)
	if n, c := h.p.InFlight(), committed.Load(); n != 3 || c != 0 || len(h.dead.list()) != 0 {
		t.Fatalf("before the writes: %d in flight, %d committed, %d written; want 3, 0, 0", n, c, len(h.dead.list()))
	}
	for range 3 {
		h.dead.gate <- struct{}{}
	}
	h.waitFor("the writes", func() bool { return h.p.InFlight() == 0 && committed.Load() == 3 })
	var offsets []int64
	for _, e := range h.dead.list() {
		offsets = append(offsets, e.Origin.Offset)
	}
	if fmt.Sprint(offsets) != "[0 1 2]" || h.p.Stats.DeadLettered.Load() != 3 {
		t.Fatalf("DLQ offsets %v, dead-lettered %d; want [0 1 2], 3", offsets, h.p.Stats.DeadLettered.Load())
	}
}

// submit hands a text straight to partition 0's batcher, as process does after dedupe, with a
// commit that is recorded (the goka tester waits for every commit inside Consume, so records
// that must stay in flight across calls are driven without it).
func (h *harness) submit(id, text string) {
	h.t.Helper()
	q := h.p.queues.get("direct", 0)
	pc, err := q.Add(context.Background(), func(error) {})
	if err != nil {
		h.t.Fatal(err)
	}
	inf := avro.InferenceResult{RequestID: id, Labels: []avro.Label{}, OutputText: text, Status: "OK", EventTime: h.now}
	j := &job{origin: dlq.Origin{Topic: infTopic, Offset: int64(h.p.Stats.Read.Add(1)), Key: []byte(id)}, pc: pc, text: text,
		enriched: avro.EnrichedRecord{RequestID: id, SourceTopic: infTopic, Inference: &inf}}
	h.p.batcherFor(0).add(j)
}

// TestBatchBoundaries: texts go out in batches of BatchSize; a partial batch waits for
// BatchLinger, then goes out alone.
func TestBatchBoundaries(t *testing.T) {
	h := newHarness(t, Config{BatchSize: 3, BatchLinger: 200 * time.Millisecond}, 0)
	for i := 0; i < 7; i++ {
		h.submit(fmt.Sprint("r", i), fmt.Sprint("text ", i)) // distinct: identical texts are sent once
	}
	h.waitFor("two full batches", func() bool { return h.p.Stats.Emitted.Load() >= 6 })
	if n := h.check.calls(); n != 2 || h.p.Stats.Emitted.Load() != 6 {
		t.Fatalf("%d moderation calls and %d emitted before the linger, want 2 and 6", n, h.p.Stats.Emitted.Load())
	}
	h.waitFor("linger flush", func() bool { return h.p.Stats.Emitted.Load() == 7 })
	var sizes []int
	for _, b := range h.check.batches {
		sizes = append(sizes, len(b))
	}
	if fmt.Sprint(sizes) != "[3 3 1]" || h.p.InFlight() != 0 {
		t.Fatalf("batch sizes %v, in flight %d; want [3 3 1], 0", sizes, h.p.InFlight())
	}
}

// retryableErr is what an unreachable service looks like to the client.
var retryableErr = &moderation.StatusError{StatusCode: 503}

func TestPolicyBlockWaitsThenDelivers(t *testing.T) {
	h := newHarness(t, Config{BatchLinger: time.Millisecond, BreakerFailures: 1000}, 0)
	h.check.set(retryableErr)
	h.submit("r1", "bluefin ahead")
	h.waitFor("retries", func() bool { return h.check.calls() >= 5 })
	if h.p.Stats.Emitted.Load() != 0 || len(h.dead.list()) != 0 || h.p.InFlight() != 1 {
		t.Fatalf("during the outage: stats %+v, in flight %d, dlq %d", h.p.Stats.Snapshot(), h.p.InFlight(), len(h.dead.list()))
	}
	h.check.set(nil)
	h.waitFor("delivered after recovery", func() bool { return h.p.Stats.Emitted.Load() == 1 && h.p.InFlight() == 0 })
	if m := h.enriched()[0].Moderation; m.Status != "CHECKED" || m.Verdict != "REVIEW" || len(m.Hits) != 1 || m.Hits[0].Start != 0 {
		t.Fatalf("moderation %+v", m)
	}
}

func TestPolicyPassFlagsUnavailableAndBreakerOpens(t *testing.T) {
	h := newHarness(t, Config{BatchLinger: time.Millisecond, Policy: PolicyPass, MaxAttempts: 3, BreakerFailures: 2, BreakerOpen: time.Hour}, 0)
	h.check.set(retryableErr)
	for i := 0; i < 3; i++ {
		h.submit(fmt.Sprint("r", i), "text")
		h.waitFor("passed", func() bool { return h.p.Stats.Emitted.Load() == int64(i+1) })
	}
	for _, e := range h.enriched() {
		if e.Moderation.Status != "UNAVAILABLE" {
			t.Fatalf("moderation %+v, want UNAVAILABLE", e.Moderation)
		}
	}
	// Two failures opened the breaker: later batches did not reach the service.
	if n := h.check.calls(); n != 2 {
		t.Fatalf("%d calls reached the service, want 2 before the breaker opened", n)
	}
	if st := h.p.Stats.Snapshot(); st.Unmoderated != 3 || len(h.dead.list()) != 0 {
		t.Fatalf("stats %+v, dlq %d", st, len(h.dead.list()))
	}
	// The dashboards' gauge says open (2); two calls failed as unavailable, the third never left.
	if st, unavailable, open := h.metric(MetricBreakerState, map[string]string{"group": "backflow-ingest"}),
		h.metric(MetricModerationErrors, map[string]string{"class": "unavailable"}),
		h.metric(MetricModerationErrors, map[string]string{"class": "breaker_open"}); st != BreakerOpen || unavailable != 2 || open < 1 {
		t.Fatalf("breaker state %v (want %d), unavailable errors %v (want 2), breaker_open errors %v (want >= 1)", st, BreakerOpen, unavailable, open)
	}
}

// TestMismatchIsolatesTheAffectedRecord: a reply that keeps missing one item is retried, then
// the batch is checked one by one; only the item whose reply still mismatches goes to the DLQ.
func TestMismatchIsolatesTheAffectedRecord(t *testing.T) {
	h := newHarness(t, Config{BatchSize: 3, BatchLinger: time.Hour, MaxAttempts: 2, BreakerFailures: 1000}, 0)
	h.check.drop = func(items []moderation.Item) bool {
		for _, it := range items {
			if strings.Contains(it.Text, "cursed") {
				return true
			}
		}
		return false
	}
	h.submit("a", "fine")
	h.submit("b", "cursed")
	h.submit("c", "bluefin")
	h.waitFor("settled", func() bool { return h.p.InFlight() == 0 })
	if st := h.p.Stats.Snapshot(); st.Emitted != 2 {
		t.Fatalf("stats %+v, want 2 emitted", st)
	}
	dead := h.dead.list()
	if len(dead) != 1 || dead[0].Class != ClassModerationMismatch || string(dead[0].Origin.Key) != "b" {
		t.Fatalf("DLQ %+v, want only b as %s", dead, ClassModerationMismatch)
	}
	// 2 attempts of the batch, then one call per record.
	if n := h.check.calls(); n != 2+1+2+1 {
		t.Fatalf("%d calls, want 6 (2 batch attempts, a, b twice, c)", n)
	}
}

// TestIdenticalTextsSentOnce: a RESPONSE log and its inference result carry the same text, and
// so may two requests; the batch sends each distinct text once and gives its verdict to every
// record that carries it.
func TestIdenticalTextsSentOnce(t *testing.T) {
	h := newHarness(t, Config{BatchSize: 6, BatchLinger: time.Hour}, 0)
	texts := map[string]string{
		"r1-inf": "bluefin ahead", "r1-resp": "bluefin ahead", // a request's output and its RESPONSE
		"r2-inf": "plain reply", "r2-resp": "plain reply",
		"r3-req": "a prompt",
		"r4-inf": "bluefin ahead", // another request, the same text
	}
	for _, id := range []string{"r1-inf", "r1-resp", "r2-inf", "r3-req", "r2-resp", "r4-inf"} {
		h.submit(id, texts[id])
	}
	h.waitFor("6 emitted", func() bool { return h.p.Stats.Emitted.Load() == 6 && h.p.InFlight() == 0 })
	if n := h.check.calls(); n != 1 {
		t.Fatalf("%d moderation calls, want 1", n)
	}
	var sent []string
	for _, it := range h.check.batches[0] {
		sent = append(sent, it.ID+"="+it.Text)
	}
	if got := strings.Join(sent, ", "); got != "0=bluefin ahead, 1=plain reply, 2=a prompt" {
		t.Fatalf("items sent: %s; want each distinct text once, in first-seen order", got)
	}
	if st := h.p.Stats.Snapshot(); st.ModerationTexts != 6 || st.ModerationItems != 3 {
		t.Fatalf("stats %+v: want 6 texts, 3 items", st)
	}
	got := h.enriched()
	if len(got) != 6 {
		t.Fatalf("%d enriched records, want 6", len(got))
	}
	for _, e := range got {
		m := e.Moderation
		if texts[e.RequestID] == "bluefin ahead" {
			if m.Status != "CHECKED" || m.Verdict != "REVIEW" || len(m.Hits) != 1 || m.Hits[0].Start != 0 || m.Hits[0].End != 7 {
				t.Errorf("%s: moderation %+v, want REVIEW with its hit at 0-7", e.RequestID, m)
			}
			continue
		}
		if m.Status != "CHECKED" || m.Verdict != "ALLOW" || len(m.Hits) != 0 {
			t.Errorf("%s: moderation %+v, want ALLOW without hits", e.RequestID, m)
		}
	}
}

// TestIdenticalBadTextsEachDeadLettered: when the one item of a repeated text cannot be
// moderated, every record that carries it goes to the DLQ, each once; the others are emitted.
func TestIdenticalBadTextsEachDeadLettered(t *testing.T) {
	h := newHarness(t, Config{BatchSize: 3, BatchLinger: time.Hour, MaxAttempts: 2, BreakerFailures: 1000}, 0)
	h.check.drop = func(items []moderation.Item) bool {
		for _, it := range items {
			if strings.Contains(it.Text, "cursed") {
				return true
			}
		}
		return false
	}
	h.submit("a", "fine")
	h.submit("b", "cursed")
	h.submit("c", "cursed")
	h.waitFor("settled", func() bool { return h.p.InFlight() == 0 })
	if st := h.p.Stats.Snapshot(); st.Emitted != 1 || st.DeadLettered != 2 {
		t.Fatalf("stats %+v, want 1 emitted and 2 dead-lettered", st)
	}
	keys := map[string]int{}
	for _, d := range h.dead.list() {
		if d.Class != ClassModerationMismatch {
			t.Fatalf("DLQ entry of class %s, want %s", d.Class, ClassModerationMismatch)
		}
		keys[string(d.Origin.Key)]++
	}
	if len(keys) != 2 || keys["b"] != 1 || keys["c"] != 1 {
		t.Fatalf("DLQ keys %v, want b and c once each", keys)
	}
	// 2 attempts of the 2-item batch, then one by one: "fine" once, "cursed" twice.
	if n := h.check.calls(); n != 2+1+2 {
		t.Fatalf("%d calls, want 5", n)
	}
}

func TestDedupeTexts(t *testing.T) {
	batch := []*job{{text: "x"}, {text: "y"}, {text: "x"}, {text: "z"}, {text: "y"}}
	items, slots := dedupeTexts(batch)
	if len(items) != 3 || items[0] != (moderation.Item{ID: "0", Text: "x"}) || items[1] != (moderation.Item{ID: "1", Text: "y"}) ||
		items[2] != (moderation.Item{ID: "2", Text: "z"}) {
		t.Fatalf("items %+v", items)
	}
	if fmt.Sprint(slots) != "[0 1 0 2 1]" {
		t.Fatalf("slots %v, want [0 1 0 2 1]", slots)
	}
}
