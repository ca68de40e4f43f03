package dlq

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/internal/conf/conftest"
)

func TestConfigValidate(t *testing.T) {
	// WantErr names the field and the value.
	conftest.Validate(t, []conftest.Case[Config]{
		{Name: "defaults", Config: Config{Stage: "ingest"}},
		{Name: "all set", Config: Config{Topic: "team.dlq-1", Stage: "sink-clickhouse", MaxMessageBytes: 4096}},
		{Name: "no stage", Config: Config{}, WantErr: "stage: empty"},
		{Name: "bad stage", Config: Config{Stage: "Ingest Stage"}, WantErr: `stage: "Ingest Stage"`},
		{Name: "bad topic", Config: Config{Topic: "dlq topic", Stage: "ingest"}, WantErr: `topic: "dlq topic"`},
		{Name: "dot topic", Config: Config{Topic: "..", Stage: "ingest"}, WantErr: `topic: ".."`},
		{Name: "long topic", Config: Config{Topic: strings.Repeat("t", 250), Stage: "ingest"}, WantErr: "topic:"},
		{Name: "small max", Config: Config{Stage: "ingest", MaxMessageBytes: 100}, WantErr: "max message bytes: 100"},
		{Name: "negative max", Config: Config{Stage: "ingest", MaxMessageBytes: -1}, WantErr: "max message bytes: -1"},
		{Name: "huge max", Config: Config{Stage: "ingest", MaxMessageBytes: 2 << 30}, WantErr: "max message bytes: 2147483648"},
	})
	if c := (Config{}).withDefaults(); c.Topic != "backflow.dlq" || c.MaxMessageBytes != DefaultMaxMessageBytes {
		t.Errorf("defaults %+v", c)
	}
}

// TestRecordTruncatesOversizedValue: a bad record too large for the DLQ is written with its
// value cut to fit and its original length in backflow.error.truncated; it cannot be
// re-driven, and writing the decoded entry again keeps the original length.
func TestRecordTruncatesOversizedValue(t *testing.T) {
	cfg := Config{Stage: "ingest", MaxMessageBytes: 8192}.withDefaults()
	value := bytes.Repeat([]byte{0xab}, 20000)
	o := Origin{Topic: "gateway-log", Partition: 0, Offset: 5, Key: []byte("k"), Value: value}
	r, err := cfg.record(NewEntry(o, WithClass("oversized", errors.New("20000 bytes"))), testNow)
	if err != nil {
		t.Fatal(err)
	}
	if size := batchSize(r); size > cfg.MaxMessageBytes || size < cfg.MaxMessageBytes-16 {
		t.Errorf("batch size %d, want just under %d", size, cfg.MaxMessageBytes)
	}
	if len(r.Value) >= len(value) || !bytes.Equal(r.Value, value[:len(r.Value)]) {
		t.Errorf("value %d bytes, want a prefix of the %d", len(r.Value), len(value))
	}
	if got := headerOf(r, HeaderErrorTruncated); got != "20000" {
		t.Errorf("truncated header %q", got)
	}
	e, err := Decode(r)
	if err != nil {
		t.Fatal(err)
	}
	if e.TruncatedFrom != 20000 {
		t.Errorf("TruncatedFrom %d", e.TruncatedFrom)
	}
	if _, err := Redrive(e, testNow); !errors.Is(err, ErrTruncated) {
		t.Errorf("redrive err %v, want ErrTruncated", err)
	}
	again, err := cfg.record(e, testNow)
	if err != nil {
		t.Fatal(err)
	}
	if got := headerOf(again, HeaderErrorTruncated); got != "20000" {
		t.Errorf("rewritten truncated header %q, want the original 20000", got)
	}

	// A value that fits is left whole and unmarked.
	o.Value = value[:1000]
	r, err = cfg.record(NewEntry(o, nil), testNow)
	if err != nil || len(r.Value) != 1000 || headerOf(r, HeaderErrorTruncated) != "" {
		t.Errorf("small value: err %v, %d bytes, truncated %q", err, len(r.Value), headerOf(r, HeaderErrorTruncated))
	}

	// Key and headers alone too large: nothing to cut.
	o.Key = bytes.Repeat([]byte("k"), 9000)
	if _, err := cfg.record(NewEntry(o, nil), testNow); !errors.Is(err, ErrTooLarge) {
		t.Errorf("huge key: err %v, want ErrTooLarge", err)
	}
}

// TestBatchSizeBound checks batchSize against the record batch v2 encoding for a spread of
// sizes: it must never be below the real size, or a record could exceed the limit.
func TestBatchSizeBound(t *testing.T) {
	for _, n := range []int{0, 1, 63, 64, 127, 128, 8191, 8192, 1 << 20} {
		r := &kgo.Record{Key: []byte("key"), Value: make([]byte, n), Headers: []kgo.RecordHeader{h("a", strconv.Itoa(n))}}
		// Exact v2 size: 61-byte batch header + length varint + body.
		body := 1 + 1 + 1 + varintLen(3) + 3 + varintLen(n) + n + varintLen(1) + varintLen(1) + 1 + varintLen(len(strconv.Itoa(n))) + len(strconv.Itoa(n))
		exact := 61 + varintLen(body) + body
		if got := batchSize(r); got < exact || got > exact+100 {
			t.Errorf("value %d: batchSize %d, exact %d", n, got, exact)
		}
	}
}

func TestNewWriterRejectsUnsafeClients(t *testing.T) {
	seed := kgo.SeedBrokers("127.0.0.1:1") // never contacted
	tests := []struct {
		name    string
		opts    []kgo.Opt
		cfg     Config
		wantErr error
	}{
		{"franz-go defaults", nil, Config{Stage: "ingest"}, nil},
		{"idempotence off", []kgo.Opt{kgo.DisableIdempotentWrite()}, Config{Stage: "ingest"}, ErrUnsafeClient},
		{"leader acks", []kgo.Opt{kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.LeaderAck())}, Config{Stage: "ingest"}, ErrUnsafeClient},
		{"cancellation allowed", []kgo.Opt{kgo.AllowIdempotentProduceCancellation()}, Config{Stage: "ingest"}, ErrUnsafeClient},
		{"batch limit below max", []kgo.Opt{kgo.ProducerBatchMaxBytes(64 << 10)}, Config{Stage: "ingest"}, ErrUnsafeClient},
		{"batch limit at max", []kgo.Opt{kgo.ProducerBatchMaxBytes(64 << 10)}, Config{Stage: "ingest", MaxMessageBytes: 64 << 10}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl, err := kgo.NewClient(append([]kgo.Opt{seed}, tt.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			w, err := NewWriter(cl, tt.cfg)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			if err == nil && w.Topic() != DefaultTopic {
				t.Errorf("topic %q", w.Topic())
			}
		})
	}
	if _, err := NewWriter(nil, Config{Stage: "ingest"}); !errors.Is(err, ErrUnsafeClient) {
		t.Errorf("nil client: %v", err)
	}
	cl, _ := kgo.NewClient(seed)
	defer cl.Close()
	if _, err := NewWriter(cl, Config{}); err == nil || !strings.Contains(err.Error(), "stage") {
		t.Errorf("no stage: %v", err)
	}
}

// TestWriteFailsWithoutBroker: when nothing acknowledges the record, Write returns an error by
// the context's deadline instead of reporting success or hanging; a zero Writer errors too.
func TestWriteFailsWithoutBroker(t *testing.T) {
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.DialTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	w, err := NewWriter(cl, Config{Stage: "ingest"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	err = w.Write(ctx, Origin{Topic: "gateway-log"}, errors.New("bad"))
	if err == nil || !strings.Contains(err.Error(), "backflow.dlq") {
		t.Fatalf("err %v, want a write error naming the topic", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %v past a 2s deadline", took)
	}
	if err := (&Writer{}).Write(ctx, Origin{Topic: "t"}, nil); err == nil {
		t.Error("zero Writer wrote")
	}
	if err := w.WriteBatch(ctx, []Entry{{Origin: Origin{Topic: "ok"}}, {Origin: Origin{}}}); !errors.Is(err, ErrInvalidEntry) {
		t.Errorf("invalid second entry: %v, want ErrInvalidEntry before producing", err)
	}
}
