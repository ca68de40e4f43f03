package ingest

import (
	"hash"
	"sync"
	"testing"
	"time"

	"github.com/lovoo/goka"
)

// holdTable is a goka producer builder wrapper that holds every write to one topic: the write
// reaches the inner producer, but its promise finishes only on release (as a changelog write
// the brokers have not acknowledged yet).
type holdTable struct {
	topic string
	mu    sync.Mutex
	held  []func(error)
}

func (h *holdTable) wrap(inner goka.ProducerBuilder) goka.ProducerBuilder {
	return func(brokers []string, clientID string, hasher func() hash.Hash32) (goka.Producer, error) {
		p, err := inner(brokers, clientID, hasher)
		return &holdingProducer{Producer: p, h: h}, err
	}
}

func (h *holdTable) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.held)
}

// release finishes every held write with err.
func (h *holdTable) release(err error) {
	h.mu.Lock()
	held := h.held
	h.held = nil
	h.mu.Unlock()
	for _, f := range held {
		f(err)
	}
}

type holdingProducer struct {
	goka.Producer
	h *holdTable
}

func (p *holdingProducer) EmitWithHeaders(topic, key string, value []byte, headers goka.Headers) *goka.Promise {
	inner := p.Producer.EmitWithHeaders(topic, key, value, headers)
	if topic != p.h.topic {
		return inner
	}
	pr, finish := goka.NewPromiseWithFinisher()
	p.h.mu.Lock()
	p.h.held = append(p.h.held, func(err error) { finish(nil, err) })
	p.h.mu.Unlock()
	return pr
}

// TestEnrichedWaitsForItsClaim (regression): the enriched record went out as soon as it was
// moderated, while goka's write of its dedupe claim could still be unacknowledged. A crash
// then lost the claim but not the record; with the table rebuilt from the changelog another
// copy of the requestId claimed it too, and two records of one requestId were emitted (seen in
// TestIngestSurvivesSIGKILL). Now the record waits for its claim's write, for a claim and for
// a redelivered claimer alike.
func TestEnrichedWaitsForItsClaim(t *testing.T) {
	hold := &holdTable{topic: Config{}.TableTopic()}
	h := newHarness(t, Config{BatchLinger: time.Millisecond}, 0, hold.wrap)
	t.Cleanup(func() { hold.release(nil) }) // before the harness stops goka, which waits for its writes

	// goka's tester returns from Consume once the record is committed: consume in the background.
	consume := func(key string) chan struct{} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			h.tt.Consume(infTopic, key, h.inference(key, "plain text"))
		}()
		return done
	}
	consumed := consume("r1")
	h.waitFor("moderation", func() bool { return h.check.calls() == 1 && hold.count() == 1 })
	time.Sleep(100 * time.Millisecond) // room for a wrong emit to happen
	if n := len(h.enriched()); n != 0 || h.p.InFlight() != 1 {
		t.Fatalf("%d enriched records and %d in flight before the claim was acknowledged, want 0 and 1", n, h.p.InFlight())
	}
	hold.release(nil)
	h.waitFor("emitted", func() bool { return h.p.Stats.Emitted.Load() == 1 && h.p.InFlight() == 0 })
	<-consumed

	// The claimer read again (offset 0 claimed r2): its claim is written again, and the record
	// waits for that write as well.
	table := goka.GroupTable(goka.Group(h.p.cfg.Group))
	h.tt.SetTableValue(table, "r2", &State{Slots: map[string]Claim{infTopic: {Origin: Origin{infTopic, 0, 1}, Seen: h.now.UnixMilli()}}})
	consumed = consume("r2")
	h.waitFor("redelivery moderated", func() bool { return h.check.calls() == 2 && hold.count() == 1 })
	time.Sleep(100 * time.Millisecond)
	if st := h.p.Stats.Snapshot(); st.Redelivered != 1 || st.Emitted != 1 {
		t.Fatalf("stats %+v: want one redelivery, not yet emitted", st)
	}
	hold.release(nil)
	h.waitFor("redelivery emitted", func() bool { return h.p.Stats.Emitted.Load() == 2 && h.p.InFlight() == 0 })
	<-consumed
	if got := h.enriched(); got[1].RequestID != "r2" || got[1].SourceOffset != 1 {
		t.Fatalf("second enriched record %+v", got[1])
	}
	if n := len(h.p.claims.pending); n != 0 {
		t.Fatalf("%d claim promises left behind", n)
	}
}
