package features

import (
	"testing"
	"time"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/feast"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func gw(id, phase, tenant, model, verdict string, status int32) *avro.EnrichedRecord {
	return gwu(id, phase, tenant, "", model, verdict, status)
}

// gwu is gw with a userId.
func gwu(id, phase, tenant, user, model, verdict string, status int32) *avro.EnrichedRecord {
	return &avro.EnrichedRecord{RequestID: id, SourceTopic: "gateway-log",
		Gateway:    &avro.GatewayLog{RequestID: id, Phase: phase, TenantID: tenant, UserID: user, Model: model, EventTime: t0, StatusCode: status, LatencyMs: 40, PromptTokens: 3, CompletionTokens: 4},
		Moderation: avro.Moderation{Verdict: verdict}}
}

func inf(id, model string, risk float32, verdict string, cats ...string) *avro.EnrichedRecord {
	return &avro.EnrichedRecord{RequestID: id, SourceTopic: "model-inference-result",
		Inference:  &avro.InferenceResult{RequestID: id, Model: model, EventTime: t0.Add(time.Second), LatencyMs: 30, PromptTokens: 1, CompletionTokens: 1},
		Moderation: avro.Moderation{Verdict: verdict, RiskScore: risk, Categories: cats}}
}

// aggregate feeds the deltas of a sequence of (record, enriched position) through one request
// entry and the tenant/user/model entries, as the processor does.
type world struct {
	req     map[string]*RequestState
	tenants map[string]*TenantState
	users   map[[2]string]*UserState // (tenant, user)
	models  map[string]*ModelState
}

func newWorld() *world {
	return &world{req: map[string]*RequestState{}, tenants: map[string]*TenantState{}, users: map[[2]string]*UserState{}, models: map[string]*ModelState{}}
}

func (w *world) apply(rec *avro.EnrichedRecord, at Pos) {
	st, deltas := ApplyRecord(w.req[rec.RequestID], rec, at)
	w.req[rec.RequestID] = st
	for k, d := range deltas {
		kind, id := splitKey(k)
		switch kind {
		case "tenant":
			w.tenants[id], _ = ApplyTenant(w.tenants[id], d)
		case "user":
			tenant, user, ok := splitUser(id)
			if !ok {
				panic("bad user key " + k)
			}
			u := [2]string{tenant, user}
			w.users[u], _ = ApplyUser(w.users[u], d)
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
	if len(op.Row()) != 14 { // 5 all-time + 2 windows × 4 + _ts
		t.Fatalf("tenant op fields = %d", len(op.Row()))
	}
}

// Per-user aggregates: the same idempotence as the tenant's, with users scoped by tenant.
func TestUserAggregateIdempotent(t *testing.T) {
	w := newWorld()
	// r1 (acme/u1): REQUEST (flagged), inference, RESPONSE. r2 (acme/u1): RESPONSE with a 500.
	// r3 (globex/u1, the same userId in another tenant): REQUEST, RESPONSE.
	w.apply(gwu("r1", "REQUEST", "acme", "u1", "m1", "REVIEW", 0), Pos{0, 10})
	w.apply(inf("r1", "m1", 0.7, "ALLOW", "pii"), Pos{0, 11})
	w.apply(gwu("r1", "RESPONSE", "acme", "u1", "m1", "ALLOW", 200), Pos{0, 12})
	w.apply(gwu("r2", "RESPONSE", "acme", "u1", "m1", "ALLOW", 500), Pos{1, 5})
	w.apply(gwu("r3", "REQUEST", "globex", "u1", "m1", "ALLOW", 0), Pos{2, 3})
	w.apply(gwu("r3", "RESPONSE", "globex", "u1", "m1", "ALLOW", 200), Pos{2, 4})

	flaggedA, flaggedG := int64(1), int64(0)
	check := func(label string) {
		t.Helper()
		if len(w.users) != 2 {
			t.Fatalf("%s: users = %v, want acme/u1 and globex/u1", label, w.users)
		}
		a := w.users[[2]string{"acme", "u1"}]
		if a == nil || a.RequestCount != 2 || a.FlaggedCount != flaggedA || a.Tokens != 14 || !a.LastSeen.Equal(t0) {
			t.Fatalf("%s: acme/u1 = %+v, want 2 requests, %d flagged, 14 tokens", label, a, flaggedA)
		}
		g := w.users[[2]string{"globex", "u1"}]
		if g == nil || g.RequestCount != 1 || g.FlaggedCount != flaggedG || g.Tokens != 7 {
			t.Fatalf("%s: globex/u1 = %+v, want 1 request, %d flagged, 7 tokens", label, g, flaggedG)
		}
	}
	check("first pass")

	// This group's own redelivery: the same enriched positions again.
	w.apply(gwu("r1", "REQUEST", "acme", "u1", "m1", "REVIEW", 0), Pos{0, 10})
	w.apply(gwu("r1", "RESPONSE", "acme", "u1", "m1", "ALLOW", 200), Pos{0, 12})
	w.apply(gwu("r2", "RESPONSE", "acme", "u1", "m1", "ALLOW", 500), Pos{1, 5})
	w.apply(gwu("r3", "RESPONSE", "globex", "u1", "m1", "ALLOW", 200), Pos{2, 4})
	check("redelivery")
	// Ingest re-emitting after its crash: new positions.
	w.apply(gwu("r1", "RESPONSE", "acme", "u1", "m1", "ALLOW", 200), Pos{0, 40})
	w.apply(gwu("r3", "RESPONSE", "globex", "u1", "m1", "ALLOW", 200), Pos{2, 41})
	check("ingest re-emit")
	// A replay with a new epoch, same verdicts: no change.
	for _, r := range []struct {
		rec *avro.EnrichedRecord
		at  Pos
	}{
		{gwu("r1", "REQUEST", "acme", "u1", "m1", "REVIEW", 0), Pos{2, 77}},
		{inf("r1", "m1", 0.7, "ALLOW", "pii"), Pos{2, 78}},
		{gwu("r1", "RESPONSE", "acme", "u1", "m1", "ALLOW", 200), Pos{2, 79}},
		{gwu("r2", "RESPONSE", "acme", "u1", "m1", "ALLOW", 500), Pos{1, 90}},
		{gwu("r3", "REQUEST", "globex", "u1", "m1", "ALLOW", 0), Pos{0, 91}},
		{gwu("r3", "RESPONSE", "globex", "u1", "m1", "ALLOW", 200), Pos{0, 92}},
	} {
		r.rec.Epoch = 1
		w.apply(r.rec, r.at)
	}
	check("new-epoch replay")
	// A replay whose moderation now flags r2: flagged once (as for the tenant), and a second
	// such replay changes nothing.
	for _, at := range []Pos{{1, 95}, {1, 96}} {
		rep := gwu("r2", "RESPONSE", "acme", "u1", "m1", "BLOCK", 500)
		rep.Epoch = 2
		w.apply(rep, at)
	}
	flaggedA = 2
	check("newly flagged on replay")
	// The tenant aggregate is unaffected by the users beside it.
	if ten := w.tenants["acme"]; ten.RequestCount != 2 || ten.FlaggedCount != 2 || ten.Tokens != 14 {
		t.Fatalf("tenant = %+v", ten)
	}
}

// A re-sent user delta at or below the partition's mark is a no-op, a later one applies.
func TestUserMark(t *testing.T) {
	st, ch := ApplyUser(nil, &Delta{From: Pos{0, 5}, Count: true, Tokens: 2, EventTime: t0})
	if !ch || st.RequestCount != 1 || st.Tokens != 2 {
		t.Fatal("first delta not applied")
	}
	if _, ch = ApplyUser(st, &Delta{From: Pos{0, 5}, Count: true}); ch {
		t.Fatal("re-sent delta applied")
	}
	if _, ch = ApplyUser(st, &Delta{From: Pos{0, 4}, Flag: true}); ch {
		t.Fatal("older delta applied")
	}
	if _, ch = ApplyUser(st, &Delta{From: Pos{1, 5}, Count: true}); !ch {
		t.Fatal("delta of another partition not applied")
	}
	if _, ch = ApplyUser(st, &Delta{From: Pos{0, 6}, Flag: true}); !ch || st.RequestCount != 2 || st.FlaggedCount != 1 {
		t.Fatalf("state = %+v", st)
	}
}

// A flag seen before the user is known is forwarded to the user once it is, even when the
// tenant got its flag earlier; a request without a userId has no user aggregate.
func TestFlagBeforeUser(t *testing.T) {
	w := newWorld()
	w.apply(inf("r9", "m", 0.9, "BLOCK"), Pos{0, 1})
	w.apply(gwu("r9", "REQUEST", "t9", "", "m", "ALLOW", 0), Pos{0, 2}) // tenant flagged here
	if len(w.users) != 0 {
		t.Fatalf("users = %v before any userId", w.users)
	}
	w.apply(gwu("r9", "RESPONSE", "t9", "u9", "m", "ALLOW", 200), Pos{0, 3})
	w.apply(gwu("r9", "RESPONSE", "t9", "u9", "m", "ALLOW", 200), Pos{0, 3}) // redelivery
	if ten := w.tenants["t9"]; ten.RequestCount != 1 || ten.FlaggedCount != 1 {
		t.Fatalf("tenant = %+v", ten)
	}
	u := w.users[[2]string{"t9", "u9"}]
	if u == nil || u.RequestCount != 1 || u.FlaggedCount != 1 || u.Tokens != 7 {
		t.Fatalf("user = %+v", u)
	}
	w.apply(gw("r10", "RESPONSE", "t9", "m", "BLOCK", 200), Pos{0, 4})
	if len(w.users) != 1 || w.tenants["t9"].RequestCount != 2 {
		t.Fatalf("request without userId: users = %v, tenant = %+v", w.users, w.tenants["t9"])
	}
	op := UserOp("backflow", "t9", "u9", u)
	if len(op.Row()) != 14 { // 5 all-time + 2 windows × 4 + _ts
		t.Fatalf("user op fields = %d", len(op.Row()))
	}
	if op.Key != feast.RedisKey("backflow", feast.StringEntity(UserEntity, "u9"), feast.StringEntity(TenantEntity, "t9")) ||
		op.Key == TenantOp("backflow", "t9", w.tenants["t9"]).Key {
		t.Fatalf("user op key %q", op.Key)
	}
}

// User table keys round-trip, including ids with "/" and "%" in them.
func TestUserKey(t *testing.T) {
	if k := UserKey("tenant-001", "user-00001"); k != "user/tenant-001/user-00001" {
		t.Fatalf("UserKey = %q", k)
	}
	for _, c := range [][2]string{{"a", "b"}, {"a/b", "c"}, {"a", "b/c"}, {"50%", "x%2Fy"}, {"", "u"}} {
		kind, id := splitKey(UserKey(c[0], c[1]))
		tenant, user, ok := splitUser(id)
		if kind != "user" || !ok || tenant != c[0] || user != c[1] {
			t.Fatalf("%q: kind %q, split %q %q %v", c, kind, tenant, user, ok)
		}
	}
}

// TestUnknownVerdictFlags: a newer ingest's verdict reads as UNKNOWN. It flags the request (it
// is not a pass) and outranks ALLOW; an UNKNOWN inference status leaves error_count alone.
func TestUnknownVerdictFlags(t *testing.T) {
	w := newWorld()
	w.apply(gwu("r1", avro.PhaseRequest, "t1", "u1", "m1", avro.VerdictAllow, 0), Pos{0, 1})
	rec := inf("r1", "m1", 0.1, avro.VerdictUnknown)
	rec.Inference.Status = avro.StatusUnknown
	w.apply(rec, Pos{0, 2})
	w.apply(gwu("r1", avro.PhaseResponse, "t1", "u1", "m1", avro.VerdictAllow, 200), Pos{0, 3})
	st := w.req["r1"]
	if st.Verdict != avro.VerdictUnknown || !st.Flagged {
		t.Fatalf("request verdict %q flagged %v, want %q flagged", st.Verdict, st.Flagged, avro.VerdictUnknown)
	}
	if tn := w.tenants["t1"]; tn == nil || tn.RequestCount != 1 || tn.FlaggedCount != 1 {
		t.Fatalf("tenant %+v, want 1 request, 1 flagged", tn)
	}
	if m := w.models["m1"]; m == nil || m.RequestCount != 1 || m.ErrorCount != 0 {
		t.Fatalf("model %+v, want 1 request, 0 errors", m)
	}
}
