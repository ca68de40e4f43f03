package ingest

import (
	"testing"
	"time"
)

// BenchmarkDedupe is ingest's dedupe lookup per record: decode the key's table value (JSON),
// apply the rule, and encode the new value when the record claims a slot. A request's third
// record sees two claimed slots, the usual case.
func BenchmarkDedupe(b *testing.B) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	const window = 7 * 24 * time.Hour
	_, two := Decide(nil, "gateway-log/REQUEST", Origin{"gateway-log", 1, 100}, 0, now, window)
	_, two = Decide(two, "model-inference-result", Origin{"model-inference-result", 1, 50}, 0, now, window)
	raw, err := StateCodec{}.Encode(two)
	if err != nil {
		b.Fatal(err)
	}
	var codec StateCodec
	b.Run("decide-claim", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if d, _ := Decide(two, "gateway-log/RESPONSE", Origin{"gateway-log", 1, 101}, 0, now, window); d != DecideClaim {
				b.Fatal(d)
			}
		}
	})
	b.Run("decide-duplicate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if d, _ := Decide(two, "gateway-log/REQUEST", Origin{"gateway-log", 2, 7}, 0, now, window); d != DecideDuplicate {
				b.Fatal(d)
			}
		}
	})
	b.Run("state-decode", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := codec.Decode(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("state-encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := codec.Encode(two); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("lookup-and-claim", func(b *testing.B) { // what one record costs: decode + decide + encode
		b.ReportAllocs()
		for b.Loop() {
			v, err := codec.Decode(raw)
			if err != nil {
				b.Fatal(err)
			}
			d, next := Decide(v.(*State), "gateway-log/RESPONSE", Origin{"gateway-log", 1, 101}, 0, now, window)
			if d != DecideClaim {
				b.Fatal(d)
			}
			if _, err := codec.Encode(next); err != nil {
				b.Fatal(err)
			}
		}
	})
}
