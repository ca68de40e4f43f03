package features

// The aggregation state machine, free of goka and Redis so it can be tested on its own.
//
// One goka group table (default group backflow-features) holds four kinds of entries,
// told apart by key:
//
//   - "<requestId>" (the enriched topic's own key): RequestState, the per-request features
//     merged from the request's records (gateway REQUEST, inference result, gateway RESPONSE),
//     and where (enriched partition, offset) the request was forwarded to its tenant, user and
//     model.
//   - "tenant/<tenantId>" (through the loopback topic): TenantState.
//   - "user/<tenantId>/<userId>" (through the loopback topic): UserState. Users are scoped by
//     tenant (the same userId in two tenants is two users), so the key carries both; each part
//     is url.PathEscape'd (a "/" in an id becomes %2F), which leaves ordinary ids as they are.
//     See UserKey.
//   - "model/<model>" (through the loopback topic): ModelState.
//
// Which records count. A request is counted once, when its gateway RESPONSE-phase record is
// applied: request_count, tokens (prompt+completion of the RESPONSE), last_seen (its event
// time), and per model error_count (statusCode >= 500 on the RESPONSE) and latency (the
// RESPONSE's latencyMs). The inference result's status does not enter error_count, so a status
// a newer producer added (read as UNKNOWN) counts neither as a success nor as an error here.
// A request is flagged once, when any of its records carries a moderation verdict REVIEW,
// BLOCK or UNKNOWN (a verdict a newer ingest added) and its tenant is known (from either
// gateway record).
// flagged_ratio = flagged_count / request_count (0 with no requests); a flagged request whose
// RESPONSE has not arrived yet is already in flagged_count.
//
// Users follow the tenant rules with (tenant, user) in place of the tenant: tenantId and userId
// come from either gateway record; the request is counted for its user when the RESPONSE is
// applied with both known, and flagged for its user once both are known (tracked apart from
// the tenant's flag, so a userId learned after the tenant still gets the flag). A request
// without a userId (or tenantId) has no user aggregate. In Redis (and Feast) a user's row is
// the user_features view of the two-join-key entity (tenant_id, user_id): the view has the
// entities tenant and user (deploy/feast/features.py), so Feast keys it by both join keys,
// sorted, and reads it with entity rows {"tenant_id": …, "user_id": …}. That hash is apart
// from the tenant's (one join key), so the two never share fields.
//
// Upgrading a running group to per-user aggregates: request entries written before carry no
// userId, so requests already counted are not counted for their users (and a later re-emit of
// such a request may flag its user without a count). For exact per-user totals over old
// traffic, reset the aggregates (below) and replay.
//
// Windows. Besides the all-time totals, every tenant, user and model aggregate keeps
// event-time windows (window.go, Windows): the last hour in twelve 5-minute buckets and the last
// day in twenty-four 1-hour buckets, kept in the aggregate's own entry (no new table keys). A
// request falls in the bucket of its RESPONSE's event time, the time it is counted at, and so
// does its flag (a windowed flagged count counts flagged requests by their RESPONSE time, so
// flagged_ratio_<w> <= 1; a request flagged before its RESPONSE arrives is in the all-time
// flagged_count at once and in the windows when it is counted). A window's value is computed
// at write time, as of the aggregate's newest event time, which is its last_seen feature: the
// buckets that end with the one holding last_seen. So "request_count_1h" is the requests of the
// 12 five-minute buckets up to last_seen's, i.e. of the last 55 to 60 minutes before last_seen.
// The values do not age by themselves: with no new events a row keeps the values it had as of
// its last_seen, which tells a reader how old they are (a 1h value whose last_seen is more than
// an hour old counts nothing of the last hour). Buckets are applied under the same per-partition
// offset marks as the totals, and the value as of last_seen does not depend on the order the
// deltas came in, so redeliveries and replays leave the windows exact too. An event older than
// a window's start (a late record) counts in the totals only. Models also keep a latency
// histogram (LatencyBoundsMs, 22 bins) per bucket and all-time, for latency_p95_ms: an upper
// estimate, the bound of the bin holding the 95th percentile, capped at the largest latency.
// Memory per aggregate is bounded: at most 36 buckets, each at most 22 bins.
//
// Idempotence, in two steps:
//
//  1. Request entry. Forwarding is recorded in the request's own entry with the enriched
//     (partition, offset) of the record that forwarded it. Applying a record at the same
//     enriched position again (this group's own redelivery after a crash, or a reset of this
//     group's offsets) forwards the same delta again; any other record (ingest re-emitting a
//     record after its crash, a replay with a new epoch, a duplicate) finds the request already
//     forwarded and forwards nothing. So each request produces one delta per target, possibly
//     sent more than once, always tagged with the same enriched position.
//  2. Tenant/user/model entry. Each keeps, per enriched partition, the highest enriched offset it
//     applied. Deltas from one enriched partition reach a loopback partition in offset order
//     (the folder sends one partition's batches in order, each batch in offset order, on an
//     idempotent producer: fold.go), so a delta at or below the mark is a re-send and is a
//     no-op.
//
// An input offset is committed only after the table update, the Redis row and the batch
// carrying its deltas are acknowledged, and after the offsets before it (fold.go), so either
// the state change or its redelivery survives a crash.
//
// Replays. A new ingest epoch re-emits records to the enriched topic at new offsets: step 1
// drops them (already forwarded), so counts do not change. Resetting this group's offsets
// re-reads the same enriched positions: step 1 re-sends, step 2 drops. To recompute
// aggregates from scratch, delete the group table (topic <group>-table) and the Redis keys,
// then replay.
//
// Request entries are swept (deleted) once not seen for Config.RequestWindow (default 7
// days, ingest's dedupe window). A replay that re-emits records of a request whose entry was
// swept counts that request again: a replay reaching further back than the window needs the
// aggregate reset above.

import (
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/backflowhq/backflow/avro"
)

// Key prefixes of the aggregate entries in the group table.
const (
	TenantKeyPrefix = "tenant/"
	UserKeyPrefix   = "user/"
	ModelKeyPrefix  = "model/"
)

// UserKey is the table key of a user's entry: "user/<tenant>/<user>", each part
// url.PathEscape'd so that the one "/" between them is unambiguous.
func UserKey(tenant, user string) string {
	return UserKeyPrefix + url.PathEscape(tenant) + "/" + url.PathEscape(user)
}

// splitUser is UserKey's inverse on the part after the prefix.
func splitUser(id string) (tenant, user string, ok bool) {
	t, u, ok := strings.Cut(id, "/")
	if !ok {
		return "", "", false
	}
	var err error
	if tenant, err = url.PathUnescape(t); err != nil {
		return "", "", false
	}
	if user, err = url.PathUnescape(u); err != nil {
		return "", "", false
	}
	return tenant, user, true
}

// Pos is a position in the enriched topic.
type Pos struct {
	Partition int32 `json:"p"`
	Offset    int64 `json:"o"`
}

// RequestState is the per-request entry.
type RequestState struct {
	Tenant      string    `json:"tenant,omitempty"`
	User        string    `json:"user,omitempty"`
	Model       string    `json:"model,omitempty"`
	RiskScore   float32   `json:"risk"`
	Verdict     string    `json:"verdict,omitempty"`
	Categories  []string  `json:"cats,omitempty"`
	LatencyMs   int64     `json:"latency"`
	TotalTokens int64     `json:"tokens"`
	Flagged     bool      `json:"flagged,omitempty"`
	EventTime   time.Time `json:"time"`
	// Counted is where the request's count was forwarded (its RESPONSE record), FlagSent where
	// its flag was sent to its tenant, UserFlagSent where to its user; nil: not yet.
	Counted      *Pos `json:"counted,omitempty"`
	FlagSent     *Pos `json:"flagSent,omitempty"`
	UserFlagSent *Pos `json:"userFlagSent,omitempty"`
	// CountedAt is the event time the request was counted at (its RESPONSE's), CountedKeys the
	// tenant and user table keys it was counted for, and WinFlagSent where its flag was sent to
	// their windows (once it is both counted and flagged); see "Windows" above.
	CountedAt   time.Time `json:"countedAt,omitzero"`
	CountedKeys []string  `json:"countedKeys,omitempty"`
	WinFlagSent *Pos      `json:"winFlagSent,omitempty"`
	// Seen is when the sink last applied a record of the request (wall clock); the sweep
	// deletes entries not seen for Config.RequestWindow.
	Seen time.Time `json:"seen"`
}

// TenantState is a tenant's aggregate: all-time totals and their windows.
type TenantState struct {
	RequestCount int64           `json:"requests"`
	FlaggedCount int64           `json:"flagged"`
	Tokens       int64           `json:"tokens"`
	LastSeen     time.Time       `json:"lastSeen"`
	Applied      map[int32]int64 `json:"applied"` // enriched partition -> highest offset applied
	// Win holds the windows (Requests, Flagged, Tokens per bucket), as of LastSeen.
	Win Windowed `json:"win,omitempty"`
}

// UserState is a user's (tenant-scoped) aggregate: the same counters as a tenant's,
// applied by the same rule.
type UserState TenantState

// ModelState is a model's aggregate: all-time totals and their windows.
type ModelState struct {
	RequestCount int64           `json:"requests"`
	ErrorCount   int64           `json:"errors"`
	LatencySumMs int64           `json:"latencySum"`
	LatencyMaxMs int64           `json:"latencyMax"`
	LastSeen     time.Time       `json:"lastSeen"`
	Applied      map[int32]int64 `json:"applied"`
	// LatencyHist is the all-time latency histogram (since this field exists in the entry).
	LatencyHist Hist `json:"hist,omitempty"`
	// Win holds the windows (Requests, Errors, latency per bucket), as of LastSeen.
	Win Windowed `json:"win,omitempty"`
}

// Delta is what a request forwards to its tenant, user or model through the loopback topic.
type Delta struct {
	From      Pos       `json:"from"`
	Count     bool      `json:"count,omitempty"`
	Flag      bool      `json:"flag,omitempty"`
	Error     bool      `json:"error,omitempty"`
	Tokens    int64     `json:"tokens,omitempty"`
	LatencyMs int64     `json:"latency,omitempty"`
	EventTime time.Time `json:"time"`
	// FlagAt, when set, counts a flagged request in the windows' bucket of that event time
	// (the request's RESPONSE time); Flag alone counts it in the all-time total only.
	FlagAt time.Time `json:"flagAt,omitzero"`
}

// DeltaBatch is one loopback message: deltas for one aggregate key, applied in order, each
// by the rules of a single delta (fold.go).
type DeltaBatch []*Delta

// Entry is the group table's value: exactly one field is set.
type Entry struct {
	Request *RequestState `json:"r,omitempty"`
	Tenant  *TenantState  `json:"t,omitempty"`
	User    *UserState    `json:"u,omitempty"`
	Model   *ModelState   `json:"m,omitempty"`
}

// verdictRank orders verdicts by severity. UNKNOWN (what the enriched schema's default gives for
// a verdict a newer ingest added) ranks above ALLOW and is flagged: a verdict this version
// cannot read is never taken for a pass.
var verdictRank = map[string]int{"": 0, avro.VerdictAllow: 1, avro.VerdictUnknown: 2, avro.VerdictReview: 3, avro.VerdictBlock: 4}

func flaggedVerdict(v string) bool {
	return v == avro.VerdictReview || v == avro.VerdictBlock || v == avro.VerdictUnknown
}

// ApplyRecord merges one enriched record, read at enriched position at, into the request's
// state (nil: none yet) and returns the new state and the deltas to forward, keyed by table
// key ("tenant/…", "user/…/…", "model/…"). Merging is order-independent: max, union, most severe.
func ApplyRecord(st *RequestState, rec *avro.EnrichedRecord, at Pos) (*RequestState, map[string]*Delta) {
	if st == nil {
		st = &RequestState{}
	}
	resp := mergeRecord(st, rec)
	return st, deltasOf(st, resp, at)
}

// mergeRecord merges rec into st: its verdict and categories, and what its gateway log or
// inference result says of the request. It returns the gateway RESPONSE, nil for any other
// record.
func mergeRecord(st *RequestState, rec *avro.EnrichedRecord) *avro.GatewayLog {
	m := rec.Moderation
	if m.RiskScore > st.RiskScore {
		st.RiskScore = m.RiskScore
	}
	if verdictRank[m.Verdict] > verdictRank[st.Verdict] {
		st.Verdict = m.Verdict
	}
	st.Categories = union(st.Categories, m.Categories)
	if flaggedVerdict(m.Verdict) {
		st.Flagged = true
	}
	var eventTime time.Time
	var resp *avro.GatewayLog
	switch {
	case rec.Gateway != nil:
		g := rec.Gateway
		eventTime = g.EventTime
		if g.TenantID != "" {
			st.Tenant = g.TenantID
		}
		if g.UserID != "" {
			st.User = g.UserID
		}
		if g.Model != "" {
			st.Model = g.Model
		}
		if g.Phase == avro.PhaseResponse {
			resp = g
			st.LatencyMs = int64(g.LatencyMs)
			st.TotalTokens = int64(g.PromptTokens) + int64(g.CompletionTokens)
		}
	case rec.Inference != nil:
		in := rec.Inference
		eventTime = in.EventTime
		if st.Model == "" {
			st.Model = in.Model
		}
		if st.LatencyMs == 0 {
			st.LatencyMs = int64(in.LatencyMs)
		}
		if st.TotalTokens == 0 {
			st.TotalTokens = int64(in.PromptTokens) + int64(in.CompletionTokens)
		}
	}
	if eventTime.After(st.EventTime) {
		st.EventTime = eventTime.UTC()
	}
	return resp
}

// deltasOf returns the deltas a record read at at sends, st merged with it (resp: the
// request's RESPONSE when the record is it): the request's count once, when its RESPONSE is
// applied, and its flag once for the tenant, the user and the windows. A redelivery of the
// record that sent a delta (the same at) sends it again.
func deltasOf(st *RequestState, resp *avro.GatewayLog, at Pos) map[string]*Delta {
	deltas := map[string]*Delta{}
	if resp != nil && (st.Counted == nil || *st.Counted == at) {
		st.Counted = &at
		st.CountedAt = resp.EventTime.UTC()
		st.CountedKeys = nil
		if st.Tenant != "" {
			k := TenantKeyPrefix + st.Tenant
			deltas[k] = &Delta{From: at, Count: true, Tokens: st.TotalTokens, EventTime: st.CountedAt}
			st.CountedKeys = append(st.CountedKeys, k)
			if st.User != "" {
				k := UserKey(st.Tenant, st.User)
				deltas[k] = &Delta{From: at, Count: true, Tokens: st.TotalTokens, EventTime: st.CountedAt}
				st.CountedKeys = append(st.CountedKeys, k)
			}
		}
		if resp.Model != "" {
			deltas[ModelKeyPrefix+resp.Model] = &Delta{From: at, Count: true, Error: resp.StatusCode >= 500,
				LatencyMs: int64(resp.LatencyMs), EventTime: resp.EventTime.UTC()}
		}
	}
	if st.Flagged && st.Tenant != "" && (st.FlagSent == nil || *st.FlagSent == at) {
		st.FlagSent = &at
		k := TenantKeyPrefix + st.Tenant
		if d := deltas[k]; d != nil {
			d.Flag = true
		} else {
			deltas[k] = &Delta{From: at, Flag: true}
		}
	}
	if st.Flagged && st.Tenant != "" && st.User != "" && (st.UserFlagSent == nil || *st.UserFlagSent == at) {
		st.UserFlagSent = &at
		k := UserKey(st.Tenant, st.User)
		if d := deltas[k]; d != nil {
			d.Flag = true
		} else {
			deltas[k] = &Delta{From: at, Flag: true}
		}
	}
	// The windows count a flagged request at its RESPONSE time, for the tenant and user it was
	// counted for, once it is both counted and flagged (whichever came last sends it).
	if st.Flagged && st.Counted != nil && len(st.CountedKeys) > 0 && (st.WinFlagSent == nil || *st.WinFlagSent == at) {
		st.WinFlagSent = &at
		for _, k := range st.CountedKeys {
			d := deltas[k]
			if d == nil {
				d = &Delta{From: at}
				deltas[k] = d
			}
			d.FlagAt = st.CountedAt
		}
	}
	return deltas
}

func union(a, b []string) []string {
	if len(b) == 0 {
		return a
	}
	set := make(map[string]bool, len(a)+len(b))
	for _, s := range a {
		set[s] = true
	}
	for _, s := range b {
		set[s] = true
	}
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// seen reports whether a delta from pos was applied already, and marks it otherwise.
func seen(applied *map[int32]int64, pos Pos) bool {
	if *applied == nil {
		*applied = map[int32]int64{}
	}
	if last, ok := (*applied)[pos.Partition]; ok && pos.Offset <= last {
		return true
	}
	(*applied)[pos.Partition] = pos.Offset
	return false
}

// ApplyTenant applies a delta to a tenant's state; a re-sent delta changes nothing. It
// reports whether the state changed.
func ApplyTenant(st *TenantState, d *Delta) (*TenantState, bool) {
	if st == nil {
		st = &TenantState{}
	}
	if seen(&st.Applied, d.From) {
		return st, false
	}
	if d.Count {
		st.RequestCount++
		st.Tokens += d.Tokens
		if d.EventTime.After(st.LastSeen) {
			st.LastSeen = d.EventTime
		}
		st.Win.add(st.LastSeen, d.EventTime, func(b *Bucket) {
			b.Requests++
			b.Tokens += d.Tokens
		})
	}
	if d.Flag {
		st.FlaggedCount++
	}
	if !d.FlagAt.IsZero() {
		st.Win.add(st.LastSeen, d.FlagAt, func(b *Bucket) { b.Flagged++ })
	}
	return st, true
}

// ApplyUser applies a delta to a user's state exactly as ApplyTenant does to a tenant's.
func ApplyUser(st *UserState, d *Delta) (*UserState, bool) {
	t, changed := ApplyTenant((*TenantState)(st), d)
	return (*UserState)(t), changed
}

// ApplyModel applies a delta to a model's state; a re-sent delta changes nothing.
func ApplyModel(st *ModelState, d *Delta) (*ModelState, bool) {
	if st == nil {
		st = &ModelState{}
	}
	if seen(&st.Applied, d.From) {
		return st, false
	}
	if d.Count {
		st.RequestCount++
		if d.Error {
			st.ErrorCount++
		}
		st.LatencySumMs += d.LatencyMs
		if d.LatencyMs > st.LatencyMaxMs {
			st.LatencyMaxMs = d.LatencyMs
		}
		st.LatencyHist.add(d.LatencyMs)
		if d.EventTime.After(st.LastSeen) {
			st.LastSeen = d.EventTime
		}
		st.Win.add(st.LastSeen, d.EventTime, func(b *Bucket) {
			b.Requests++
			if d.Error {
				b.Errors++
			}
			b.LatencySum += d.LatencyMs
			b.LatencyMax = max(b.LatencyMax, d.LatencyMs)
			b.Hist.add(d.LatencyMs)
		})
	}
	return st, true
}

// splitKey tells a table key's kind: "tenant", "user" (id is "<tenant>/<user>", escaped as
// in UserKey), "model", or "" for a request id.
func splitKey(key string) (kind, id string) {
	if s, ok := strings.CutPrefix(key, TenantKeyPrefix); ok {
		return "tenant", s
	}
	if s, ok := strings.CutPrefix(key, UserKeyPrefix); ok {
		return "user", s
	}
	if s, ok := strings.CutPrefix(key, ModelKeyPrefix); ok {
		return "model", s
	}
	return "", key
}
