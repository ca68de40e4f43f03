package dlq

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
)

var (
	testNow    = time.Date(2026, 3, 4, 5, 6, 7, 891_234_567, time.UTC)
	testOrigin = Origin{
		Topic:     "model-inference-result",
		Partition: 2,
		Offset:    41,
		Timestamp: time.UnixMilli(1767225600123),
		Key:       []byte("req-1"),
		Value:     []byte{0, 0, 0, 0, 7, 0xff, 0x00, 0x10},
		Headers: []kgo.RecordHeader{
			{Key: "trace-id", Value: []byte("t-1")},
			{Key: "backflow.origin.topic", Value: []byte("stale-topic")},
			{Key: "content-type", Value: []byte("avro")},
			{Key: "backflow.error.class", Value: []byte("stale_class")},
			{Key: "backflow.redrive.count", Value: []byte("2")},
			{Key: "empty", Value: nil},
		},
	}
)

func testConfig() Config { return Config{Stage: "ingest"}.withDefaults() }

func h(k, v string) kgo.RecordHeader { return kgo.RecordHeader{Key: k, Value: []byte(v)} }

// TestRecordHeaders checks the DLQ record layout: raw key and value, the original headers
// minus stale backflow.origin.*/backflow.error.* in their order, then ours in a fixed order.
func TestRecordHeaders(t *testing.T) {
	e := NewEntry(testOrigin, WithClass("corrupt", errors.New("avro: corrupt or truncated body")))
	e.Time = time.Time{} // the writer's clock
	r, err := testConfig().record(e, testNow)
	if err != nil {
		t.Fatal(err)
	}
	if r.Topic != DefaultTopic || !bytes.Equal(r.Key, testOrigin.Key) || !bytes.Equal(r.Value, testOrigin.Value) {
		t.Fatalf("topic %q key %q value %x", r.Topic, r.Key, r.Value)
	}
	want := []kgo.RecordHeader{
		h("trace-id", "t-1"),
		h("content-type", "avro"),
		h("backflow.redrive.count", "2"),
		{Key: "empty"},
		h(HeaderOriginTopic, "model-inference-result"),
		h(HeaderOriginPartition, "2"),
		h(HeaderOriginOffset, "41"),
		h(HeaderOriginTimestamp, "1767225600123"),
		h(HeaderErrorStage, "ingest"),
		h(HeaderErrorClass, "corrupt"),
		h(HeaderErrorMessage, "avro: corrupt or truncated body"),
		h(HeaderErrorTime, "2026-03-04T05:06:07.891Z"),
	}
	assertHeaders(t, r.Headers, want)
	if r.Headers[3].Value != nil {
		t.Errorf("a null header value became %q", r.Headers[3].Value)
	}
}

func assertHeaders(t *testing.T, got, want []kgo.RecordHeader) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d headers, want %d:\n got %v\nwant %v", len(got), len(want), got, want)
	}
	for i := range want {
		if got[i].Key != want[i].Key || !bytes.Equal(got[i].Value, want[i].Value) {
			t.Errorf("header %d = %s=%q, want %s=%q", i, got[i].Key, got[i].Value, want[i].Key, want[i].Value)
		}
	}
}

// TestRecordNilKeyValue: a record with null key and value, no timestamp and a nil error
// still makes a DLQ record, with null key and value, timestamp -1 and class unknown.
func TestRecordNilKeyValue(t *testing.T) {
	e := NewEntry(Origin{Topic: "gateway-log", Partition: 0, Offset: 0}, nil)
	r, err := testConfig().record(e, testNow)
	if err != nil {
		t.Fatal(err)
	}
	if r.Key != nil || r.Value != nil {
		t.Fatalf("key %v value %v, want both nil", r.Key, r.Value)
	}
	got := map[string]string{}
	for _, hd := range r.Headers {
		got[hd.Key] = string(hd.Value)
	}
	for k, want := range map[string]string{HeaderOriginTimestamp: "-1", HeaderErrorClass: ClassUnknown, HeaderErrorMessage: "", HeaderOriginOffset: "0"} {
		if got[k] != want {
			t.Errorf("%s = %q, want %q", k, got[k], want)
		}
	}
	if len(r.Headers) != 8 {
		t.Errorf("%d headers, want 8", len(r.Headers))
	}
}

func TestRecordRejectsInvalidEntry(t *testing.T) {
	for _, o := range []Origin{{Topic: ""}, {Topic: "t", Partition: -1}, {Topic: "t", Offset: -5}} {
		if _, err := testConfig().record(Entry{Origin: o}, testNow); !errors.Is(err, ErrInvalidEntry) {
			t.Errorf("%+v: err %v, want ErrInvalidEntry", o, err)
		}
	}
}

func TestCleanMessage(t *testing.T) {
	long := strings.Repeat("x", 3000)
	tests := []struct {
		name, in, want string
	}{
		{"short", "avro: corrupt", "avro: corrupt"},
		{"exactly 1 KiB", long[:MaxMessageLen], long[:MaxMessageLen]},
		{"ascii cut", long, long[:MaxMessageLen-3] + "…"},
		{"multibyte cut on a rune boundary", strings.Repeat("é", 700), strings.Repeat("é", 510) + "…"},
		{"invalid utf-8", "bad \xff\xfe byte", "bad \uFFFD byte"},
		{"url password", `Get "https://svc:s3cret@registry:8081/subjects": EOF`, `Get "https://svc:***@registry:8081/subjects": EOF`},
		{"url without password", "dial http://registry:8081: refused", "dial http://registry:8081: refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := cleanMessage(tt.in)
			if got != tt.want {
				t.Errorf("got %q (%d bytes), want %q (%d bytes)", got, len(got), tt.want, len(tt.want))
			}
			if len(got) > MaxMessageLen || !utf8.ValidString(got) {
				t.Errorf("%d bytes, valid utf-8 %v", len(got), utf8.ValidString(got))
			}
		})
	}
}

type badClass struct{ class string }

func (e badClass) Error() string      { return "bad" }
func (e badClass) ErrorClass() string { return e.class }

func TestClassOf(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ClassUnknown},
		{"plain error", errors.New("boom"), ClassUnknown},
		{"WithClass", WithClass("invalid", errors.New("empty requestId")), "invalid"},
		{"wrapped", fmt.Errorf("ingest: %w", WithClass("oversized", errors.New("2 MB"))), "oversized"},
		{"a Classified error wrapped", fmt.Errorf("decode: %w", badClass{"unknown_schema"}), "unknown_schema"}, // avro's DecodeError: avro/errors_test.go
		{"empty class", badClass{""}, ClassUnknown},
		{"not snake_case", badClass{"Not Framed"}, ClassUnknown},
		{"too long", badClass{strings.Repeat("a", 65)}, ClassUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ClassOf(tt.err); got != tt.want {
				t.Errorf("ClassOf = %q, want %q", got, tt.want)
			}
		})
	}
	if WithClass("x", nil) != nil {
		t.Error("WithClass of nil is not nil")
	}
}

// dlqRecord builds the DLQ record of testOrigin as a consumer would see it.
func dlqRecord(t *testing.T) *kgo.Record {
	t.Helper()
	e := Entry{Origin: testOrigin, Class: "unknown_schema", Message: "avro: unknown schema id (schema id 9)", Time: testNow}
	r, err := testConfig().record(e, testNow)
	if err != nil {
		t.Fatal(err)
	}
	r.Partition, r.Offset = 1, 17
	return r
}

func TestDecodeWellFormed(t *testing.T) {
	e, err := Decode(dlqRecord(t))
	if err != nil {
		t.Fatal(err)
	}
	o := e.Origin
	if o.Topic != "model-inference-result" || o.Partition != 2 || o.Offset != 41 || !o.Timestamp.Equal(testOrigin.Timestamp) {
		t.Errorf("origin %s/%d/%d at %v", o.Topic, o.Partition, o.Offset, o.Timestamp)
	}
	if !bytes.Equal(o.Key, testOrigin.Key) || !bytes.Equal(o.Value, testOrigin.Value) {
		t.Errorf("key %q value %x", o.Key, o.Value)
	}
	assertHeaders(t, o.Headers, []kgo.RecordHeader{h("trace-id", "t-1"), h("content-type", "avro"), h("backflow.redrive.count", "2"), {Key: "empty"}})
	if e.Stage != "ingest" || e.Class != "unknown_schema" || e.Message != "avro: unknown schema id (schema id 9)" {
		t.Errorf("stage %q class %q message %q", e.Stage, e.Class, e.Message)
	}
	if want := testNow.Truncate(time.Millisecond); !e.Time.Equal(want) || e.Time.Location() != time.UTC {
		t.Errorf("time %v, want %v UTC", e.Time, want)
	}
	if e.DLQTopic != DefaultTopic || e.DLQPartition != 1 || e.DLQOffset != 17 || e.TruncatedFrom != 0 {
		t.Errorf("dlq position %s/%d/%d truncated %d", e.DLQTopic, e.DLQPartition, e.DLQOffset, e.TruncatedFrom)
	}
}

func TestDecodeMalformed(t *testing.T) {
	without := func(name string) *kgo.Record {
		r := dlqRecord(t)
		r.Headers = removeHeader(r.Headers, name)
		return r
	}
	with := func(name, value string) *kgo.Record {
		r := dlqRecord(t)
		for i := range r.Headers {
			if r.Headers[i].Key == name {
				r.Headers[i].Value = []byte(value)
			}
		}
		return r
	}
	dup := dlqRecord(t)
	dup.Headers = append(dup.Headers, h(HeaderErrorClass, "corrupt"))
	truncated := dlqRecord(t)
	truncated.Headers = append(truncated.Headers, h(HeaderErrorTruncated, "0"))
	foreign := &kgo.Record{Topic: DefaultTopic, Value: []byte("x"), Headers: []kgo.RecordHeader{h("trace-id", "1")}}

	tests := []struct {
		name    string
		rec     *kgo.Record
		wantErr error
		naming  string // the header the error must name
	}{
		{"nil record", nil, ErrInvalidEntry, ""},
		{"no backflow headers", foreign, ErrMissingHeader, HeaderOriginTopic},
		{"bad partition", with(HeaderOriginPartition, "two"), ErrBadHeader, HeaderOriginPartition},
		{"negative partition", with(HeaderOriginPartition, "-1"), ErrBadHeader, HeaderOriginPartition},
		{"negative offset", with(HeaderOriginOffset, "-3"), ErrBadHeader, HeaderOriginOffset},
		{"empty topic", with(HeaderOriginTopic, ""), ErrBadHeader, HeaderOriginTopic},
		{"bad timestamp", with(HeaderOriginTimestamp, "yesterday"), ErrBadHeader, HeaderOriginTimestamp},
		{"bad time", with(HeaderErrorTime, "2026-03-04 05:06:07"), ErrBadHeader, HeaderErrorTime},
		{"duplicate header", dup, ErrBadHeader, HeaderErrorClass},
		{"truncated zero", truncated, ErrBadHeader, HeaderErrorTruncated},
	}
	for _, name := range []string{HeaderOriginTopic, HeaderOriginPartition, HeaderOriginOffset, HeaderOriginTimestamp,
		HeaderErrorStage, HeaderErrorClass, HeaderErrorMessage, HeaderErrorTime} {
		tests = append(tests, struct {
			name    string
			rec     *kgo.Record
			wantErr error
			naming  string
		}{"missing " + name, without(name), ErrMissingHeader, name})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(tt.rec)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.naming) {
				t.Errorf("error %q does not name %s", err, tt.naming)
			}
		})
	}
}

func removeHeader(hs []kgo.RecordHeader, name string) []kgo.RecordHeader {
	var out []kgo.RecordHeader
	for _, hd := range hs {
		if hd.Key != name {
			out = append(out, hd)
		}
	}
	return out
}

// TestRewriteDecodedEntry: writing a decoded entry again (a re-driven record that failed
// again, or a copy) gives one set of our headers, with the new stage's values.
func TestRewriteDecodedEntry(t *testing.T) {
	e, err := Decode(dlqRecord(t))
	if err != nil {
		t.Fatal(err)
	}
	e.Stage, e.Class, e.Message = "sink-clickhouse", "invalid", "again"
	r, err := testConfig().record(e, testNow)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Decode(r)
	if err != nil {
		t.Fatal(err)
	}
	if again.Stage != "sink-clickhouse" || again.Class != "invalid" || again.Message != "again" || len(r.Headers) != 4+8 {
		t.Errorf("stage %q class %q message %q, %d headers", again.Stage, again.Class, again.Message, len(r.Headers))
	}
}
