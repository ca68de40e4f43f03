package dlq_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/dlq"
	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/test/testenv"
)

func newWriter(t *testing.T, cfg kafka.Conn, topic string) *dlq.Writer {
	t.Helper()
	cl, err := cfg.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	w, err := dlq.NewWriter(cl, dlq.Config{Topic: topic, Stage: "ingest"})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// scanAll returns every record of topic, via dlq.Scan.
func scanAll(t *testing.T, ctx context.Context, cfg kafka.Conn, topic string) []*kgo.Record {
	t.Helper()
	var recs []*kgo.Record
	if err := dlq.Scan(ctx, cfg, topic, func(r *kgo.Record) error { recs = append(recs, r); return nil }); err != nil {
		t.Fatalf("scan %s: %v", topic, err)
	}
	return recs
}

func hdr(k, v string) kgo.RecordHeader { return kgo.RecordHeader{Key: k, Value: []byte(v)} }

// TestWriteReadRedrive writes 5 entries of 3 classes to a real DLQ topic (3 through Write, 2
// through WriteBatch), reads them back with Scan and Decode asserting every header, key and
// value byte for byte, then re-drives 2 of them and asserts the origin topic got exactly those
// 2, on their origin partitions, with the re-drive headers and count 1.
func TestWriteReadRedrive(t *testing.T) {
	cfg := testenv.Kafka(t, "backflow-dlq-test")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dlqTopic := testenv.CreateTopic(t, ctx, cfg, "dlq-test", 3)
	origin := testenv.CreateTopic(t, ctx, cfg, "dlq-test-origin", 3)
	w := newWriter(t, cfg, dlqTopic)

	ts := time.UnixMilli(1767225600123)
	origins := []dlq.Origin{
		{Topic: origin, Partition: 0, Offset: 10, Timestamp: ts, Key: []byte("req-10"), Value: []byte{0xde, 0xad},
			Headers: []kgo.RecordHeader{hdr("trace-id", "a"), hdr(dlq.HeaderOriginTopic, "stale"), hdr("tenant", "t1")}},
		{Topic: origin, Partition: 1, Offset: 11, Timestamp: ts.Add(time.Second), Key: []byte("req-11"), Value: []byte{0, 0, 0, 0, 99, 1}},
		{Topic: origin, Partition: 2, Offset: 12, Key: nil, Value: nil, // null key and value, no timestamp
			Headers: []kgo.RecordHeader{{Key: "null-header"}, hdr(dlq.HeaderErrorClass, "stale")}},
		{Topic: origin, Partition: 1, Offset: 13, Timestamp: ts, Key: []byte("req-13"), Value: []byte("{not avro}"),
			Headers: []kgo.RecordHeader{hdr(dlq.HeaderRedriveCount, "4")}},
		{Topic: origin, Partition: 2, Offset: 14, Timestamp: ts, Key: []byte{}, Value: []byte{0xff, 0, 0xff}},
	}
	errs := []error{
		&avro.DecodeError{Kind: avro.ErrNotFramed},
		&avro.DecodeError{Kind: avro.ErrUnknownSchemaID, SchemaID: 99},
		fmt.Errorf("ingest: %w", &avro.DecodeError{Kind: avro.ErrNotFramed}),
		&avro.DecodeError{Kind: avro.ErrCorrupt, SchemaID: 3, Err: errors.New("unexpected EOF")},
		errors.New("no class at all"),
	}
	wantClass := []string{"not_framed", "unknown_schema", "not_framed", "corrupt", "unknown"}
	before := time.Now().Truncate(time.Millisecond)
	for i := 0; i < 3; i++ {
		if err := w.Write(ctx, origins[i], errs[i]); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if err := w.WriteBatch(ctx, []dlq.Entry{dlq.NewEntry(origins[3], errs[3]), dlq.NewEntry(origins[4], errs[4])}); err != nil {
		t.Fatalf("write batch: %v", err)
	}
	after := time.Now()

	recs := scanAll(t, ctx, cfg, dlqTopic)
	if len(recs) != 5 {
		t.Fatalf("read %d DLQ records, want 5", len(recs))
	}
	byOffset := map[int64]dlq.Entry{}
	for _, r := range recs {
		e, err := dlq.Decode(r)
		if err != nil {
			t.Fatalf("decode %d/%d: %v", r.Partition, r.Offset, err)
		}
		byOffset[e.Origin.Offset] = e
		i := int(e.Origin.Offset - 10)
		o := origins[i]

		// The raw record, header by header.
		var kept []kgo.RecordHeader
		for _, hd := range o.Headers {
			if hd.Key != dlq.HeaderOriginTopic && hd.Key != dlq.HeaderErrorClass {
				kept = append(kept, hd)
			}
		}
		tsWant := "-1"
		if !o.Timestamp.IsZero() {
			tsWant = strconv.FormatInt(o.Timestamp.UnixMilli(), 10)
		}
		want := append(kept,
			hdr(dlq.HeaderOriginTopic, origin),
			hdr(dlq.HeaderOriginPartition, strconv.Itoa(int(o.Partition))),
			hdr(dlq.HeaderOriginOffset, strconv.FormatInt(o.Offset, 10)),
			hdr(dlq.HeaderOriginTimestamp, tsWant),
			hdr(dlq.HeaderErrorStage, "ingest"),
			hdr(dlq.HeaderErrorClass, wantClass[i]),
			hdr(dlq.HeaderErrorMessage, errs[i].Error()),
		)
		if len(r.Headers) != len(want)+1 {
			t.Fatalf("entry %d: %d headers, want %d: %v", i, len(r.Headers), len(want)+1, r.Headers)
		}
		for j, hd := range want {
			if r.Headers[j].Key != hd.Key || !bytes.Equal(r.Headers[j].Value, hd.Value) || (hd.Value == nil) != (r.Headers[j].Value == nil) {
				t.Errorf("entry %d header %d: %s=%q, want %s=%q", i, j, r.Headers[j].Key, r.Headers[j].Value, hd.Key, hd.Value)
			}
		}
		last := r.Headers[len(r.Headers)-1]
		at, err := time.Parse(time.RFC3339, string(last.Value))
		if last.Key != dlq.HeaderErrorTime || err != nil || at.Before(before) || at.After(after) || len(last.Value) != len("2006-01-02T15:04:05.000Z") {
			t.Errorf("entry %d: %s=%q, want an RFC 3339 ms UTC time in [%v, %v]", i, last.Key, last.Value, before, after)
		}
		if !bytes.Equal(r.Key, o.Key) || !bytes.Equal(r.Value, o.Value) || (r.Key == nil) != (o.Key == nil) || (r.Value == nil) != (o.Value == nil) {
			t.Errorf("entry %d: key %q value %x, want %q %x (nil-ness kept)", i, r.Key, r.Value, o.Key, o.Value)
		}

		// The decoded entry.
		if e.Origin.Topic != origin || e.Origin.Partition != o.Partition || !e.Origin.Timestamp.Equal(o.Timestamp) ||
			e.Stage != "ingest" || e.Class != wantClass[i] || e.Message != errs[i].Error() || !e.Time.Equal(at) ||
			e.DLQTopic != dlqTopic || e.DLQPartition != r.Partition || e.DLQOffset != r.Offset {
			t.Errorf("entry %d decoded as %+v", i, e)
		}
		if len(e.Origin.Headers) != len(kept) {
			t.Errorf("entry %d: decoded %d original headers, want %d", i, len(e.Origin.Headers), len(kept))
		}
	}
	if len(byOffset) != 5 {
		t.Fatalf("decoded origins %v, want offsets 10..14", byOffset)
	}

	// Re-drive two: the one with original headers and the one re-driven 4 times before.
	prod, err := cfg.NewClient(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var redriven []*kgo.Record
	for _, off := range []int64{10, 13} {
		r, err := dlq.Redrive(byOffset[off], time.Now())
		if err != nil {
			t.Fatal(err)
		}
		redriven = append(redriven, r)
	}
	if err := prod.ProduceSync(ctx, redriven...).FirstErr(); err != nil {
		t.Fatalf("re-drive: %v", err)
	}
	got := scanAll(t, ctx, cfg, origin)
	if len(got) != 2 {
		t.Fatalf("origin topic has %d records, want the 2 re-driven", len(got))
	}
	wantCount := map[string]string{"req-10": "1", "req-13": "5"}
	for _, r := range got {
		e := byOffset[map[string]int64{"req-10": 10, "req-13": 13}[string(r.Key)]]
		if e.Origin.Key == nil || r.Partition != e.Origin.Partition || !bytes.Equal(r.Value, e.Origin.Value) {
			t.Fatalf("origin record %d/%d key %q value %x, want one of the re-driven on its origin partition", r.Partition, r.Offset, r.Key, r.Value)
		}
		from := fmt.Sprintf("%s/%d/%d", dlqTopic, e.DLQPartition, e.DLQOffset)
		var wantH []kgo.RecordHeader
		if string(r.Key) == "req-10" {
			wantH = append(wantH, hdr("trace-id", "a"), hdr("tenant", "t1"))
		}
		wantH = append(wantH, hdr(dlq.HeaderRedriveFrom, from))
		if len(r.Headers) != len(wantH)+2 {
			t.Fatalf("%s: headers %v", r.Key, r.Headers)
		}
		for j, hd := range wantH {
			if r.Headers[j].Key != hd.Key || !bytes.Equal(r.Headers[j].Value, hd.Value) {
				t.Errorf("%s header %d: %s=%q, want %s=%q", r.Key, j, r.Headers[j].Key, r.Headers[j].Value, hd.Key, hd.Value)
			}
		}
		tm, cnt := r.Headers[len(wantH)], r.Headers[len(wantH)+1]
		if _, err := time.Parse(time.RFC3339, string(tm.Value)); tm.Key != dlq.HeaderRedriveTime || err != nil {
			t.Errorf("%s: %s=%q", r.Key, tm.Key, tm.Value)
		}
		if cnt.Key != dlq.HeaderRedriveCount || string(cnt.Value) != wantCount[string(r.Key)] {
			t.Errorf("%s: %s=%q, want count %s", r.Key, cnt.Key, cnt.Value, wantCount[string(r.Key)])
		}
	}
}

// TestWriteOversizedValue: a bad record larger than the broker takes is still dead-lettered,
// its value cut to fit and its original length recorded; the broker accepts the cut record.
func TestWriteOversizedValue(t *testing.T) {
	cfg := testenv.Kafka(t, "backflow-dlq-test")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dlqTopic := testenv.CreateTopic(t, ctx, cfg, "dlq-test-big", 1)
	w := newWriter(t, cfg, dlqTopic)
	value := bytes.Repeat([]byte("0123456789"), 150_000) // 1.5 MB
	o := dlq.Origin{Topic: "gateway-log", Partition: 0, Offset: 1, Key: []byte("big"), Value: value}
	if err := w.Write(ctx, o, dlq.WithClass("oversized", errors.New("1500000 bytes"))); err != nil {
		t.Fatalf("write: %v", err)
	}
	recs := scanAll(t, ctx, cfg, dlqTopic)
	if len(recs) != 1 {
		t.Fatalf("%d records, want 1", len(recs))
	}
	e, err := dlq.Decode(recs[0])
	if err != nil {
		t.Fatal(err)
	}
	n := len(e.Origin.Value)
	if e.TruncatedFrom != len(value) || n >= len(value) || n < dlq.DefaultMaxMessageBytes-4096 || !bytes.Equal(e.Origin.Value, value[:n]) {
		t.Fatalf("value %d bytes, truncated from %d; want a prefix just under %d of the %d", n, e.TruncatedFrom, dlq.DefaultMaxMessageBytes, len(value))
	}
}

// TestScanSnapshotEmptyMissing: Scan ends on an empty topic, reads only what was there when it
// started, and reports a missing topic as ErrNoTopic.
func TestScanSnapshotEmptyMissing(t *testing.T) {
	cfg := testenv.Kafka(t, "backflow-dlq-test")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topic := testenv.CreateTopic(t, ctx, cfg, "dlq-test-scan", 3)
	if recs := scanAll(t, ctx, cfg, topic); len(recs) != 0 {
		t.Fatalf("empty topic gave %d records", len(recs))
	}
	err := dlq.Scan(ctx, cfg, topic+"-missing", func(*kgo.Record) error { return nil })
	if !errors.Is(err, dlq.ErrNoTopic) {
		t.Fatalf("missing topic: %v, want ErrNoTopic", err)
	}

	w := newWriter(t, cfg, topic)
	for i := 0; i < 6; i++ {
		if err := w.Write(ctx, dlq.Origin{Topic: "t", Offset: int64(i), Key: []byte{byte(i)}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Writing during the scan does not extend it: the late entries go to every partition,
	// including those not read yet, whose first fetch returns them.
	var late []dlq.Entry
	for i := 0; i < 12; i++ {
		late = append(late, dlq.NewEntry(dlq.Origin{Topic: "t", Offset: int64(100 + i), Key: fmt.Appendf(nil, "late-%d", i)}, nil))
	}
	var seen []int64
	err = dlq.Scan(ctx, cfg, topic, func(r *kgo.Record) error {
		e, err := dlq.Decode(r)
		if err != nil {
			return err
		}
		seen = append(seen, e.Origin.Offset)
		if len(seen) == 1 {
			return w.WriteBatch(ctx, late)
		}
		return nil
	})
	if err != nil || len(seen) != 6 {
		t.Fatalf("scan: %v, saw origin offsets %v, want the 6 present at the start", err, seen)
	}
	for _, o := range seen {
		if o >= 100 {
			t.Errorf("saw the late entry %d", o)
		}
	}
	if recs := scanAll(t, ctx, cfg, topic); len(recs) != 6+len(late) {
		t.Errorf("second scan: %d records, want %d", len(recs), 6+len(late))
	}
}

// TestFollow: Follow skips what was written before it started and delivers what comes after,
// then returns nil when its context ends.
func TestFollow(t *testing.T) {
	cfg := testenv.Kafka(t, "backflow-dlq-test")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topic := testenv.CreateTopic(t, ctx, cfg, "dlq-test-follow", 3)
	w := newWriter(t, cfg, topic)
	if err := w.Write(ctx, dlq.Origin{Topic: "t", Offset: 1, Key: []byte("before")}, nil); err != nil {
		t.Fatal(err)
	}
	followCtx, stop := context.WithCancel(ctx)
	got := make(chan string, 100)
	done := make(chan error, 1)
	started := make(chan map[int32]int64, 1)
	go func() {
		done <- dlq.Follow(followCtx, cfg, topic, func(ends map[int32]int64) { started <- ends }, func(r *kgo.Record) error {
			got <- string(r.Key)
			return nil
		})
	}()
	// Follow says where it starts (the ends, the one entry written before among them) before it
	// reads.
	select {
	case ends := <-started:
		var sum int64
		for _, e := range ends {
			sum += e
		}
		if len(ends) != 3 || sum != 1 {
			t.Fatalf("follow starts at %v, want 3 partitions' ends holding 1 entry", ends)
		}
	case err := <-done:
		t.Fatalf("follow returned before it started: %v", err)
	}
	var seen []string
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for n := 0; len(seen) < 3; {
		select {
		case k := <-got:
			seen = append(seen, k)
		case <-tick.C:
			if err := w.Write(ctx, dlq.Origin{Topic: "t", Offset: int64(n), Key: fmt.Appendf(nil, "after-%d", n)}, nil); err != nil {
				t.Fatal(err)
			}
			n++
		case err := <-done:
			t.Fatalf("follow returned early: %v", err)
		case <-ctx.Done():
			t.Fatalf("follow delivered %v before the deadline", seen)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("follow after cancel: %v", err)
	}
	for _, k := range seen {
		if k == "before" {
			t.Errorf("follow delivered an entry written before it started: %v", seen)
		}
	}
	if err := dlq.Follow(ctx, cfg, topic+"-missing", nil, func(*kgo.Record) error { return nil }); !errors.Is(err, dlq.ErrNoTopic) {
		t.Errorf("missing topic: %v, want ErrNoTopic", err)
	}
}
