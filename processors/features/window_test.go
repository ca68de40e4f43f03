package features

import (
	"fmt"
	"github.com/backflowhq/backflow/internal/feast"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

func TestWindowBounds(t *testing.T) {
	h, d := Windows[0], Windows[1]
	asOf := time.Date(2026, 11, 29, 12, 7, 30, 0, time.UTC)
	if got := time.Unix(h.From(asOf), 0).UTC(); !got.Equal(time.Date(2026, 11, 29, 11, 10, 0, 0, time.UTC)) {
		t.Fatalf("1h window from %v", got)
	}
	if got := time.Unix(d.From(asOf), 0).UTC(); !got.Equal(time.Date(2026, 11, 28, 13, 0, 0, 0, time.UTC)) {
		t.Fatalf("24h window from %v", got)
	}
	if b := h.BucketStart(asOf); b != time.Date(2026, 11, 29, 12, 5, 0, 0, time.UTC).Unix() {
		t.Fatalf("bucket %d", b)
	}
}

// Requests are counted in the windows by their RESPONSE's event time, as of the tenant's newest
// event time; an event older than a window counts in the totals only.
func TestWindowsByEventTime(t *testing.T) {
	w := newWorld()
	last := time.Date(2026, 11, 29, 12, 7, 30, 0, time.UTC)
	times := []time.Duration{0, 2 * time.Minute, 56 * time.Minute, 58 * time.Minute, 3 * time.Hour, 23*time.Hour + 5*time.Minute, 25 * time.Hour, 48 * time.Hour}
	// The 1h window as of 12:07:30 starts at 11:10: 0, 2 and 56 min before are in (11:11:30),
	// 58 min before (11:09:30) is not. The 24h window starts at 13:00 the day before: 23h05m
	// before (13:02:30) is in, 25 h before is not.
	for i, ago := range times {
		r := gwu(fmt.Sprintf("r%d", i), "RESPONSE", "t", "u", "m", "ALLOW", 200)
		r.Gateway.EventTime = last.Add(-ago)
		w.apply(r, Pos{0, int64(i + 1)}) // newest first: every later event is late
	}
	ten := w.tenants["t"]
	if !ten.LastSeen.Equal(last) || ten.RequestCount != 8 {
		t.Fatalf("tenant %+v", ten)
	}
	b1, b24 := ten.Win.sum(Windows[0], ten.LastSeen), ten.Win.sum(Windows[1], ten.LastSeen)
	if b1.Requests != 3 || b24.Requests != 6 || b24.Tokens != 6*7 {
		t.Fatalf("windows: 1h %+v, 24h %+v; want 3 and 6 requests", b1, b24)
	}
	if n := len(ten.Win["24h"]); n > 24 {
		t.Fatalf("24h window keeps %d buckets", n)
	}
	fields := TenantOp("backflow", "t", ten).Row()
	if got := fields[feast.FieldKey(TenantView, "request_count_1h")]; !reflect.DeepEqual(got, feast.Int64Value(3)) {
		t.Fatalf("request_count_1h field %x", got)
	}
}

// The windowed values do not depend on the order deltas arrive in, and re-sent deltas change
// nothing: many shuffles of the same deltas, each sent twice, give the same rows.
func TestWindowsOrderIndependent(t *testing.T) {
	base := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	var deltas []*Delta
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 300; i++ {
		at := base.Add(time.Duration(rng.IntN(30*3600)) * time.Second)
		d := &Delta{From: Pos{int32(i % 3), int64(i)}, Count: true, Tokens: int64(rng.IntN(100)), EventTime: at,
			LatencyMs: int64(rng.IntN(3000)), Error: rng.IntN(10) == 0}
		if rng.IntN(4) == 0 {
			d.Flag, d.FlagAt = true, at
		}
		deltas = append(deltas, d)
	}
	var wantT, wantM map[string]any
	for round := 0; round < 20; round++ {
		// Per partition the offsets stay in order (the loopback keeps it); partitions
		// interleave at random.
		var order []int
		next := [3]int{0, 1, 2} // next delta index of each partition (i % 3 == partition)
		for len(order) < len(deltas) {
			p := rng.IntN(3)
			if next[p] < len(deltas) {
				order = append(order, next[p])
				next[p] += 3
			}
		}
		var ten *TenantState
		var mod *ModelState
		for _, i := range order {
			for range 2 {
				ten, _ = ApplyTenant(ten, deltas[i])
				mod, _ = ApplyModel(mod, deltas[i])
			}
		}
		gotT, gotM := TenantOp("p", "t", ten).Row(), ModelOp("p", "m", mod).Row()
		if round == 0 {
			wantT, wantM = gotT, gotM
			b := ten.Win.sum(Windows[1], ten.LastSeen)
			t.Logf("300 deltas over 30 h: all-time %d requests, 24h %d (%d flagged), 1h %d", ten.RequestCount, b.Requests, b.Flagged, ten.Win.sum(Windows[0], ten.LastSeen).Requests)
			if b.Requests == 0 || b.Requests == ten.RequestCount {
				t.Fatalf("24h window holds %d of %d: the test does not discriminate", b.Requests, ten.RequestCount)
			}
			continue
		}
		if !reflect.DeepEqual(gotT, wantT) || !reflect.DeepEqual(gotM, wantM) {
			t.Fatalf("round %d: rows differ with another delta order", round)
		}
	}
}

// A flag is counted in the windows at the request's RESPONSE time, once, whichever of the flag
// and the RESPONSE comes first; the all-time total counts it as soon as it is known.
func TestWindowFlagAtResponseTime(t *testing.T) {
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	w := newWorld()
	// r1: flagged REQUEST first, then RESPONSE. r2: RESPONSE first, then a flagged inference.
	req := gwu("r1", "REQUEST", "t", "u", "m", "BLOCK", 0)
	w.apply(req, Pos{0, 1})
	if ten := w.tenants["t"]; ten.FlaggedCount != 1 || ten.Win.sum(Windows[0], ten.LastSeen).Flagged != 0 {
		t.Fatalf("flag before RESPONSE: %+v", ten)
	}
	r1 := gwu("r1", "RESPONSE", "t", "u", "m", "ALLOW", 200)
	r1.Gateway.EventTime = at
	w.apply(r1, Pos{0, 2})
	w.apply(r1, Pos{0, 2}) // redelivered
	r2 := gwu("r2", "RESPONSE", "t", "u", "m", "ALLOW", 200)
	r2.Gateway.EventTime = at.Add(time.Minute)
	w.apply(r2, Pos{0, 3})
	w.apply(inf("r2", "m", 0.9, "REVIEW"), Pos{0, 4})
	w.apply(inf("r2", "m", 0.9, "REVIEW"), Pos{0, 4}) // redelivered
	w.apply(inf("r2", "m", 0.9, "REVIEW"), Pos{1, 9}) // re-emitted by ingest at another position
	for name, st := range map[string]*TenantState{"tenant": w.tenants["t"], "user": (*TenantState)(w.users[[2]string{"t", "u"}])} {
		b := st.Win.sum(Windows[0], st.LastSeen)
		if st.FlaggedCount != 2 || st.RequestCount != 2 || b.Flagged != 2 || b.Requests != 2 {
			t.Fatalf("%s: all-time %d/%d, 1h %d/%d; want 2/2 each", name, st.FlaggedCount, st.RequestCount, b.Flagged, b.Requests)
		}
	}
	if bs := w.tenants["t"].Win["1h"]; len(bs) != 1 || bs[0].Start != at.Unix() {
		t.Fatalf("1h buckets %+v, want one at %v", bs, at)
	}
}

func TestHistQuantile(t *testing.T) {
	var h Hist
	for _, v := range []int64{5, 30, 30, 120, 180, 390, 410, 420, 900, 2500} {
		h.add(v)
	}
	// Ranks: p95 of 10 is the 10th smallest (2500: bin <= 3000), p50 the 5th (180: bin <= 200).
	if q := h.Quantile(0.95, 2500); q != 2500 {
		t.Fatalf("p95 = %d, want 2500 (capped at the max)", q)
	}
	if q := h.Quantile(0.5, 2500); q != 200 {
		t.Fatalf("p50 = %d, want 200", q)
	}
	if q := h.Quantile(0.9, 2500); q != 1000 {
		t.Fatalf("p90 = %d, want 1000", q)
	}
	var big Hist
	big.add(90000)
	if q := big.Quantile(0.95, 90000); q != 90000 || len(big) != len(LatencyBoundsMs)+1 {
		t.Fatalf("above the last bound: p95 %d, %d bins", q, len(big))
	}
	if q := (Hist{}).Quantile(0.95, 0); q != 0 {
		t.Fatalf("empty p95 = %d", q)
	}
}

// Model windows: errors and latency per window, p95 from the histogram.
func TestModelWindows(t *testing.T) {
	last := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	var m *ModelState
	for i, c := range []struct {
		ago     time.Duration
		latency int64
		err     bool
	}{{0, 100, false}, {time.Minute, 300, true}, {10 * time.Minute, 2000, false}, {2 * time.Hour, 50, true}, {30 * time.Hour, 9000, true}} {
		m, _ = ApplyModel(m, &Delta{From: Pos{0, int64(i)}, Count: true, Error: c.err, LatencyMs: c.latency, EventTime: last.Add(-c.ago)})
	}
	b1, b24 := m.Win.sum(Windows[0], m.LastSeen), m.Win.sum(Windows[1], m.LastSeen)
	if b1.Requests != 3 || b1.Errors != 1 || b1.LatencyMax != 2000 || b1.Hist.Quantile(0.95, b1.LatencyMax) != 2000 {
		t.Fatalf("1h %+v", b1)
	}
	if b24.Requests != 4 || b24.Errors != 2 || b24.LatencySum != 2450 {
		t.Fatalf("24h %+v", b24)
	}
	if m.RequestCount != 5 || m.LatencyHist.Quantile(0.95, m.LatencyMaxMs) != 9000 {
		t.Fatalf("all-time %+v", m)
	}
	if n := len(ModelOp("p", "m", m).Row()); n != 6+2*5+1 {
		t.Fatalf("model op has %d fields", n)
	}
}
