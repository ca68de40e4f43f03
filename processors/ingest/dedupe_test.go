package ingest

import (
	"testing"
	"time"
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
