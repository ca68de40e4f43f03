package dlq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Writer produces DLQ records. It is safe for concurrent use; it does not own the client.
type Writer struct {
	cl  *kgo.Client
	cfg Config
	now func() time.Time
}

// NewWriter returns a Writer that produces to cfg.Topic through cl. The caller builds cl
// (internal/kafka.Conn.NewClient) and closes it after the last write. cl must be an
// idempotent producer with acks=all, which are franz-go's defaults: do not pass
// kgo.DisableIdempotentWrite, a RequiredAcks other than kgo.AllISRAcks, or
// kgo.AllowIdempotentProduceCancellation. Its ProducerBatchMaxBytes must be at least
// cfg.MaxMessageBytes. Anything else is an ErrUnsafeClient, so a DLQ record is never acked
// before it is safe nor written twice by a retry. NewWriter does not contact the cluster.
func NewWriter(cl *kgo.Client, cfg Config) (*Writer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if cl == nil {
		return nil, fmt.Errorf("%w: nil client", ErrUnsafeClient)
	}
	if acks, _ := cl.OptValue(kgo.RequiredAcks).(kgo.Acks); acks != kgo.AllISRAcks() {
		return nil, fmt.Errorf("%w: acks must be all (kgo.AllISRAcks)", ErrUnsafeClient)
	}
	if off, _ := cl.OptValue(kgo.DisableIdempotentWrite).(bool); off {
		return nil, fmt.Errorf("%w: idempotent writes are disabled", ErrUnsafeClient)
	}
	if cancel, _ := cl.OptValue(kgo.AllowIdempotentProduceCancellation).(bool); cancel {
		return nil, fmt.Errorf("%w: idempotent produce cancellation is allowed", ErrUnsafeClient)
	}
	if limit, ok := cl.OptValue(kgo.ProducerBatchMaxBytes).(int32); ok && int(limit) < cfg.MaxMessageBytes {
		return nil, fmt.Errorf("%w: ProducerBatchMaxBytes %d is below max message bytes %d", ErrUnsafeClient, limit, cfg.MaxMessageBytes)
	}
	return &Writer{cl: cl, cfg: cfg, now: time.Now}, nil
}

// Topic returns the DLQ topic w writes to.
func (w *Writer) Topic() string { return w.cfg.Topic }

// Write produces one DLQ record for the bad record o, which failed with err (classified by
// ClassOf), and returns once the broker acknowledged it. A non-nil error means the record may
// not be in the DLQ: the caller must not commit o's source offset, and retries the write
// (with backoff) until it succeeds or the stage stops. ctx bounds the wait.
func (w *Writer) Write(ctx context.Context, o Origin, err error) error {
	return w.WriteBatch(ctx, []Entry{NewEntry(o, err)})
}

// WriteBatch produces one DLQ record per entry, synchronously, and returns the first error
// (nil when the broker acknowledged all of them). Entries are checked before anything is
// produced: an invalid one (ErrInvalidEntry, ErrTooLarge) fails the call with nothing written.
// After a produce error some records may be in the DLQ and some not; as with Write the caller
// commits none of the source offsets and retries the batch.
func (w *Writer) WriteBatch(ctx context.Context, entries []Entry) error {
	if err := w.check(); err != nil {
		return err
	}
	if len(entries) == 0 {
		return nil
	}
	now := w.now()
	recs := make([]*kgo.Record, len(entries))
	for i, e := range entries {
		r, err := w.cfg.record(e, now)
		if err != nil {
			return fmt.Errorf("dlq: entry %d (%s/%d/%d): %w", i, e.Origin.Topic, e.Origin.Partition, e.Origin.Offset, err)
		}
		recs[i] = r
	}
	if err := w.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("dlq: write %d record(s) to %s: %w", len(recs), w.cfg.Topic, err)
	}
	return nil
}

// Record is the DLQ record a Writer with cfg produces for e (the layout of the package doc),
// built without producing it; now stands in for a zero e.Time.
func (cfg Config) Record(e Entry, now time.Time) (*kgo.Record, error) {
	return cfg.withDefaults().record(e, now)
}

// record builds the DLQ record for e (see the package doc for the layout). cfg has its
// defaults applied; now stands in for a zero e.Time.
func (cfg Config) record(e Entry, now time.Time) (*kgo.Record, error) {
	o := e.Origin
	switch {
	case o.Topic == "":
		return nil, fmt.Errorf("%w: origin topic is empty", ErrInvalidEntry)
	case o.Partition < 0 || o.Offset < 0:
		return nil, fmt.Errorf("%w: origin partition %d, offset %d", ErrInvalidEntry, o.Partition, o.Offset)
	}
	stage := strings.ToValidUTF8(e.Stage, "\uFFFD")
	if stage == "" {
		stage = cfg.Stage
	}
	at := e.Time
	if at.IsZero() {
		at = now
	}
	ts := int64(-1)
	if !o.Timestamp.IsZero() {
		ts = o.Timestamp.UnixMilli()
	}

	headers := make([]kgo.RecordHeader, 0, len(o.Headers)+9)
	for _, h := range o.Headers {
		if !staleHeader(h.Key) {
			headers = append(headers, h)
		}
	}
	str := func(k, v string) kgo.RecordHeader { return kgo.RecordHeader{Key: k, Value: []byte(v)} }
	headers = append(headers,
		str(HeaderOriginTopic, o.Topic),
		str(HeaderOriginPartition, strconv.FormatInt(int64(o.Partition), 10)),
		str(HeaderOriginOffset, strconv.FormatInt(o.Offset, 10)),
		str(HeaderOriginTimestamp, strconv.FormatInt(ts, 10)),
		str(HeaderErrorStage, stage),
		str(HeaderErrorClass, normalizeClass(e.Class)),
		str(HeaderErrorMessage, cleanMessage(e.Message)),
		str(HeaderErrorTime, at.UTC().Format(TimeLayout)),
	)
	r := &kgo.Record{Topic: cfg.Topic, Key: o.Key, Value: o.Value, Headers: headers}

	// Cut the value if the record would not fit; an entry already cut keeps its first length.
	if size := batchSize(r); size > cfg.MaxMessageBytes || e.TruncatedFrom > 0 {
		orig := len(o.Value)
		if e.TruncatedFrom > 0 {
			orig = e.TruncatedFrom
		}
		r.Headers = append(r.Headers, str(HeaderErrorTruncated, strconv.Itoa(orig)))
		if over := batchSize(r) - cfg.MaxMessageBytes; over > 0 {
			// Each byte cut from the value shrinks the batch by at least one byte (its length
			// varints only get shorter), so cutting over bytes is enough.
			keep := len(r.Value) - over
			if keep < 0 {
				return nil, fmt.Errorf("%w: %d bytes of key and headers, max message bytes %d",
					ErrTooLarge, batchSize(r)-len(r.Value), cfg.MaxMessageBytes)
			}
			r.Value = r.Value[:keep:keep]
		}
	}
	return r, nil
}

// batchSize is an upper bound of the bytes of a record batch holding only r, as the producer
// and the broker count them against their limits (record batch v2 framing).
func batchSize(r *kgo.Record) int {
	const batchOverhead = 61 + 4 + 64 // batch header, array length, slack for produce framing
	// attributes, timestamp delta, offset delta, key, value, header count, headers
	body := 1 + 10 + 5 +
		varintLen(len(r.Key)) + len(r.Key) + varintLen(len(r.Value)) + len(r.Value) +
		varintLen(len(r.Headers))
	for _, h := range r.Headers {
		body += varintLen(len(h.Key)) + len(h.Key) + varintLen(len(h.Value)) + len(h.Value)
	}
	return batchOverhead + varintLen(body) + body
}

func varintLen(n int) int {
	l := 1
	for u := uint64(n) << 1; u >= 0x80; u >>= 7 { // zig-zag of a non-negative n
		l++
	}
	return l
}

// errNilWriter guards against a zero Writer.
var errNilWriter = errors.New("dlq: writer not built with NewWriter")

func (w *Writer) check() error {
	if w == nil || w.cl == nil {
		return errNilWriter
	}
	return nil
}
