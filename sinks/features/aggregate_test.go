package features

import (
	"testing"
	"time"

	"github.com/backflowhq/backflow/avro"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func gw(id, phase, tenant, model, verdict string, status int32) *avro.EnrichedRecord {
	return &avro.EnrichedRecord{RequestID: id, SourceTopic: "gateway-log",
		Gateway:    &avro.GatewayLog{RequestID: id, Phase: phase, TenantID: tenant, Model: model, EventTime: t0, StatusCode: status, LatencyMs: 40, PromptTokens: 3, CompletionTokens: 4},
		Moderation: avro.Moderation{Verdict: verdict}}
}

func inf(id, model string, risk float32, verdict string, cats ...string) *avro.EnrichedRecord {
	return &avro.EnrichedRecord{RequestID: id, SourceTopic: "model-inference-result",
		Inference:  &avro.InferenceResult{RequestID: id, Model: model, EventTime: t0.Add(time.Second), LatencyMs: 30, PromptTokens: 1, CompletionTokens: 1},
		Moderation: avro.Moderation{Verdict: verdict, RiskScore: risk, Categories: cats}}
}

// aggregate feeds the deltas of a sequence of (record, enriched position) through one request
// entry and the tenant/model entries, as the processor does.
type world struct {
	req     map[string]*RequestState
	tenants map[string]*TenantState
	models  map[string]*ModelState
}

func newWorld() *world {
	return &world{req: map[string]*RequestState{}, tenants: map[string]*TenantState{}, models: map[string]*ModelState{}}
}

func (w *world) apply(rec *avro.EnrichedRecord, at Pos) {
	st, deltas := ApplyRecord(w.req[rec.RequestID], rec, at)
	w.req[rec.RequestID] = st
	for k, d := range deltas {
		kind, id := splitKey(k)
		switch kind {
		case "tenant":
			w.tenants[id], _ = ApplyTenant(w.tenants[id], d)
		case "model":
			w.models[id], _ = ApplyModel(w.models[id], d)
		}
	}
}

func TestAggregateIdempotent(t *testing.T) {
	w := newWorld()
	// r1: REQUEST (flagged), inference, RESPONSE; r2: RESPONSE with a 500.
	w.apply(gw("r1", "REQUEST", "acme", "m1", "REVIEW", 0), Pos{0, 10})
	w.apply(inf("r1", "m1", 0.7, "ALLOW", "pii"), Pos{0, 11})
	w.apply(gw("r1", "RESPONSE", "acme", "m1", "ALLOW", 200), Pos{0, 12})
	w.apply(gw("r2", "RESPONSE", "acme", "m1", "ALLOW", 500), Pos{1, 5})

	// This group's own redelivery: the same enriched positions again.
	w.apply(gw("r1", "REQUEST", "acme", "m1", "REVIEW", 0), Pos{0, 10})
	w.apply(gw("r1", "RESPONSE", "acme", "m1", "ALLOW", 200), Pos{0, 12})
	w.apply(gw("r2", "RESPONSE", "acme", "m1", "ALLOW", 500), Pos{1, 5})
	// Ingest re-emitting after its crash, and a replay with a new epoch: new positions.
	w.apply(gw("r1", "RESPONSE", "acme", "m1", "ALLOW", 200), Pos{0, 40})
	rep := gw("r2", "RESPONSE", "acme", "m1", "BLOCK", 500)
	rep.Epoch = 1
	w.apply(rep, Pos{1, 90})
	w.apply(gw("r1", "REQUEST", "acme", "m1", "REVIEW", 0), Pos{2, 77})

	ten := w.tenants["acme"]
	if ten.RequestCount != 2 || ten.FlaggedCount != 2 || ten.Tokens != 14 {
		t.Fatalf("tenant = %+v, want 2 requests, 2 flagged, 14 tokens", ten)
	}
	m := w.models["m1"]
	if m.RequestCount != 2 || m.ErrorCount != 1 || m.LatencyMaxMs != 40 || m.LatencySumMs != 80 {
		t.Fatalf("model = %+v", m)
	}
	r1 := w.req["r1"]
	if r1.RiskScore != 0.7 || r1.Verdict != "REVIEW" || len(r1.Categories) != 1 || r1.TotalTokens != 7 || r1.LatencyMs != 40 || r1.Model != "m1" {
		t.Fatalf("r1 = %+v", r1)
	}
}

// A re-sent delta at or below the partition's mark is a no-op, a later one applies.
func TestTenantMark(t *testing.T) {
	st, ch := ApplyTenant(nil, &Delta{From: Pos{0, 5}, Count: true, Tokens: 2, EventTime: t0})
	if !ch || st.RequestCount != 1 {
		t.Fatal("first delta not applied")
	}
	if _, ch = ApplyTenant(st, &Delta{From: Pos{0, 5}, Count: true}); ch {
		t.Fatal("re-sent delta applied")
	}
	if _, ch = ApplyTenant(st, &Delta{From: Pos{1, 5}, Count: true}); !ch {
		t.Fatal("delta of another partition not applied")
	}
	if _, ch = ApplyTenant(st, &Delta{From: Pos{0, 6}, Flag: true}); !ch || st.RequestCount != 2 || st.FlaggedCount != 1 {
		t.Fatalf("state = %+v", st)
	}
}

// A flag seen before the tenant is known is forwarded once the tenant is known.
func TestFlagBeforeTenant(t *testing.T) {
	w := newWorld()
	w.apply(inf("r9", "m", 0.9, "BLOCK"), Pos{0, 1})
	w.apply(gw("r9", "RESPONSE", "t9", "m", "ALLOW", 200), Pos{0, 2})
	if ten := w.tenants["t9"]; ten.RequestCount != 1 || ten.FlaggedCount != 1 {
		t.Fatalf("tenant = %+v", ten)
	}
	op := TenantOp("backflow", "t9", w.tenants["t9"])
	if len(op.Fields) != 6 {
		t.Fatalf("tenant op fields = %d", len(op.Fields))
	}
}
