package loadgen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/conf/conftest"
	"github.com/backflowhq/backflow/test/testenv"
)

func fakeRegistry(t *testing.T) *sr.Client {
	t.Helper()
	cl, _ := testenv.FakeRegistry(t)
	return cl
}

func plan(t *testing.T, cfg Config, reg avro.Registry, requests int) []Planned {
	t.Helper()
	g, err := NewGenerator(cfg, "run1", reg)
	if err != nil {
		t.Fatal(err)
	}
	g.now = func() time.Time { return time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC) }
	var out []Planned
	for i := 0; i < requests; i++ {
		p, err := g.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p...)
	}
	return append(out, g.Drain()...)
}

func TestGeneratorIsDeterministic(t *testing.T) {
	reg := fakeRegistry(t)
	cfg := Config{Seed: 7, PoisonRate: 0.1, DuplicateRate: 0.1}
	a, b := plan(t, cfg, reg, 200), plan(t, cfg, reg, 200)
	if len(a) != len(b) {
		t.Fatalf("%d vs %d records", len(a), len(b))
	}
	for i := range a {
		if a[i].Topic != b[i].Topic || !bytes.Equal(a[i].Value, b[i].Value) || a[i].Kind != b[i].Kind {
			t.Fatalf("record %d differs between two runs with one seed", i)
		}
	}
	c := plan(t, Config{Seed: 8, PoisonRate: 0.1, DuplicateRate: 0.1}, reg, 200)
	if bytes.Equal(a[1].Value, c[1].Value) {
		t.Fatal("another seed gave the same inference record")
	}
}

// With a simulated clock, request n's gateway REQUEST is at EventStart + (n-1)·EventStep and
// its RESPONSE follows by its latency, whatever the wall clock says.
func TestGeneratorEventClock(t *testing.T) {
	reg := fakeRegistry(t)
	start := time.Date(2026, 11, 28, 6, 0, 0, 0, time.UTC)
	recs := plan(t, Config{Seed: 3, EventStart: start, EventStep: 90 * time.Second, PoisonRate: None, DuplicateRate: None}, reg, 50)
	dec, err := avro.NewDecoder[avro.GatewayLog](reg, avro.GatewayLogSchema, avro.DecoderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range recs {
		if p.Phase == "" {
			continue
		}
		g, _, err := dec.Decode(context.Background(), p.Value)
		if err != nil {
			t.Fatal(err)
		}
		var seq int
		fmt.Sscanf(p.RequestID[len(p.RequestID)-8:], "%d", &seq)
		want := start.Add(time.Duration(seq-1) * 90 * time.Second)
		if p.Phase == avro.PhaseRequest && !g.EventTime.Equal(want) {
			t.Fatalf("%s REQUEST at %v, want %v", p.RequestID, g.EventTime, want)
		}
		if p.Phase == avro.PhaseResponse && !g.EventTime.Equal(want.Add(time.Duration(g.LatencyMs)*time.Millisecond)) {
			t.Fatalf("%s RESPONSE at %v, want %v + %d ms", p.RequestID, g.EventTime, want, g.LatencyMs)
		}
		n++
	}
	if n != 100 {
		t.Fatalf("%d gateway records, want 100", n)
	}
}

// TestGeneratorShape checks the traffic against its Config: three source records per request,
// duplicates re-send identical bytes of an earlier original, poison rotates over every kind,
// both schema versions appear, and planted words appear in about the configured share.
func TestGeneratorShape(t *testing.T) {
	reg := fakeRegistry(t)
	cfg := Config{Seed: 3, PoisonRate: 0.02, DuplicateRate: 0.05, CrossPartitionShare: 0.5, SensitiveShare: 0.2}
	const requests = 2000
	recs := plan(t, cfg, reg, requests)

	originals := map[string][]byte{} // topic/requestId/phase -> bytes
	kinds := map[Kind]int{}
	poison := map[PoisonKind]int{}
	versions := map[int]int{}
	sensitive, cross := 0, 0
	for _, r := range recs {
		kinds[r.Kind]++
		id := r.Topic + "/" + r.RequestID + "/" + r.Phase
		switch r.Kind {
		case KindOriginal:
			if _, seen := originals[id]; seen {
				t.Fatalf("original %s sent twice", id)
			}
			originals[id] = r.Value
			if r.Topic == cfg.withDefaults().InferenceTopic {
				versions[r.SchemaVersion]++
			}
			if r.Sensitive {
				sensitive++
			}
		case KindDuplicate:
			orig, ok := originals[id]
			if !ok || !bytes.Equal(orig, r.Value) {
				t.Fatalf("duplicate %s does not repeat an earlier original byte for byte", id)
			}
			if r.OtherPartition {
				cross++
			}
		case KindPoison:
			poison[r.Poison]++
		}
	}
	if kinds[KindOriginal] != 3*requests {
		t.Fatalf("%d originals, want %d", kinds[KindOriginal], 3*requests)
	}
	wantDup := 0.05 * 3 * requests
	if d := float64(kinds[KindDuplicate]); d < wantDup*0.8 || d > wantDup*1.2 {
		t.Fatalf("%v duplicates, want about %v", d, wantDup)
	}
	if cross == 0 || cross == kinds[KindDuplicate] {
		t.Fatalf("%d of %d duplicates cross partitions, want about half", cross, kinds[KindDuplicate])
	}
	if want := int(0.02 * 3 * requests); kinds[KindPoison] < want-1 || kinds[KindPoison] > want {
		t.Fatalf("%d poison, want %d", kinds[KindPoison], want)
	}
	for _, k := range AllPoisonKinds {
		if poison[k] < kinds[KindPoison]/len(AllPoisonKinds) {
			t.Errorf("poison kind %s: %d records, want an even share of %d", k, poison[k], kinds[KindPoison])
		}
	}
	if versions[1] < requests/3 || versions[2] < requests/3 {
		t.Fatalf("inference versions %v, want a mix", versions)
	}
	if s := float64(sensitive) / float64(3*requests); s < 0.15 || s > 0.25 {
		t.Fatalf("sensitive share %.3f, want about 0.2", s)
	}
}

// TestPoisonDecodesToItsClass: every poison kind fails the real decoder with the class the
// manifest promises, and every original decodes with its requestId.
func TestPoisonDecodesToItsClass(t *testing.T) {
	reg := fakeRegistry(t)
	cfg := Config{Seed: 5, PoisonRate: 0.3}
	recs := plan(t, cfg, reg, 60)
	now := func() time.Time { return time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC) }
	infDec, _ := avro.NewDecoder[avro.InferenceResult](reg, avro.InferenceResultSchema, avro.DecoderConfig{Now: now})
	gwDec, _ := avro.NewDecoder[avro.GatewayLog](reg, avro.GatewayLogSchema, avro.DecoderConfig{Now: now})
	seen := map[PoisonKind]bool{}
	for _, r := range recs {
		var reqID string
		var err error
		if r.Topic == avro.TopicInferenceResult {
			var v avro.InferenceResult
			v, _, err = infDec.Decode(context.Background(), r.Value)
			reqID = v.RequestID
		} else {
			var v avro.GatewayLog
			v, _, err = gwDec.Decode(context.Background(), r.Value)
			reqID = v.RequestID
		}
		if r.Kind != KindPoison {
			if err != nil || reqID != r.RequestID {
				t.Fatalf("%s %s: decoded requestId %q, err %v", r.Kind, r.RequestID, reqID, err)
			}
			continue
		}
		seen[r.Poison] = true
		var de *avro.DecodeError
		if !errors.As(err, &de) || de.ErrorClass() != r.Poison.Class() {
			t.Fatalf("poison %s decoded with err %v, want class %s", r.Poison, err, r.Poison.Class())
		}
	}
	if len(seen) != len(AllPoisonKinds) {
		t.Fatalf("saw poison kinds %v, want all %d", seen, len(AllPoisonKinds))
	}
}

func TestConfigValidate(t *testing.T) {
	conftest.Validate(t, []conftest.Case[Config]{
		{Name: "defaults", Config: Config{}},
		{Name: "same topics", Config: Config{InferenceTopic: "a", GatewayTopic: "a"}, WantErr: "both"},
		{Name: "share above one", Config: Config{DuplicateRate: 1.5}, WantErr: "duplicate rate"},
		{Name: "zipf too small", Config: Config{ZipfS: 0.9}, WantErr: "zipf"},
		{Name: "unknown poison", Config: Config{PoisonKinds: []PoisonKind{"nope"}}, WantErr: "poison kind"},
		{Name: "negative rate", Config: Config{Rate: -1}, WantErr: "rate"},
		{Name: "negative event step", Config: Config{EventStart: time.Now(), EventStep: -time.Second}, WantErr: "event step"},
		{Name: "event step without start", Config: Config{EventStep: time.Second}, WantErr: "event start"},
	})
	if _, err := ParsePoisonKinds("bad_magic, oversized"); err != nil {
		t.Fatal(err)
	}
	if _, err := ParsePoisonKinds("bad_magic,nope"); err == nil {
		t.Fatal("unknown kind accepted")
	}
}

func TestManifestRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	mw, err := newManifestWriter(&buf, Header{RunID: "r", Seed: 9, InferenceTopic: "i", GatewayTopic: "g"})
	if err != nil {
		t.Fatal(err)
	}
	in := []Entry{
		{Topic: "g", Partition: 1, Offset: 5, RequestID: "r-1", Phase: "REQUEST", Kind: KindOriginal, SchemaVersion: 1},
		{Topic: "i", Partition: 0, Offset: 9, RequestID: "r-p1", Kind: KindPoison, Poison: "garbage", Class: "corrupt"},
	}
	for _, e := range in {
		if err := mw.add(e); err != nil {
			t.Fatal(err)
		}
	}
	mw.flush()
	m, err := ParseManifest(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.RunID != "r" || m.Header.Seed != 9 || len(m.Entries) != 2 || m.Entries[1] != in[1] {
		t.Fatalf("parsed %+v", m)
	}
	if loc := m.ByLocation()[Location{"g", 1, 5}]; loc.RequestID != "r-1" || !loc.Valid() {
		t.Fatalf("by location: %+v", loc)
	}
	if _, err := ParseManifest(strings.NewReader(`{"topic":"x"}` + "\n")); err == nil {
		t.Fatal("manifest without header accepted")
	}
}

// TestBackfill: event times start Backfill before the clock and reach it at the last request,
// by count, or by elapsed time for a run bounded by duration.
func TestBackfill(t *testing.T) {
	reg := fakeRegistry(t)
	clock := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	g, err := NewGenerator(Config{Requests: 5, Backfill: 100 * time.Second}, "run1", reg)
	if err != nil {
		t.Fatal(err)
	}
	g.now = func() time.Time { return clock }
	for i, want := range []time.Duration{-100, -75, -50, -25, 0} {
		g.seq = i + 1
		if got := g.eventClock().Sub(clock); got != want*time.Second {
			t.Errorf("request %d: event clock %v from the clock, want %v", i+1, got, want*time.Second)
		}
	}
	g, err = NewGenerator(Config{Duration: time.Minute, Backfill: time.Hour}, "run1", reg)
	if err != nil {
		t.Fatal(err)
	}
	now := clock
	g.now = func() time.Time { return now }
	for _, c := range []struct{ elapsed, want time.Duration }{{0, -time.Hour}, {30 * time.Second, -30 * time.Minute}, {time.Minute, 0}, {2 * time.Minute, 0}} {
		now = clock.Add(c.elapsed)
		g.seq++
		if got := g.eventClock().Sub(now); got != c.want {
			t.Errorf("%v into the run: event clock %v from the clock, want %v", c.elapsed, got, c.want)
		}
	}
	if err := (Config{Backfill: 25 * time.Hour}).Validate(); err == nil || !strings.Contains(err.Error(), "backfill") {
		t.Fatalf("25h backfill: %v", err)
	}
}
