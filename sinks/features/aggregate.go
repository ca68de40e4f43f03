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
// RESPONSE's latencyMs). A request is flagged once, when any of its records carries a
// moderation verdict REVIEW or BLOCK and its tenant is known (from either gateway record).
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
// Windows: every aggregate is all-time, i.e. totals since this group's table first saw the
// tenant, user or model. There is no sliding window yet.
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
//     (one goroutine per input partition emits them, and the producer keeps order with one
//     request in flight), so a delta at or below the mark is a re-send and is a no-op.
//
// goka commits an input offset only after the table update and the loopback emit are
// acknowledged, so either the state change or its redelivery survives a crash.
//
// Replays. A new ingest epoch re-emits records to the enriched topic at new offsets: step 1
// drops them (already forwarded), so counts do not change. Resetting this group's offsets
// re-reads the same enriched positions: step 1 re-sends, step 2 drops. To recompute
// aggregates from scratch, delete the group table (topic <group>-table) and the Redis keys,
// then replay.
//
// Request entries are swept (deleted) once not seen for SinkConfig.RequestWindow (default 7
// days, ingest's dedupe window). A replay that re-emits records of a request whose entry was
// swept counts that request again: a replay reaching further back than the window needs the
// aggregate reset above.

import (
	"encoding/json"
	"fmt"
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
	// Seen is when the sink last applied a record of the request (wall clock); the sweep
	// deletes entries not seen for SinkConfig.RequestWindow.
	Seen time.Time `json:"seen"`
}

// TenantState is a tenant's all-time aggregate.
type TenantState struct {
	RequestCount int64           `json:"requests"`
	FlaggedCount int64           `json:"flagged"`
	Tokens       int64           `json:"tokens"`
	LastSeen     time.Time       `json:"lastSeen"`
	Applied      map[int32]int64 `json:"applied"` // enriched partition -> highest offset applied
}

// UserState is a user's (tenant-scoped) all-time aggregate: the same counters as a tenant's,
// applied by the same rule.
type UserState TenantState

// ModelState is a model's all-time aggregate.
type ModelState struct {
	RequestCount int64           `json:"requests"`
	ErrorCount   int64           `json:"errors"`
	LatencySumMs int64           `json:"latencySum"`
	LatencyMaxMs int64           `json:"latencyMax"`
	LastSeen     time.Time       `json:"lastSeen"`
	Applied      map[int32]int64 `json:"applied"`
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
}

// Entry is the group table's value: exactly one field is set.
type Entry struct {
	Request *RequestState `json:"r,omitempty"`
	Tenant  *TenantState  `json:"t,omitempty"`
	User    *UserState    `json:"u,omitempty"`
	Model   *ModelState   `json:"m,omitempty"`
}

// EntryCodec is the goka codec of Entry (JSON).
type EntryCodec struct{}

// Encode implements goka.Codec.
func (EntryCodec) Encode(v any) ([]byte, error) {
	e, ok := v.(*Entry)
	if !ok {
		return nil, fmt.Errorf("features: entry codec: unexpected %T", v)
	}
	return json.Marshal(e)
}

// Decode implements goka.Codec.
func (EntryCodec) Decode(b []byte) (any, error) {
	var e Entry
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("features: entry codec: %w", err)
	}
	return &e, nil
}

// DeltaCodec is the goka codec of the loopback messages (JSON).
type DeltaCodec struct{}

// Encode implements goka.Codec.
func (DeltaCodec) Encode(v any) ([]byte, error) { return json.Marshal(v) }

// Decode implements goka.Codec.
func (DeltaCodec) Decode(b []byte) (any, error) {
	var d Delta
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("features: delta codec: %w", err)
	}
	return &d, nil
}

var verdictRank = map[string]int{"": 0, "ALLOW": 1, "REVIEW": 2, "BLOCK": 3}

func flaggedVerdict(v string) bool { return v == "REVIEW" || v == "BLOCK" }

// ApplyRecord merges one enriched record, read at enriched position at, into the request's
// state (nil: none yet) and returns the new state and the deltas to forward, keyed by table
// key ("tenant/…", "user/…/…", "model/…"). Merging is order-independent: max, union, most severe.
func ApplyRecord(st *RequestState, rec *avro.EnrichedRecord, at Pos) (*RequestState, map[string]*Delta) {
	if st == nil {
		st = &RequestState{}
	}
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

	deltas := map[string]*Delta{}
	if resp != nil && (st.Counted == nil || *st.Counted == at) {
		st.Counted = &at
		if st.Tenant != "" {
			deltas[TenantKeyPrefix+st.Tenant] = &Delta{From: at, Count: true, Tokens: st.TotalTokens, EventTime: resp.EventTime.UTC()}
			if st.User != "" {
				deltas[UserKey(st.Tenant, st.User)] = &Delta{From: at, Count: true, Tokens: st.TotalTokens, EventTime: resp.EventTime.UTC()}
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
	return st, deltas
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
	}
	if d.Flag {
		st.FlaggedCount++
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
		if d.EventTime.After(st.LastSeen) {
			st.LastSeen = d.EventTime
		}
	}
	return st, true
}

// Feature view and entity names, as in deploy/feast/features.py.
const (
	RequestView = "request_features"
	TenantView  = "tenant_features"
	UserView    = "user_features"
	ModelView   = "model_features"

	RequestEntity = "request_id"
	TenantEntity  = "tenant_id"
	// UserEntity is the user entity's join key. user_features has two entities, tenant and
	// user, so its rows are keyed by both join keys (tenant_id, user_id).
	UserEntity  = "user_id"
	ModelEntity = "model"
)

// Op is one Redis write: HSET key fields, then EXPIRE key TTL when TTL > 0.
type Op struct {
	Key    string
	Fields map[string]any
	TTL    time.Duration
}

// RequestOp is the request_features row of a request.
func RequestOp(project, requestID string, st *RequestState, ttl time.Duration) Op {
	cats := st.Categories
	if cats == nil {
		cats = []string{}
	}
	verdict := st.Verdict
	return Op{
		Key: RedisKey(project, StringEntity(RequestEntity, requestID)),
		Fields: HashFields(RequestView, st.EventTime, []Feature{
			{"risk_score", FloatValue(st.RiskScore)},
			{"verdict", StringValue(verdict)},
			{"categories", StringListValue(cats)},
			{"latency_ms", Int64Value(st.LatencyMs)},
			{"total_tokens", Int64Value(st.TotalTokens)},
			{"model", StringValue(st.Model)},
		}),
		TTL: ttl,
	}
}

// TenantOp is the tenant_features row of a tenant.
func TenantOp(project, tenant string, st *TenantState) Op {
	return Op{Key: RedisKey(project, StringEntity(TenantEntity, tenant)), Fields: partyFields(TenantView, st)}
}

// UserOp is the user_features row of a user of a tenant. Its Redis key is the two-join-key
// entity key (tenant_id, user_id), a hash of its own (apart from the tenant's).
func UserOp(project, tenant, user string, st *UserState) Op {
	return Op{Key: RedisKey(project, StringEntity(TenantEntity, tenant), StringEntity(UserEntity, user)),
		Fields: partyFields(UserView, (*TenantState)(st))}
}

// partyFields are the features tenants and users share, in view.
func partyFields(view string, st *TenantState) map[string]any {
	ratio := 0.0
	if st.RequestCount > 0 {
		ratio = float64(st.FlaggedCount) / float64(st.RequestCount)
	}
	return HashFields(view, st.LastSeen, []Feature{
		{"request_count", Int64Value(st.RequestCount)},
		{"flagged_count", Int64Value(st.FlaggedCount)},
		{"flagged_ratio", DoubleValue(ratio)},
		{"tokens", Int64Value(st.Tokens)},
		{"last_seen", UnixTimestampValue(st.LastSeen)},
	})
}

// ModelOp is the model_features row of a model.
func ModelOp(project, model string, st *ModelState) Op {
	avg := 0.0
	if st.RequestCount > 0 {
		avg = float64(st.LatencySumMs) / float64(st.RequestCount)
	}
	return Op{
		Key: RedisKey(project, StringEntity(ModelEntity, model)),
		Fields: HashFields(ModelView, st.LastSeen, []Feature{
			{"request_count", Int64Value(st.RequestCount)},
			{"error_count", Int64Value(st.ErrorCount)},
			{"latency_avg_ms", DoubleValue(avg)},
			{"latency_max_ms", Int64Value(st.LatencyMaxMs)},
		}),
	}
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
