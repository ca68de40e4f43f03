package features

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lovoo/goka"
)

// Folding the aggregates' deltas.
//
// A counted RESPONSE forwards three deltas (tenant, user, model). Sent one loopback message
// each, every delta cost a Kafka record, a rewrite of the whole 2 to 4 KB aggregate entry in
// the table and its changelog, and a Redis write: about a third of the stage's CPU and of the
// Kafka records it made. The folder gathers, per enriched partition, the deltas of the records
// consumed since its last flush, and sends each aggregate key's deltas as one message, a
// DeltaBatch, which consumeDelta applies in one table write and one Redis write.
//
// Nothing of the idempotence rules changes (aggregate.go): each delta in a batch keeps its own
// enriched position and is applied, or skipped as a re-send, by the same per-partition offset
// mark as before, in the order it was consumed. A batch holds one enriched partition's deltas,
// and one partition's batches are produced in order on goka's idempotent producer, so they
// reach each loopback partition in offset order, as single deltas did.
//
// Commits. A record is committed only once its request row is in Redis and the batch carrying
// its deltas is acknowledged (its ticket), and only after every record before it in its
// partition (the sequencer): goka marks a partition's offset at each completed record, so a
// record completed ahead of an earlier one would commit past it. For the same reason a record
// that fails (a stop fails the deltas still waiting) fails every record after it in its
// partition, those that wrote nothing to the loopback too. A crash before the batch was
// acknowledged leaves the record uncommitted; read again, it finds its request entry forwarded
// at its own position and forwards the same deltas again, which the marks take once.
//
// Lifecycle: newFolder; run until the processor's context ends (it flushes every interval);
// add from goka's partition goroutines; close once goka is stopping, which fails the tickets
// still waiting (their records stay uncommitted and are read again by the next run).
type folder struct {
	// prod writes the loopback: goka's producer (kafka.Conn.GokaProducerBuilder) with goka's
	// hasher, so each key lands where goka reads it, one partition's batches in order, and
	// nothing is written after a failed write.
	prod     goka.Producer
	topic    string // the loopback topic
	interval time.Duration
	max      int // records in a partition's buffer that flush it at once

	mu     sync.Mutex
	bufs   map[int32]*foldBuf
	closed error // set by close: every add and flush fails with it
	// inflight holds the flushes produced and not yet acknowledged, for close to fail.
	inflight map[*flush]struct{}
}

// foldBuf is one enriched partition's deltas since its last flush.
type foldBuf struct {
	mu      sync.Mutex // held across a flush's produce calls: one partition's batches go out in order
	keys    []string   // aggregate keys in the order first met
	deltas  map[string]DeltaBatch
	tickets []*ticket
}

// flush is one buffer's batches on their way: its tickets finish once all are acknowledged.
type flush struct {
	once    sync.Once
	mu      sync.Mutex
	left    int
	err     error
	tickets []*ticket
}

func (f *flush) finish(err error) {
	f.once.Do(func() {
		for _, t := range f.tickets {
			t.finish(err)
		}
	})
}

func newFolder(prod goka.Producer, topic string, interval time.Duration, max int) *folder {
	return &folder{prod: prod, topic: topic, interval: interval, max: max,
		bufs: map[int32]*foldBuf{}, inflight: map[*flush]struct{}{}}
}

// errFolderClosed fails the tickets a stopping processor leaves.
var errFolderClosed = errors.New("features: stopping: deltas not sent")

// add buffers the deltas of one record of enriched partition part, keys in the order to send
// them; t finishes once they are acknowledged (or cannot be).
func (f *folder) add(part int32, keys []string, deltas map[string]*Delta, t *ticket) {
	f.mu.Lock()
	if f.closed != nil {
		f.mu.Unlock()
		t.finish(f.closed)
		return
	}
	b := f.bufs[part]
	if b == nil {
		b = &foldBuf{deltas: map[string]DeltaBatch{}}
		f.bufs[part] = b
	}
	f.mu.Unlock()
	b.mu.Lock()
	for _, k := range keys {
		if _, ok := b.deltas[k]; !ok {
			b.keys = append(b.keys, k)
		}
		b.deltas[k] = append(b.deltas[k], deltas[k])
	}
	b.tickets = append(b.tickets, t)
	full := len(b.tickets) >= f.max
	b.mu.Unlock()
	if full {
		f.flushPart(b)
	}
}

// run flushes every buffer each interval until ctx ends.
func (f *folder) run(ctx context.Context) {
	t := time.NewTicker(f.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f.mu.Lock()
			bufs := make([]*foldBuf, 0, len(f.bufs))
			for _, b := range f.bufs {
				bufs = append(bufs, b)
			}
			f.mu.Unlock()
			for _, b := range bufs {
				f.flushPart(b)
			}
		}
	}
}

// flushPart sends b's batches, one per aggregate key, and finishes its tickets once the last
// is acknowledged (with the first error, if any failed).
func (f *folder) flushPart(b *foldBuf) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.tickets) == 0 {
		return
	}
	fl := &flush{tickets: b.tickets}
	keys, deltas := b.keys, b.deltas
	b.keys, b.deltas, b.tickets = nil, map[string]DeltaBatch{}, nil
	values := make([][]byte, len(keys))
	for i, k := range keys {
		v, err := (DeltaCodec{}).Encode(deltas[k])
		if err != nil {
			fl.finish(err)
			return
		}
		values[i] = v
	}
	f.mu.Lock()
	if f.closed != nil {
		f.mu.Unlock()
		fl.finish(f.closed)
		return
	}
	f.inflight[fl] = struct{}{}
	f.mu.Unlock()
	fl.left = len(keys) // at least one: a record is added with at least one key
	for i, k := range keys {
		// Close fails the tickets of what is still in flight when the processor stops.
		f.prod.Emit(f.topic, k, values[i]).Then(func(err error) {
			fl.mu.Lock()
			if err != nil && fl.err == nil {
				fl.err = fmt.Errorf("features: send deltas of %s: %w", k, err)
			}
			fl.left--
			last, ferr := fl.left == 0, fl.err
			fl.mu.Unlock()
			if last {
				f.done(fl)
				fl.finish(ferr)
			}
		})
	}
}

func (f *folder) done(fl *flush) {
	f.mu.Lock()
	delete(f.inflight, fl)
	f.mu.Unlock()
}

// close fails every ticket still buffered or in flight with err; later adds fail at once.
func (f *folder) close(err error) {
	f.mu.Lock()
	if f.closed == nil {
		f.closed = err
	}
	bufs := make([]*foldBuf, 0, len(f.bufs))
	for _, b := range f.bufs {
		bufs = append(bufs, b)
	}
	flushes := make([]*flush, 0, len(f.inflight))
	for fl := range f.inflight {
		flushes = append(flushes, fl)
	}
	f.inflight = map[*flush]struct{}{}
	f.mu.Unlock()
	for _, fl := range flushes {
		fl.finish(err)
	}
	for _, b := range bufs {
		b.mu.Lock()
		ts := b.tickets
		b.keys, b.deltas, b.tickets = nil, map[string]DeltaBatch{}, nil
		b.mu.Unlock()
		for _, t := range ts {
			t.finish(err)
		}
	}
}

// ticket is one consumed record's wait for its commit: parts to finish (its Redis write, its
// deltas' batch), then its turn in its partition's sequencer.
type ticket struct {
	seq   *sequencer
	done  func(error) // goka's DeferCommit
	parts int         // parts still to finish: 0 once the record is complete
	err   error
}

// finish completes one part of t, with err if it failed.
func (t *ticket) finish(err error) { t.seq.finish(t, err) }

// sequencer completes one enriched partition's records in the order they were consumed.
//
// A record that completes with an error is not committed, and neither is any record after
// it in its partition: goka commits a record through sarama's MarkOffset, which moves the
// partition's offset forward to the record's own, so a later record committed after an
// earlier one failed would commit past it and the earlier one would never be read again. So
// once a record failed, every later record completes with errBehindFailed (a stopping
// processor leaves them all to redelivery; goka stops a partition whose record failed).
type sequencer struct {
	mu     sync.Mutex
	q      []*ticket
	failed error // the first error a record completed with; nil while none did
}

// errBehindFailed completes a record that came after one that failed in its partition.
var errBehindFailed = errors.New("features: an earlier record of the partition was not completed")

// ticket queues a record that completes once parts parts finished and every record queued
// before it completed; done is called then, with the first error of its parts, or with
// errBehindFailed when a record before it failed.
func (s *sequencer) ticket(done func(error), parts int) *ticket {
	t := &ticket{seq: s, done: done, parts: parts}
	s.mu.Lock()
	s.q = append(s.q, t)
	s.mu.Unlock()
	return t
}

func (s *sequencer) finish(t *ticket, err error) {
	s.mu.Lock()
	if t.parts > 0 {
		t.parts--
		if err != nil && t.err == nil {
			t.err = err
		}
	}
	var out []*ticket
	n := 0
	for n < len(s.q) && s.q[n].parts == 0 {
		x := s.q[n]
		switch {
		case x.err != nil && s.failed == nil:
			s.failed = x.err
		case x.err == nil && s.failed != nil:
			x.err = fmt.Errorf("%w: %w", errBehindFailed, s.failed)
		}
		out = append(out, x)
		n++
	}
	if n > 0 {
		s.q = append(s.q[:0], s.q[n:]...)
	}
	s.mu.Unlock()
	for _, x := range out {
		x.done(x.err)
	}
}
