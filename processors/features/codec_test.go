package features

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/backflowhq/backflow/internal/tablecodec"
)

// busyWorld is a world after a few hundred requests over an hour and a half: request entries
// with every field, tenant, user and model entries with both windows, histograms and marks on
// three partitions.
func busyWorld() *world {
	w := newWorld()
	for i := range 300 {
		id := fmt.Sprintf("r%03d", i)
		tenant, user, model := fmt.Sprintf("t%d", i%3), fmt.Sprintf("u%d", i%7), fmt.Sprintf("m%d", i%2)
		verdict := "ALLOW"
		if i%11 == 0 {
			verdict = "REVIEW"
		}
		at := Pos{int32(i % 3), int64(10 * i)}
		et := t0.Add(time.Duration(i) * 17 * time.Second)
		req := gwu(id, "REQUEST", tenant, user, model, verdict, 0)
		req.Gateway.EventTime = et
		w.apply(req, at)
		in := inf(id, model, float32(i%10)/10, "ALLOW", "pii", "toxicity")
		in.Inference.EventTime = et.Add(time.Second)
		w.apply(in, Pos{at.Partition, at.Offset + 1})
		resp := gwu(id, "RESPONSE", tenant, user, model, "ALLOW", int32(200+300*(i%13/12)))
		resp.Gateway.EventTime = et.Add(2 * time.Second)
		resp.Gateway.LatencyMs = int32(10 + 37*i%4000)
		w.apply(resp, Pos{at.Partition, at.Offset + 2})
		w.req[id].Seen = et.Add(3 * time.Second)
	}
	return w
}

// TestEntryCodec: every kind of entry round-trips exactly through the binary layout, which is
// smaller than JSON, and encodes the same whatever the map order.
func TestEntryCodec(t *testing.T) {
	w := busyWorld()
	entries := []*Entry{{Request: w.req["r011"]}, {Request: w.req["r000"]}, {Request: &RequestState{}}, {Tenant: w.tenants["t1"]},
		{User: w.users[[2]string{"t2", "u3"}]}, {Model: w.models["m1"]}, {}}
	if w.req["r011"].WinFlagSent == nil || w.req["r011"].Counted == nil || len(w.models["m1"].Win["1h"]) == 0 || len(w.models["m1"].LatencyHist) == 0 {
		t.Fatalf("the busy world lacks fields to test: %+v %+v", w.req["r011"], w.models["m1"])
	}
	var c EntryCodec
	for i, e := range entries {
		b, err := c.Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		if b[0] != tablecodec.FormatV1 {
			t.Fatalf("entry %d: first byte %#x, want the binary format", i, b[0])
		}
		again, _ := c.Encode(e)
		if !bytes.Equal(b, again) {
			t.Fatalf("entry %d: two encodings differ", i)
		}
		back, err := c.Decode(b)
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if !reflect.DeepEqual(back, e) {
			t.Fatalf("entry %d round trip:\n got %+v\nwant %+v", i, back, e)
		}
		// Every entry that holds state is at most half its JSON size (the empty entry, never
		// stored, is 3 bytes against JSON's "{}").
		if js, _ := json.Marshal(e); e.Request != nil || e.Tenant != nil || e.User != nil || e.Model != nil {
			if len(b) > len(js)/2 {
				t.Errorf("entry %d: binary %d bytes, JSON %d: want at most half", i, len(b), len(js))
			}
		} else if len(b) != 3 {
			t.Errorf("the empty entry: %d bytes, want 3", len(b))
		}
		for n := 0; n < len(b); n++ {
			if _, err := c.Decode(b[:n]); err == nil {
				t.Fatalf("entry %d cut to %d of %d bytes decoded", i, n, len(b))
			}
		}
		if _, err := c.Decode(append(append([]byte{}, b...), 0)); !errors.Is(err, tablecodec.ErrCorrupt) {
			t.Fatalf("entry %d with a byte left over: %v", i, err)
		}
	}
	if _, err := c.Decode([]byte{tablecodec.FormatV1, deltaKind, 0}); !errors.Is(err, tablecodec.ErrCorrupt) {
		t.Fatalf("a delta read as an entry: %v, want ErrCorrupt", err)
	}
	if _, err := c.Decode([]byte{tablecodec.FormatV1, entryKind, 'x'}); !errors.Is(err, tablecodec.ErrCorrupt) {
		t.Fatalf("an unknown entry kind: %v, want ErrCorrupt", err)
	}
	if _, err := c.Encode(Entry{}); err == nil {
		t.Fatal("encoding an Entry value (not a pointer) did not fail")
	}
}

// TestEntryCodecReadsJSON: a group table written by earlier versions (JSON) reads as the same
// entries, and applying on top of them gives what applying on the binary values gives, so an
// upgrade in place needs no reset.
func TestEntryCodecReadsJSON(t *testing.T) {
	w := busyWorld()
	var c EntryCodec
	for key, e := range map[string]*Entry{"r011": {Request: w.req["r011"]}, "tenant/t1": {Tenant: w.tenants["t1"]},
		"user/t2/u3": {User: w.users[[2]string{"t2", "u3"}]}, "model/m1": {Model: w.models["m1"]}} {
		js, err := json.Marshal(e) // exactly what the JSON codec wrote
		if err != nil {
			t.Fatal(err)
		}
		fromJSON, err := c.Decode(js)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		want, _ := c.Encode(e)
		got, _ := c.Encode(fromJSON)
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: the JSON value decodes to another entry:\n got %+v\nwant %+v", key, fromJSON, e)
		}
		// The next delta on the legacy value and on the binary one: the same state.
		fromBin, _ := c.Decode(want)
		d := &Delta{From: Pos{1, 1 << 20}, Count: true, Error: true, Tokens: 9, LatencyMs: 333, EventTime: t0.Add(2 * time.Hour), FlagAt: t0.Add(2 * time.Hour)}
		apply := func(v any) []byte {
			e := v.(*Entry)
			switch {
			case e.Tenant != nil:
				ApplyTenant(e.Tenant, d)
			case e.User != nil:
				ApplyUser(e.User, d)
			case e.Model != nil:
				ApplyModel(e.Model, d)
			default:
				e.Request.Seen = t0
			}
			b, _ := c.Encode(e)
			return b
		}
		if a, b := apply(fromJSON), apply(fromBin); !bytes.Equal(a, b) {
			t.Fatalf("%s: a delta on the legacy value and on the binary one differ", key)
		}
	}
	// Literal values in the JSON layout, as a running group's table holds them.
	legacy := map[string]string{
		"request": `{"r":{"tenant":"acme","user":"u1","model":"m1","risk":0.7,"verdict":"REVIEW","cats":["pii"],"latency":40,"tokens":7,"flagged":true,"time":"2026-11-29T12:00:02Z","counted":{"p":0,"o":12},"flagSent":{"p":0,"o":10},"countedAt":"2026-11-29T12:00:02Z","countedKeys":["tenant/acme","user/acme/u1"],"winFlagSent":{"p":0,"o":12},"seen":"2026-11-29T12:00:05.123456789Z"}}`,
		"tenant":  `{"t":{"requests":2,"flagged":1,"tokens":14,"lastSeen":"2026-11-29T12:00:02Z","applied":{"0":12,"1":5},"win":{"1h":[{"s":1795953600,"n":2,"f":1,"k":14}],"24h":[{"s":1795953600,"n":2,"f":1,"k":14}]}}}`,
		"model":   `{"m":{"requests":2,"errors":1,"latencySum":80,"latencyMax":40,"lastSeen":"2026-11-29T12:00:02Z","applied":{"0":12},"hist":[0,0,2],"win":{"1h":[{"s":1795953600,"n":2,"e":1,"ls":80,"lm":40,"h":[0,0,2]}]}}}`,
	}
	v, err := c.Decode([]byte(legacy["request"]))
	r := v.(*Entry).Request
	if err != nil || r.Tenant != "acme" || r.User != "u1" || r.RiskScore != 0.7 || !r.Flagged || *r.Counted != (Pos{0, 12}) || r.UserFlagSent != nil ||
		len(r.CountedKeys) != 2 || r.Seen.Nanosecond() != 123456789 || !r.CountedAt.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("legacy request entry: %+v, %v", r, err)
	}
	v, err = c.Decode([]byte(legacy["tenant"]))
	ten := v.(*Entry).Tenant
	if err != nil || ten.RequestCount != 2 || ten.Applied[1] != 5 || ten.Win["1h"][0].Flagged != 1 || ten.Win.sum(Windows[1], ten.LastSeen).Tokens != 14 {
		t.Fatalf("legacy tenant entry: %+v, %v", ten, err)
	}
	if _, changed := ApplyTenant(ten, &Delta{From: Pos{1, 5}, Count: true}); changed {
		t.Fatal("a legacy tenant entry forgot its marks: a re-sent delta applied")
	}
	v, err = c.Decode([]byte(legacy["model"]))
	m := v.(*Entry).Model
	if err != nil || m.ErrorCount != 1 || m.LatencyHist.Quantile(0.95, m.LatencyMaxMs) != 40 || m.Win["1h"][0].LatencySum != 80 {
		t.Fatalf("legacy model entry: %+v, %v", m, err)
	}
}

// TestDeltaCodec: batches of deltas round-trip in binary, a single delta encodes as a batch of
// one, and what earlier versions left in the loopback (a single binary delta, a JSON one)
// decodes as a batch of one.
func TestDeltaCodec(t *testing.T) {
	var c DeltaCodec
	d1 := &Delta{From: Pos{2, 1 << 41}, Count: true, Flag: true, Error: true, Tokens: -3, LatencyMs: 60001, EventTime: t0, FlagAt: t0.Add(time.Nanosecond)}
	d2 := &Delta{From: Pos{0, 0}, Flag: true}
	for _, batch := range []DeltaBatch{{d1}, {d2}, {d1, d2, d1}} {
		b, err := c.Encode(batch)
		if err != nil {
			t.Fatal(err)
		}
		back, err := c.Decode(b)
		if err != nil || !reflect.DeepEqual(back, batch) {
			t.Fatalf("round trip: %+v, %v; want %+v", back, err, batch)
		}
		for n := 0; n < len(b); n++ {
			if _, err := c.Decode(b[:n]); err == nil {
				t.Fatalf("a batch of %d cut to %d of %d bytes decoded", len(batch), n, len(b))
			}
		}
	}
	if one, err := c.Encode(d1); err != nil || func() bool { b, _ := c.Encode(DeltaBatch{d1}); return !bytes.Equal(one, b) }() {
		t.Fatalf("a single delta does not encode as a batch of one (%v)", err)
	}
	// A single binary delta, as earlier versions wrote them ('d', then its fields).
	w := tablecodec.NewWriter(deltaKind, 40)
	writeDelta(w, d1)
	v, err := c.Decode(w.Bytes())
	if err != nil || !reflect.DeepEqual(v, DeltaBatch{d1}) {
		t.Fatalf("legacy binary delta: %+v, %v", v, err)
	}
	js, _ := json.Marshal(d2)
	if v, err := c.Decode(js); err != nil || !reflect.DeepEqual(v, DeltaBatch{d2}) {
		t.Fatalf("JSON delta %s decodes to %+v, %v", js, v, err)
	}
	v, err = c.Decode([]byte(`{"from":{"p":1,"o":7},"count":true,"tokens":9,"time":"2026-11-29T12:00:02Z","flagAt":"2026-11-29T12:00:02Z"}`))
	if ds, _ := v.(DeltaBatch); err != nil || len(ds) != 1 || ds[0].From != (Pos{1, 7}) || !ds[0].Count || ds[0].Flag || ds[0].Tokens != 9 || !ds[0].FlagAt.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("legacy delta: %+v, %v", v, err)
	}
	if _, err := c.Encode(Delta{}); err == nil {
		t.Fatal("encoding a Delta value (not a pointer) did not fail")
	}
	if _, err := c.Encode(DeltaBatch{}); err == nil {
		t.Fatal("encoding an empty batch did not fail")
	}
}

// BenchmarkEntryCodec is the feature sink's table work per record and per delta: decode and
// encode a request, a tenant and a model entry (with both windows and histograms, the largest),
// in the binary layout and, for comparison, in the JSON one earlier versions wrote.
func BenchmarkEntryCodec(b *testing.B) {
	w := busyWorld()
	var c EntryCodec
	for _, tc := range []struct {
		name string
		e    *Entry
	}{{"request", &Entry{Request: w.req["r011"]}}, {"tenant", &Entry{Tenant: w.tenants["t1"]}}, {"model", &Entry{Model: w.models["m1"]}}} {
		raw, err := c.Encode(tc.e)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(tc.name+"/decode", func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Decode(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tc.name+"/encode", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Encode(tc.e); err != nil {
					b.Fatal(err)
				}
			}
		})
		// The JSON layout earlier versions wrote, for comparison in the same run.
		js, _ := json.Marshal(tc.e)
		b.Run(tc.name+"/json-decode", func(b *testing.B) {
			b.SetBytes(int64(len(js)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Decode(js); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tc.name+"/json-encode", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := json.Marshal(tc.e); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
