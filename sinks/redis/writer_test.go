package redis

import (
	"maps"
	"testing"
	"time"

	"github.com/backflowhq/backflow/internal/feast"
)

// TestCoalesce: a pipeline's ops become one write per key that leaves Redis as sending them in
// order would. Row ops replace the key's earlier row op, plain ops merge field by field, the
// last positive TTL wins, and keys keep the order they first appeared in.
func TestCoalesce(t *testing.T) {
	// Row ops as the feature processor makes them: each builds its key's whole row.
	ten := func(n int64) feast.Op {
		return feast.Op{Key: "tenant-t1", Build: func(dst []any) []any {
			return append(dst, "request_count", feast.Int64Value(n), "_ts", "t0")
		}}
	}
	req := feast.Op{Key: "request-r1", TTL: time.Hour, Build: func(dst []any) []any {
		return append(dst, "verdict", feast.StringValue("ALLOW"), "_ts", "t0")
	}}
	plainKey := "tenant-x"
	batch := []job{
		{ops: []feast.Op{ten(1)}},
		{ops: []feast.Op{ten(2), req}},
		{ops: []feast.Op{{Key: plainKey, Fields: map[string]any{"a": "1", "b": "1"}}}},
		{ops: []feast.Op{{Key: plainKey, Fields: map[string]any{"b": "2"}, TTL: time.Minute}}},
		{ops: nil}, // a record that writes nothing
		{ops: []feast.Op{ten(3)}},
		// A plain op on a row op's key merges with it instead of replacing it.
		{ops: []feast.Op{{Key: req.Key, Fields: map[string]any{"extra": "e"}}}},
	}
	writes, total := coalesce(batch)
	if total != 7 {
		t.Fatalf("total = %d, want 7", total)
	}
	if len(writes) != 3 {
		t.Fatalf("%d writes, want 3 (one per key)", len(writes))
	}
	got := map[string]map[string]any{}
	for _, w := range writes {
		got[w.Key] = pairs(t, w.Args)
	}
	if writes[0].Key != ten(0).Key || writes[1].Key != req.Key || writes[2].Key != plainKey {
		t.Fatalf("keys out of first-seen order: %q %q %q", writes[0].Key, writes[1].Key, writes[2].Key)
	}
	if want := ten(3).Row(); !maps.EqualFunc(got[writes[0].Key], want, eqValue) {
		t.Fatalf("tenant row is not the last update's:\n got %v\nwant %v", got[writes[0].Key], want)
	}
	wantReq := maps.Clone(req.Row())
	wantReq["extra"] = "e"
	if !maps.EqualFunc(got[req.Key], wantReq, eqValue) || writes[1].TTL != time.Hour {
		t.Fatalf("request row %v ttl %v; want %v ttl 1h", got[req.Key], writes[1].TTL, wantReq)
	}
	if want := map[string]any{"a": "1", "b": "2"}; !maps.EqualFunc(got[plainKey], want, eqValue) || writes[2].TTL != time.Minute {
		t.Fatalf("plain key %v ttl %v; want %v ttl 1m", got[plainKey], writes[2].TTL, want)
	}
	// The caller's maps are not changed by merging.
	if v := batch[2].ops[0].Fields["b"]; v != "1" {
		t.Fatalf("first op's fields changed: b = %v", v)
	}
}

func pairs(t *testing.T, args []any) map[string]any {
	t.Helper()
	if len(args)%2 != 0 {
		t.Fatalf("odd argument count %d", len(args))
	}
	m := map[string]any{}
	for i := 0; i < len(args); i += 2 {
		m[args[i].(string)] = args[i+1]
	}
	if len(m) != len(args)/2 {
		t.Fatalf("a field appears twice in %v", args)
	}
	return m
}

func eqValue(a, b any) bool {
	ab, aok := a.([]byte)
	bb, bok := b.([]byte)
	if aok && bok {
		return string(ab) == string(bb)
	}
	return a == b
}
