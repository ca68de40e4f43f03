package ingest

import (
	"hash"
	"sync"

	"github.com/lovoo/goka"
)

// claims learns when each claim written to the dedupe table is durable, so that an enriched
// record is never produced before the claim it was emitted under.
//
// Why: goka writes a table value (ctx.SetValue) to its changelog asynchronously, and our
// enriched records go out through another producer. Were an enriched record acknowledged while
// its claim was not, a crash would leave the record emitted and the claim lost. Every record
// after the last commit is then read again, from the source partition and the loopback in no
// fixed order, and with the table rebuilt from the changelog a different copy of the same
// requestId could claim it and be emitted as well. Waiting for the claim closes that gap: if an
// enriched record was acknowledged, its claim is in the changelog.
//
// Lifecycle: Option installs a goka producer that wraps the one goka would build; for a table
// write it remembers the write's promise under the key, and take, called right after
// ctx.SetValue in the same callback, hands it to the record. A processor built without Option
// (a bare goka tester) gets nil promises and emits without waiting.
type claims struct {
	table string // the group table's changelog topic

	mu      sync.Mutex
	pending map[string]*goka.Promise
}

func newClaims(table string) *claims {
	return &claims{table: table, pending: map[string]*goka.Promise{}}
}

// Option returns the goka option that installs the watching producer around inner, the
// producer builder goka would otherwise use.
func (c *claims) Option(inner goka.ProducerBuilder) goka.ProcessorOption {
	return goka.WithProducerBuilder(func(brokers []string, clientID string, hasher func() hash.Hash32) (goka.Producer, error) {
		p, err := inner(brokers, clientID, hasher)
		if err != nil {
			return nil, err
		}
		return &watchingProducer{Producer: p, c: c}, nil
	})
}

// take returns the promise of the last table write of key and forgets it; nil when there was
// none (no watching producer installed).
func (c *claims) take(key string) *goka.Promise {
	c.mu.Lock()
	defer c.mu.Unlock()
	pr := c.pending[key]
	delete(c.pending, key)
	return pr
}

// watchingProducer is goka's producer with table writes remembered for claims.take.
type watchingProducer struct {
	goka.Producer
	c *claims
}

func (w *watchingProducer) Emit(topic, key string, value []byte) *goka.Promise {
	return w.EmitWithHeaders(topic, key, value, nil)
}

func (w *watchingProducer) EmitWithHeaders(topic, key string, value []byte, headers goka.Headers) *goka.Promise {
	pr := w.Producer.EmitWithHeaders(topic, key, value, headers)
	if topic == w.c.table {
		w.c.mu.Lock()
		w.c.pending[key] = pr
		w.c.mu.Unlock()
	}
	return pr
}
