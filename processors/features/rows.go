package features

// The feature-store rows of the aggregates: the views and entities of deploy/feast/features.py,
// and the Redis operation that writes each kind of entry's row.

import (
	"time"

	"github.com/backflowhq/backflow/internal/feast"
)

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

// The features of each view, in the order their rows give the values (deploy/feast/features.py
// declares the same).
var (
	requestView = feast.NewView(RequestView, "risk_score", "verdict", "categories", "latency_ms", "total_tokens", "model")
	tenantView  = feast.NewView(TenantView, partyFeatures()...)
	userView    = feast.NewView(UserView, partyFeatures()...)
	modelView   = feast.NewView(ModelView, modelFeatures()...)
)

// RequestOp is the request_features row of a request.
func RequestOp(project, requestID string, st *RequestState, ttl time.Duration) feast.Op {
	return feast.Op{Key: feast.RedisKey(project, feast.StringEntity(RequestEntity, requestID)), TTL: ttl, Build: func(dst []any) []any {
		cats := st.Categories
		if cats == nil {
			cats = []string{}
		}
		return requestView.AppendRow(dst, st.EventTime, feast.FloatValue(st.RiskScore), feast.StringValue(st.Verdict),
			feast.StringListValue(cats), feast.Int64Value(st.LatencyMs), feast.Int64Value(st.TotalTokens), feast.StringValue(st.Model))
	}}
}

// TenantOp is the tenant_features row of a tenant.
func TenantOp(project, tenant string, st *TenantState) feast.Op {
	return feast.Op{Key: feast.RedisKey(project, feast.StringEntity(TenantEntity, tenant)),
		Build: func(dst []any) []any { return appendPartyRow(dst, tenantView, st) }}
}

// UserOp is the user_features row of a user of a tenant. Its Redis key is the two-join-key
// entity key (tenant_id, user_id), a hash of its own (apart from the tenant's).
func UserOp(project, tenant, user string, st *UserState) feast.Op {
	return feast.Op{Key: feast.RedisKey(project, feast.StringEntity(TenantEntity, tenant), feast.StringEntity(UserEntity, user)),
		Build: func(dst []any) []any { return appendPartyRow(dst, userView, (*TenantState)(st)) }}
}

func ratio(n, d int64) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / float64(d)
}

// partyFeatures are the features tenants and users share: the all-time totals, then per
// window (Windows) request_count_<w>, flagged_count_<w>, flagged_ratio_<w> and tokens_<w>.
func partyFeatures() []string {
	feats := []string{"request_count", "flagged_count", "flagged_ratio", "tokens", "last_seen"}
	for _, w := range Windows {
		feats = append(feats, windowFeature("request_count", w), windowFeature("flagged_count", w),
			windowFeature("flagged_ratio", w), windowFeature("tokens", w))
	}
	return feats
}

// appendPartyRow appends the row of partyFeatures in view, as of last_seen.
func appendPartyRow(dst []any, view *feast.View, st *TenantState) []any {
	vals := make([][]byte, 0, 5+4*len(Windows))
	vals = append(vals, feast.Int64Value(st.RequestCount), feast.Int64Value(st.FlaggedCount),
		feast.DoubleValue(ratio(st.FlaggedCount, st.RequestCount)), feast.Int64Value(st.Tokens), feast.UnixTimestampValue(st.LastSeen))
	for _, w := range Windows {
		b := st.Win.sum(w, st.LastSeen)
		vals = append(vals, feast.Int64Value(b.Requests), feast.Int64Value(b.Flagged),
			feast.DoubleValue(ratio(b.Flagged, b.Requests)), feast.Int64Value(b.Tokens))
	}
	return view.AppendRow(dst, st.LastSeen, vals...)
}

// ModelOp is the model_features row of a model (modelFeatures).
func ModelOp(project, model string, st *ModelState) feast.Op {
	return feast.Op{Key: feast.RedisKey(project, feast.StringEntity(ModelEntity, model)),
		Build: func(dst []any) []any { return appendModelRow(dst, st) }}
}

// modelFeatures are model_features' features: the all-time totals, last_seen, then per
// window (Windows) request_count_<w>, error_count_<w>, latency_avg_ms_<w>, latency_p95_ms_<w>
// and latency_max_ms_<w>.
func modelFeatures() []string {
	feats := []string{"request_count", "error_count", "latency_avg_ms", "latency_max_ms", "latency_p95_ms", "last_seen"}
	for _, w := range Windows {
		feats = append(feats, windowFeature("request_count", w), windowFeature("error_count", w),
			windowFeature("latency_avg_ms", w), windowFeature("latency_p95_ms", w), windowFeature("latency_max_ms", w))
	}
	return feats
}

// appendModelRow appends the row of modelFeatures, as of last_seen.
func appendModelRow(dst []any, st *ModelState) []any {
	vals := make([][]byte, 0, 6+5*len(Windows))
	vals = append(vals, feast.Int64Value(st.RequestCount), feast.Int64Value(st.ErrorCount),
		feast.DoubleValue(ratio(st.LatencySumMs, st.RequestCount)), feast.Int64Value(st.LatencyMaxMs),
		feast.Int64Value(st.LatencyHist.Quantile(0.95, st.LatencyMaxMs)), feast.UnixTimestampValue(st.LastSeen))
	for _, w := range Windows {
		b := st.Win.sum(w, st.LastSeen)
		vals = append(vals, feast.Int64Value(b.Requests), feast.Int64Value(b.Errors),
			feast.DoubleValue(ratio(b.LatencySum, b.Requests)), feast.Int64Value(b.Hist.Quantile(0.95, b.LatencyMax)),
			feast.Int64Value(b.LatencyMax))
	}
	return modelView.AppendRow(dst, st.LastSeen, vals...)
}
