package dlq

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestRedrive(t *testing.T) {
	at := time.Date(2026, 5, 6, 7, 8, 9, 12_000_000, time.FixedZone("CEST", 2*3600))
	base := func(headers ...kgo.RecordHeader) Entry {
		return Entry{
			Origin: Origin{Topic: "gateway-log", Partition: 1, Offset: 99, Key: []byte("k"), Value: []byte{1, 2, 3},
				Headers: append([]kgo.RecordHeader{h("trace-id", "t")}, headers...)},
			Class: "corrupt", DLQTopic: "backflow.dlq", DLQPartition: 2, DLQOffset: 5,
		}
	}
	tests := []struct {
		name      string
		entry     Entry
		wantCount string
		wantErr   error
	}{
		{"first re-drive", base(), "1", nil},
		{"second re-drive", base(h(HeaderRedriveCount, "1"), h(HeaderRedriveFrom, "backflow.dlq/0/1"), h(HeaderRedriveTime, "x")), "2", nil},
		{"stale origin and error headers", base(h(HeaderOriginTopic, "x"), h(HeaderErrorClass, "y"), h(HeaderRedriveCount, "6")), "7", nil},
		{"bad count", base(h(HeaderRedriveCount, "many")), "", ErrBadHeader},
		{"truncated value", func() Entry { e := base(); e.TruncatedFrom = 2_000_000; return e }(), "", ErrTruncated},
		{"no DLQ position", func() Entry { e := base(); e.DLQTopic = ""; return e }(), "", ErrInvalidEntry},
		{"no origin topic", func() Entry { e := base(); e.Origin.Topic = ""; return e }(), "", ErrInvalidEntry},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Redrive(tt.entry, at)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr != nil {
				return
			}
			if r.Topic != "gateway-log" || r.Partition != 1 || !bytes.Equal(r.Key, []byte("k")) || !bytes.Equal(r.Value, []byte{1, 2, 3}) || !r.Timestamp.IsZero() {
				t.Errorf("record %s/%d key %q value %v ts %v", r.Topic, r.Partition, r.Key, r.Value, r.Timestamp)
			}
			assertHeaders(t, r.Headers, []kgo.RecordHeader{
				h("trace-id", "t"),
				h(HeaderRedriveFrom, "backflow.dlq/2/5"),
				h(HeaderRedriveTime, "2026-05-06T05:08:09.012Z"),
				h(HeaderRedriveCount, tt.wantCount),
			})
		})
	}
}

// TestRedriveRoundTrip: written, decoded, re-driven, failed again and written again, a record
// carries one set of DLQ headers and its re-drive count; the next re-drive counts 2.
func TestRedriveRoundTrip(t *testing.T) {
	cfg := testConfig()
	r, err := cfg.record(NewEntry(testOrigin, WithClass("corrupt", errors.New("bad"))), testNow)
	if err != nil {
		t.Fatal(err)
	}
	r.Offset = 3
	e, err := Decode(r)
	if err != nil {
		t.Fatal(err)
	}
	e.Origin.Headers = removeHeader(e.Origin.Headers, HeaderRedriveCount) // as if never re-driven
	re, err := Redrive(e, testNow)
	if err != nil {
		t.Fatal(err)
	}
	re.Offset = 1000 // re-produced to the origin, and it fails again
	r2, err := cfg.record(NewEntry(OriginOf(re), WithClass("corrupt", errors.New("still bad"))), testNow)
	if err != nil {
		t.Fatal(err)
	}
	r2.Offset = 4
	e2, err := Decode(r2)
	if err != nil {
		t.Fatal(err)
	}
	if e2.Origin.Offset != 1000 || e2.Message != "still bad" {
		t.Fatalf("second entry origin offset %d message %q", e2.Origin.Offset, e2.Message)
	}
	re2, err := Redrive(e2, testNow)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, hd := range re2.Headers {
		if len(hd.Key) > 9 && hd.Key[:9] == "backflow." {
			n++
		}
	}
	if got := headerOf(re2, HeaderRedriveCount); got != "2" || n != 3 {
		t.Fatalf("count %q, %d backflow headers; want 2 and 3 (from, time, count)", got, n)
	}
	if got := headerOf(re2, HeaderRedriveFrom); got != "backflow.dlq/0/4" {
		t.Errorf("from %q", got)
	}
}

func headerOf(r *kgo.Record, k string) string {
	for _, hd := range r.Headers {
		if hd.Key == k {
			return string(hd.Value)
		}
	}
	return ""
}
