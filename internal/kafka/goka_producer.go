package kafka

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"
	"github.com/twmb/franz-go/pkg/kgo"
)

// producerRetries is how many times sarama retried a failed produce (Conn.Sarama); the
// franz-go producer keeps trying for as long as those retries took (producerDeliveryTimeout).
const producerRetries = 20

// producerDeliveryTimeout is how long the goka producer keeps trying to write a record before
// failing it: the time sarama's 20 retries, producerBackoff apart, took (about 33 s), which
// outlasts a KRaft leader election (the broker fenced after 9 s, then a new leader).
//
// Why a time and not franz-go's RecordRetries(20): franz-go counts tries differently from
// sarama (a refused connection, a metadata refresh and a failed request each count), so the
// same count would give up after a different, shorter outage. The wait between tries is the
// same producerBackoff. A topic the cluster does not know fails sooner, after franz-go's 4
// metadata loads (UnknownTopicRetries).
//
// The timeout also fails a record that was sent but never answered
// (AllowIdempotentProduceCancellation), together with every later record of its partition.
// Without that, franz-go's idempotent producer keeps such a record until a broker answers,
// and a stage whose cluster went away mid-request would wait silently for as long as the
// outage lasts. With it, as with sarama, the write fails after the timeout and goka stops
// the processor; the records after the last commit are read and written again by the next
// run. A record that did reach the broker may then be there twice, as it could with sarama's
// retries (which were not idempotent): every reader of goka's topics already takes a
// redelivered record (changelog values are last-write-wins, loopback deltas carry the offset
// they were emitted for).
var producerDeliveryTimeout = func() time.Duration {
	var d time.Duration
	for n := range producerRetries {
		d += producerBackoff(n, producerRetries)
	}
	return d
}()

// gokaProducerBufferBytes caps the bytes of the records a goka producer holds unacknowledged;
// once reached, Emit blocks (goka's partition goroutine waits) until writes are acknowledged.
// It is far above one record's limit (ProducerBatchMaxBytes, about 1 MB, as sarama's
// MaxMessageBytes was): a larger record is failed at once either way.
const gokaProducerBufferBytes = 32 << 20

// gokaProducerCloseTimeout bounds how long Close waits for outstanding records, as goka's
// sarama producer waited for its last acknowledgements.
const gokaProducerCloseTimeout = 60 * time.Second

// GokaProducerBuilder returns the builder of the producer goka processors and emitters write
// with (table changelogs, loopback, emits): a franz-go client on c, in place of goka's
// sarama producer.
//
// Writes are acknowledged by every in-sync replica (acks=all) and idempotent, so a retried
// write is neither duplicated nor reordered within its partition: each partition's records are
// written, and their promises finished, in the order Emit was called. A key goes to the
// partition goka's hasher gives it, exactly as goka's sarama producer placed it
// (sarama.NewCustomHashPartitioner): int32(Sum32) modulo the partition count, negated if
// negative; with Murmur2Hasher that is KeyPartition. The brokers goka passes are ignored (goka
// is given c's); a client id goka passes wins over c's, as with goka's own builder.
func (c Conn) GokaProducerBuilder() goka.ProducerBuilder {
	return c.gokaProducerBuilder(gokaProducerCloseTimeout)
}

// gokaProducerBuilder is GokaProducerBuilder with Close's timeout and extra client options
// (tests shorten the timeouts).
func (c Conn) gokaProducerBuilder(closeTimeout time.Duration, extra ...kgo.Opt) goka.ProducerBuilder {
	return func(_ []string, clientID string, hasher func() hash.Hash32) (goka.Producer, error) {
		if hasher == nil {
			return nil, errors.New("kafka: goka producer: no hasher")
		}
		opts := []kgo.Opt{
			kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.RecordPartitioner(gokaPartitioner(hasher)),
			kgo.RetryBackoffFn(func(tries int) time.Duration { return producerBackoff(max(tries-1, 0), producerRetries) }),
			kgo.RecordDeliveryTimeout(producerDeliveryTimeout),
			kgo.AllowIdempotentProduceCancellation(),
			kgo.MaxBufferedBytes(gokaProducerBufferBytes),
		}
		if clientID != "" {
			opts = append(opts, kgo.ClientID(clientID))
		}
		cl, err := c.NewClient(append(opts, extra...)...)
		if err != nil {
			return nil, err
		}
		return newGokaProducer(cl, closeTimeout), nil
	}
}

// gokaPartitioner places a record's key where goka's hasher says, as sarama's custom hash
// partitioner does. franz-go calls one topic's partitioner for one record at a time, so each
// topic's hasher is reused without a lock.
func gokaPartitioner(hasher func() hash.Hash32) kgo.Partitioner {
	return kgo.BasicConsistentPartitioner(func(string) func(*kgo.Record, int) int {
		h := hasher()
		return func(r *kgo.Record, n int) int {
			h.Reset()
			_, _ = h.Write(r.Key) // a hash.Hash never returns an error
			p := int32(h.Sum32()) % int32(n)
			if p < 0 {
				p = -p
			}
			return int(p)
		}
	})
}

// gokaProducer is goka.Producer on a franz-go client.
type gokaProducer struct {
	cl           *kgo.Client
	closeTimeout time.Duration

	mu          sync.Mutex
	broken      error         // the first failed write: nothing is written after it
	outstanding int           // records produced whose promise has not been finished
	closing     bool          // Close has begun: failures are Close's to report
	drained     chan struct{} // closed once closing and nothing is outstanding
	failed      int           // records failed after Close began
	firstErr    error         // the first of them
}

func newGokaProducer(cl *kgo.Client, closeTimeout time.Duration) *gokaProducer {
	return &gokaProducer{cl: cl, closeTimeout: closeTimeout, drained: make(chan struct{})}
}

// Emit writes value under key to topic; the promise is finished once the write is
// acknowledged or has failed.
func (p *gokaProducer) Emit(topic, key string, value []byte) *goka.Promise {
	return p.EmitWithHeaders(topic, key, value, nil)
}

// EmitWithHeaders is Emit with record headers. A nil value is written as a tombstone. It
// blocks while the producer holds gokaProducerBufferBytes unacknowledged.
func (p *gokaProducer) EmitWithHeaders(topic, key string, value []byte, headers goka.Headers) *goka.Promise {
	promise, finish := goka.NewPromiseWithFinisher()
	r := &kgo.Record{Topic: topic, Key: []byte(key), Value: value}
	if r.Key == nil {
		r.Key = []byte{} // an empty key, not a null one: goka's producer hashed "" as well
	}
	if len(headers) > 0 {
		r.Headers = make([]kgo.RecordHeader, 0, len(headers))
		for k, v := range headers {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: k, Value: v})
		}
	}
	p.mu.Lock()
	if broken := p.broken; broken != nil {
		p.mu.Unlock()
		finish(nil, fmt.Errorf("kafka: produce to %s: not attempted after an earlier write failed: %w", topic, broken))
		return promise
	}
	p.outstanding++
	p.mu.Unlock()
	// Background: an emit is never given up by goka's caller; a record fails only on the
	// producer's own terms (delivery timeout, unknown topic, closed client).
	p.cl.Produce(context.Background(), r, func(r *kgo.Record, err error) {
		if err != nil {
			err = fmt.Errorf("kafka: produce to %s: %w", topic, err)
			p.breakOn(err)
			finish(nil, err)
		} else {
			finish(saramaMessage(r, key, headers), nil)
		}
		p.done(err)
	})
	return promise
}

// breakOn makes every later Emit fail at once with err (the first failure). goka stops a
// processor on a failed emit; until it has, nothing more is written, so no record lands behind
// one that was not written (the deltas of the feature aggregates, whose offset marks would
// then skip the missing one when it comes again, rely on that). franz-go fails the records
// already buffered behind a failed one in its partition itself. A record produced in the
// moment between franz-go failing a write and this promise running can still be written.
func (p *gokaProducer) breakOn(err error) {
	p.mu.Lock()
	if p.broken == nil {
		p.broken = err
	}
	p.mu.Unlock()
}

// saramaMessage describes a written record as goka's promise callbacks expect it (goka's
// table writes take the offset from it).
func saramaMessage(r *kgo.Record, key string, headers goka.Headers) *sarama.ProducerMessage {
	m := &sarama.ProducerMessage{
		Topic:     r.Topic,
		Key:       sarama.StringEncoder(key),
		Value:     sarama.ByteEncoder(r.Value),
		Offset:    r.Offset,
		Partition: r.Partition,
		Timestamp: r.Timestamp,
	}
	if len(headers) > 0 {
		m.Headers = headers.ToSarama()
	}
	return m
}

// done accounts for a finished record.
func (p *gokaProducer) done(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.outstanding--
	if !p.closing {
		return
	}
	if err != nil {
		p.failed++
		if p.firstErr == nil {
			p.firstErr = err
		}
	}
	if p.outstanding == 0 && p.drained != nil {
		close(p.drained)
		p.drained = nil
	}
}

// Close writes what is outstanding (up to the close timeout), closes the client and waits for
// every promise to be finished. It reports records that could not be written: those that
// failed while flushing, and those still outstanding at the timeout (their promises are
// finished with kgo.ErrClientClosed). Emits after Close fail with kgo.ErrClientClosed.
func (p *gokaProducer) Close() error {
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		return nil
	}
	p.closing = true
	drained := p.drained
	if p.outstanding == 0 && p.drained != nil {
		close(p.drained)
		p.drained = nil
	}
	p.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), p.closeTimeout)
	flushErr := p.cl.Flush(ctx)
	cancel()
	p.cl.Close() // fails whatever is still buffered
	// The promises of records failed by Close run on franz-go's promise goroutine: wait for
	// them, so no goka promise is left unfinished.
	select {
	case <-drained:
	case <-time.After(10 * time.Second):
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	if flushErr != nil {
		errs = append(errs, fmt.Errorf("flush: %w", flushErr))
	}
	if p.failed > 0 {
		errs = append(errs, fmt.Errorf("%d records not written, the first: %w", p.failed, p.firstErr))
	}
	if p.outstanding > 0 {
		errs = append(errs, fmt.Errorf("%d records still unfinished", p.outstanding))
	}
	if len(errs) > 0 {
		return fmt.Errorf("kafka: goka producer close: %w", errors.Join(errs...))
	}
	return nil
}
