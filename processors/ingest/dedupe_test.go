package ingest

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/backflowhq/backflow/internal/tablecodec"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	window := 7 * 24 * time.Hour
	a := Origin{"gateway-log", 0, 10}
	b := Origin{"gateway-log", 2, 44} // same requestId, another partition
	claimed := func(o Origin, epoch int32, age time.Duration) *State {
		return &State{Slots: map[string]Claim{"gateway-log/REQUEST": {Origin: o, Epoch: epoch, Seen: now.Add(-age).UnixMilli()}}}
	}
	tests := []struct {
		name  string
		st    *State
		slot  string
		o     Origin
		epoch int32
		want  Decision
	}{
		{"first sight claims", nil, "gateway-log/REQUEST", a, 0, DecideClaim},
		{"same record again is a redelivery", claimed(a, 0, time.Minute), "gateway-log/REQUEST", a, 0, DecideRedelivery},
		{"another record with the key is a duplicate", claimed(a, 0, time.Minute), "gateway-log/REQUEST", b, 0, DecideDuplicate},
		{"another slot of the key is not a duplicate", claimed(a, 0, time.Minute), "gateway-log/RESPONSE", b, 0, DecideClaim},
		{"claim from an older epoch does not count", claimed(a, 0, time.Minute), "gateway-log/REQUEST", b, 1, DecideClaim},
		{"replay of the claimer in a new epoch is a redelivery", claimed(a, 0, time.Minute), "gateway-log/REQUEST", a, 1, DecideRedelivery},
		{"claim older than the window expired", claimed(a, 0, window+time.Second), "gateway-log/REQUEST", b, 0, DecideClaim},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, next := Decide(tt.st, tt.slot, tt.o, tt.epoch, now, window)
			if got != tt.want {
				t.Fatalf("decision %v, want %v", got, tt.want)
			}
			renew := got == DecideRedelivery && tt.st.Slots[tt.slot].Epoch < tt.epoch
			if (next != nil) != (got == DecideClaim || renew) {
				t.Fatalf("state to store %v for decision %v", next, got)
			}
			if next != nil && (next.Slots[tt.slot].Origin != tt.o || next.Slots[tt.slot].Epoch != tt.epoch) {
				t.Fatalf("claim of slot %s is %+v, want origin %+v", tt.slot, next.Slots[tt.slot], tt.o)
			}
		})
	}
	// Regression: a replay in a new epoch re-read the claimer (a redelivery) without moving its
	// claim to the new epoch, so the duplicate read after it in the same replay found an
	// old-epoch claim and was emitted as well.
	_, renewed := Decide(claimed(a, 0, time.Minute), "gateway-log/REQUEST", a, 1, now, window)
	if d, _ := Decide(renewed, "gateway-log/REQUEST", b, 1, now, window); renewed == nil || d != DecideDuplicate {
		t.Fatalf("duplicate after the claimer's replay in epoch 1: %v (renewed state %+v), want duplicate", d, renewed)
	}
	// Claiming prunes the key's expired slots and keeps live ones.
	st := &State{Slots: map[string]Claim{
		"old":  {Origin: a, Seen: now.Add(-window - time.Hour).UnixMilli()},
		"live": {Origin: b, Seen: now.Add(-time.Hour).UnixMilli()},
	}}
	_, next := Decide(st, "new", a, 0, now, window)
	if _, ok := next.Slots["old"]; ok || len(next.Slots) != 2 {
		t.Fatalf("after claim: %+v", next.Slots)
	}
	if Expire(st, now, window) == nil || len(Expire(st, now, window).Slots) != 1 || Expire(st, now.Add(window), window) != nil {
		t.Fatal("Expire did not keep exactly the live slots")
	}
	b2, err := StateCodec{}.Encode(next)
	if err != nil {
		t.Fatal(err)
	}
	back, err := StateCodec{}.Decode(b2)
	if err != nil || back.(*State).Slots["new"] != next.Slots["new"] {
		t.Fatalf("codec round trip: %v %v", back, err)
	}
}

// TestStateCodec: the binary layout round-trips every field; a JSON value as earlier versions
// wrote it (a running group's table before the upgrade) still decodes, and is written back in
// binary; a truncated, padded or foreign value is an error, never a wrong state.
func TestStateCodec(t *testing.T) {
	st := &State{Slots: map[string]Claim{
		"gateway-log/REQUEST":    {Origin: Origin{"gateway-log", 2, 1 << 40}, Epoch: 3, Seen: 1764590000123},
		"model-inference-result": {Origin: Origin{"model-inference-result", 0, 0}, Epoch: 0, Seen: -5},
		"gateway-log/RESPONSE":   {Origin: Origin{"gateway-log", -1, -7}, Epoch: 1<<31 - 1, Seen: 0},
	}}
	var c StateCodec
	b, err := c.Encode(st)
	if err != nil {
		t.Fatal(err)
	}
	if b[0] != tablecodec.FormatV1 {
		t.Fatalf("first byte %#x, want the binary format %#x", b[0], tablecodec.FormatV1)
	}
	again, _ := c.Encode(st)
	if !bytes.Equal(b, again) {
		t.Fatal("two encodings of one state differ (slot order must not depend on map order)")
	}
	back, err := c.Decode(b)
	if err != nil || !reflect.DeepEqual(back, st) {
		t.Fatalf("round trip: %+v, %v; want %+v", back, err, st)
	}
	if js, _ := json.Marshal(st); len(b) >= len(js) {
		t.Fatalf("binary value %d bytes, JSON %d: not compact", len(b), len(js))
	}

	legacy := []byte(`{"slots":{"gateway-log/REQUEST":{"origin":{"t":"gateway-log","p":1,"o":100},"epoch":2,"seen":1764590000000},"model-inference-result":{"origin":{"t":"model-inference-result","p":1,"o":50},"epoch":2,"seen":1764590000001}}}`)
	want := &State{Slots: map[string]Claim{
		"gateway-log/REQUEST":    {Origin: Origin{"gateway-log", 1, 100}, Epoch: 2, Seen: 1764590000000},
		"model-inference-result": {Origin: Origin{"model-inference-result", 1, 50}, Epoch: 2, Seen: 1764590000001},
	}}
	got, err := c.Decode(legacy)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("legacy JSON value: %+v, %v; want %+v", got, err, want)
	}
	// What Decide makes of a legacy value is written back in binary and reads the same.
	now := time.UnixMilli(1764590000000 + 1000)
	d, next := Decide(got.(*State), "gateway-log/RESPONSE", Origin{"gateway-log", 1, 101}, 2, now, 7*24*time.Hour)
	if d != DecideClaim {
		t.Fatalf("decision on a legacy value: %v, want claim", d)
	}
	nb, _ := c.Encode(next)
	if nb[0] != tablecodec.FormatV1 {
		t.Fatal("a legacy key is not rewritten in binary")
	}
	if rb, err := c.Decode(nb); err != nil || !reflect.DeepEqual(rb, next) || len(next.Slots) != 3 {
		t.Fatalf("rewritten legacy key: %+v, %v; want %+v", rb, err, next)
	}
	// A JSON value of the old codec's own making decodes too.
	js, _ := json.Marshal(st)
	if got, err := c.Decode(js); err != nil || !reflect.DeepEqual(got, st) {
		t.Fatalf("json.Marshal value: %+v, %v", got, err)
	}

	for i := 0; i < len(b); i++ {
		if _, err := c.Decode(b[:i]); err == nil {
			t.Fatalf("a value cut to %d of %d bytes decoded", i, len(b))
		}
	}
	if _, err := c.Decode(append(append([]byte{}, b...), 0)); !errors.Is(err, tablecodec.ErrCorrupt) {
		t.Fatalf("a value with a byte left over: %v, want ErrCorrupt", err)
	}
	if _, err := c.Decode([]byte{0x02, 's', 0}); !errors.Is(err, tablecodec.ErrCorrupt) {
		t.Fatalf("an unknown format byte: %v, want ErrCorrupt", err)
	}
	if _, err := c.Decode([]byte{tablecodec.FormatV1, 'e', 0}); !errors.Is(err, tablecodec.ErrCorrupt) {
		t.Fatalf("another codec's kind: %v, want ErrCorrupt", err)
	}
	if _, err := c.Decode([]byte(`{"slots":`)); err == nil {
		t.Fatal("truncated JSON decoded")
	}
	if _, err := c.Encode(State{}); err == nil {
		t.Fatal("encoding a State value (not a pointer) did not fail")
	}
}

// TestStateCodecLayouts: a request's whole state (three slots of the default topics) takes 32
// bytes where the layout written before (kind 's') took 151, decoded from the older layouts as
// written; names outside the well-known ones, an origin topic other than the slot's, and
// epochs and offsets that change from slot to slot round-trip too.
func TestStateCodecLayouts(t *testing.T) {
	var c StateCodec
	st := &State{Slots: map[string]Claim{
		"gateway-log/REQUEST":    {Origin: Origin{"gateway-log", 3, 123456789}, Epoch: 2, Seen: 1764590000123},
		"gateway-log/RESPONSE":   {Origin: Origin{"gateway-log", 3, 123457000}, Epoch: 2, Seen: 1764590001500},
		"model-inference-result": {Origin: Origin{"model-inference-result", 7, 987654321}, Epoch: 2, Seen: 1764590000900},
	}}
	// As the previous version's codec wrote st.
	v1 := []byte("\x01s\x03\x13gateway-log/REQUEST\vgateway-log\x06\xaa\xb4\xdeu\x04\xf6ߔ\x9c\xdbf\x14gateway-log/RESPONSE\vgateway-log\x06з\xdeu\x04\xb8\xf5\x94\x9c\xdbf\x16model-inference-result\x16model-inference-result\x0e\xe2\xa2\xf3\xad\a\x04\x88씜\xdbf")
	if len(v1) != 151 {
		t.Fatalf("the kind-s value is %d bytes, want 151", len(v1))
	}
	if got, err := c.Decode(v1); err != nil || !reflect.DeepEqual(got, st) {
		t.Fatalf("kind-s value: %+v, %v; want %+v", got, err, st)
	}
	b := must(c.Encode(st))
	// 2 header + 1 count + 6 base seen; REQUEST: lead, partition, offset (4), epoch, seen
	// delta (1); RESPONSE: lead, partition, offset delta (2), seen delta (2); inference: lead,
	// partition, offset (5), seen delta (2).
	if len(b) != 32 || b[1] != 'c' {
		t.Fatalf("encoded %d bytes of kind %q, want 32 of kind 'c': %q", len(b), b[1], b)
	}
	if got, err := c.Decode(b); err != nil || !reflect.DeepEqual(got, st) {
		t.Fatalf("round trip: %+v, %v; want %+v", got, err, st)
	}
	// A request's first record (one slot), as Decide writes it.
	_, one := Decide(nil, "gateway-log/REQUEST", Origin{"gateway-log", 3, 123456789}, 0, time.UnixMilli(1764590000123), 7*24*time.Hour)
	if b := must(c.Encode(one)); len(b) != 16 {
		t.Fatalf("one slot: %d bytes, want 16: %q", len(b), b)
	}

	odd := []*State{
		{Slots: map[string]Claim{}},
		{Slots: map[string]Claim{
			"clicks/OPEN":         {Origin: Origin{"clicks", 0, 5}, Epoch: 0, Seen: 10},
			"clicks/SHUT":         {Origin: Origin{"clicks-mirror", 0, 1 << 50}, Epoch: 9, Seen: 9},
			"gateway-log":         {Origin: Origin{"gateway-log/REQUEST", -3, -1 << 62}, Epoch: -1, Seen: -1 << 40},
			"model-inf/x/":        {Origin: Origin{"", 1<<31 - 1, 1<<63 - 1}, Epoch: 1<<31 - 1, Seen: 1<<62 + 3},
			"gateway-log/REQUEST": {Origin: Origin{"gateway-log", 3, -(1 << 63)}, Epoch: 1<<31 - 1, Seen: 0},
		}},
	}
	for _, st := range odd {
		b := must(c.Encode(st))
		if got, err := c.Decode(b); err != nil || !reflect.DeepEqual(got, st) {
			t.Fatalf("round trip: %+v, %v; want %+v", got, err, st)
		}
	}
	// The encoder picks the shorter of an offset and its delta by their varint lengths.
	var vb [binary.MaxVarintLen64]byte
	for _, v := range []int64{0, 1, -1, 63, 64, -64, -65, 8191, 8192, 1 << 40, -(1 << 40), math.MaxInt64, math.MinInt64} {
		if got, want := varintLen(v), binary.PutVarint(vb[:], v); got != want {
			t.Fatalf("varintLen(%d) = %d, want %d", v, got, want)
		}
	}
	// A slot code this version does not know is an error, not a name made up.
	bad := append([]byte{}, b...)
	bad[9] = (bad[9] &^ slotNameMask) | 30
	if _, err := c.Decode(bad); !errors.Is(err, tablecodec.ErrCorrupt) {
		t.Fatalf("unknown slot code: %v, want ErrCorrupt", err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
