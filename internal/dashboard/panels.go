package dashboard

import "github.com/backflowhq/backflow/internal/rollup"

// Kind is how a panel draws its rows.
type Kind string

// The kinds of panel. The column layout each expects is fixed, so the page, the Grafana JSON and
// the tests all read a result the same way.
const (
	// TimeSeries: Columns[0] the bucket time (DateTime), Columns[1] the series name (String),
	// Columns[2] the value. Rows come ordered by time.
	TimeSeries Kind = "timeseries"
	// Bars: Columns[0] the label, Columns[1] the value; one bar a row, largest first.
	Bars Kind = "bars"
	// Table: every column, as returned.
	Table Kind = "table"
	// Stat: one row; Columns[0] is the figure.
	Stat Kind = "stat"
)

// Panel is one chart or table: its SQL, with the Grafana ClickHouse plugin's macros
// ($__timeFilter(col), $__fromTime, $__toTime, $__interval_s; see Expand), and the columns it
// returns. Panels is the one source of truth: the built-in page runs these, and
// deploy/grafana/dashboards/backflow.json is generated from them (GrafanaJSON).
type Panel struct {
	ID      string // URL-safe and unique; the JSON endpoint is /api/panels/<ID>
	Title   string
	Section string // panels of one section are drawn together, in order
	Help    string // one sentence under the title: what the figure is
	Kind    Kind
	Unit    string // of the value column(s): "", "ms", "%", "tokens", "rows/s", "s"
	Width   int    // of 24 grid columns
	SQL     string
	Columns []string // the result's column names, in order
	// Rollup names the rollup the SQL reads (rollup.Rollup.Name), "" for none: the page says
	// which part of the range came from it and which from raw rows.
	Rollup string
}

// HealthSection is the section the page shows in its health strip rather than as a panel.
const HealthSection = "Health"

// bucket re-buckets a rollup's minute column to the panel's interval.
const bucket = `toDateTime(intDiv(toUInt32(minute), $__interval_s) * $__interval_s) AS time`

// series is what a time series reads of r for its range: whole hours from the hour table only
// when its buckets are whole hours, and whole days from the day table only when they are whole
// days, so that no hour or day row straddles two buckets.
func series(r rollup.Rollup) string {
	return r.Range("$__interval_s % 3600 = 0", "$__interval_s % 86400 = 0")
}

// whole is what a panel over the whole range (a table, bars, a stat) reads of r: whole days
// from the day table, the whole hours at its edges from the hour table, the edges of those from
// the minute table and the raw rows.
func whole(r rollup.Rollup) string { return r.Range("1", "1") }

// Panels are the dashboards' panels, in page order. Every panel but the replay history reads a
// rollup of internal/rollup (Rollup.Range: days, hours, minutes below the watermark, raw
// rows through FINAL after it), and answers what it answered over the per-minute views of
// migrations 0008 and 0014: a key a rollup keeps at zero (a combination no row has any more) is
// dropped with HAVING, as the view never has it. The SQL runs on ClickHouse 18.16 and current
// releases: no toStartOfInterval (18.16 lacks it, so no $__timeInterval), no aliases that
// shadow a column another expression uses.
var Panels = []Panel{
	{
		ID: "dlq_in_range", Title: "Dead letters in range", Section: HealthSection, Kind: Stat, Width: 6, Rollup: rollup.DLQ.Name,
		Help: "DLQ entries mirrored into ClickHouse whose dead-letter time is in the range.",
		SQL: `SELECT toUInt64(sum(entries)) AS entries
FROM ` + whole(rollup.DLQ),
		Columns: []string{"entries"},
	},
	{
		ID: "requests_per_model", Title: "Requests per model", Section: "Traffic", Kind: TimeSeries, Width: 12, Rollup: rollup.Model.Name,
		Help: "Inference results per model and interval, each request once.",
		SQL: `SELECT ` + bucket + `, model, sum(requests) AS requests
FROM ` + series(rollup.Model) + `
GROUP BY time, model
HAVING requests > 0
ORDER BY time, model`,
		Columns: []string{"time", "model", "requests"},
	},
	{
		ID: "errors_per_model", Title: "Errors per model", Section: "Traffic", Kind: TimeSeries, Width: 12, Rollup: rollup.Model.Name,
		Help: "Inference results that failed (ERROR, TIMEOUT, FILTERED), per model and interval. UNKNOWN (a status a newer producer added) is counted apart, in the latency table.",
		SQL: `SELECT ` + bucket + `, model, sum(errors) AS errors
FROM ` + series(rollup.Model) + `
GROUP BY time, model
HAVING sum(requests) > 0
ORDER BY time, model`,
		Columns: []string{"time", "model", "errors"},
	},
	{
		ID: "latency_p95", Title: "Latency p95 per model", Section: "Latency", Kind: TimeSeries, Unit: "ms", Width: 12, Rollup: rollup.Model.Name,
		Help: "95th percentile of the model's reported latency, per interval.",
		SQL: `SELECT ` + bucket + `, model, round(quantilesMerge(0.5, 0.95, 0.99)(latency_ms_quantiles)[2]) AS p95_ms
FROM ` + series(rollup.Model) + `
GROUP BY time, model
HAVING sum(requests) > 0
ORDER BY time, model`,
		Columns: []string{"time", "model", "p95_ms"},
	},
	{
		ID: "latency_per_model", Title: "Latency per model", Section: "Latency", Kind: Table, Unit: "ms", Width: 12, Rollup: rollup.Model.Name,
		Help: "Requests, errors, unknown statuses (UNKNOWN: neither a success nor an error) and latency percentiles over the whole range.",
		SQL: `SELECT model, requests, errors, unknown_status, round(q[1]) AS p50_ms, round(q[2]) AS p95_ms, round(q[3]) AS p99_ms
FROM
(
    SELECT model, sum(requests) AS requests, sum(errors) AS errors, sum(unknown) AS unknown_status,
        quantilesMerge(0.5, 0.95, 0.99)(latency_ms_quantiles) AS q
    FROM ` + whole(rollup.Model) + `
    GROUP BY model
    HAVING requests > 0
)
ORDER BY requests DESC, model`,
		Columns: []string{"model", "requests", "errors", "unknown_status", "p50_ms", "p95_ms", "p99_ms"},
	},
	{
		ID: "tokens_per_tenant", Title: "Tokens per tenant", Section: "Tokens", Kind: Bars, Unit: "tokens", Width: 8, Rollup: rollup.Tenant.Name,
		Help: "Prompt plus completion tokens of the ten busiest tenants, from gateway responses.",
		SQL: `SELECT tenant_id, sum(tokens_total) AS tokens
FROM ` + whole(rollup.Tenant) + `
GROUP BY tenant_id
HAVING sum(requests) > 0
ORDER BY tokens DESC, tenant_id
LIMIT 10`,
		Columns: []string{"tenant_id", "tokens"},
	},
	{
		ID: "tokens_per_tenant_model", Title: "Tokens per tenant and model", Section: "Tokens", Kind: Table, Unit: "tokens", Width: 16, Rollup: rollup.Tenant.Name,
		Help: "The 25 largest (tenant, model) pairs by tokens.",
		SQL: `SELECT tenant_id, model, sum(requests) AS requests, sum(tokens_prompt) AS prompt_tokens,
    sum(tokens_completion) AS completion_tokens, sum(tokens_total) AS total_tokens
FROM ` + whole(rollup.Tenant) + `
GROUP BY tenant_id, model
HAVING requests > 0
ORDER BY total_tokens DESC, tenant_id, model
LIMIT 25`,
		Columns: []string{"tenant_id", "model", "requests", "prompt_tokens", "completion_tokens", "total_tokens"},
	},
	{
		ID: "risk_hit_rate", Title: "Risk-hit rate", Section: "Moderation", Kind: TimeSeries, Unit: "%", Width: 12, Rollup: rollup.Moderation.Name,
		Help: "Share of screened texts with at least one dictionary match, per kind of text.",
		SQL: `SELECT ` + bucket + `, record, round(100 * sum(with_hits) / sum(records), 2) AS hit_rate_pct
FROM ` + series(rollup.Moderation) + `
GROUP BY time, record
HAVING sum(records) > 0
ORDER BY time, record`,
		Columns: []string{"time", "record", "hit_rate_pct"},
	},
	{
		ID: "top_categories", Title: "Top risk categories", Section: "Moderation", Kind: Bars, Width: 6, Rollup: rollup.Category.Name,
		Help: "Dictionary matches per category.",
		SQL: `SELECT category, sum(hits) AS matches
FROM ` + whole(rollup.Category) + `
GROUP BY category
HAVING matches > 0
ORDER BY matches DESC, category
LIMIT 10`,
		Columns: []string{"category", "matches"},
	},
	{
		ID: "verdict_mix", Title: "Verdict mix", Section: "Moderation", Kind: Bars, Width: 6, Rollup: rollup.Moderation.Name,
		Help: "Screened texts per verdict; texts that were not screened show their status.",
		SQL: `SELECT if(verdict = '', concat('(', moderation_status, ')'), verdict) AS outcome, sum(records) AS texts
FROM ` + whole(rollup.Moderation) + `
GROUP BY outcome
HAVING texts > 0
ORDER BY texts DESC, outcome`,
		Columns: []string{"outcome", "texts"},
	},
	{
		ID: "dlq_over_time", Title: "Dead letters per class", Section: "Dead letters", Kind: TimeSeries, Width: 12, Rollup: rollup.DLQ.Name,
		Help: "DLQ entries per error class and interval of their dead-letter time.",
		SQL: `SELECT ` + bucket + `, class, sum(entries) AS entries
FROM ` + series(rollup.DLQ) + `
GROUP BY time, class
HAVING entries > 0
ORDER BY time, class`,
		Columns: []string{"time", "class", "entries"},
	},
	{
		ID: "dlq_by_class_origin", Title: "Dead letters by class and origin", Section: "Dead letters", Kind: Table, Width: 12, Rollup: rollup.DLQ.Name,
		Help: "DLQ entries per error class, stage and origin topic; backflow dlq list shows them.",
		SQL: `SELECT class, stage, origin_topic, sum(entries) AS dead_letters, sum(bytes) AS value_bytes
FROM ` + whole(rollup.DLQ) + `
GROUP BY class, stage, origin_topic
HAVING dead_letters > 0
ORDER BY dead_letters DESC, class, stage, origin_topic`,
		Columns: []string{"class", "stage", "origin_topic", "dead_letters", "value_bytes"},
	},
	{
		ID: "sink_throughput", Title: "Sink throughput", Section: "Pipeline", Kind: TimeSeries, Unit: "rows/s", Width: 9, Rollup: rollup.Sink.Name,
		Help: "Rows landed per second by each ClickHouse sink group, from the ledger.",
		SQL: `SELECT ` + bucket + `, group, round(sum(rows_landed) / $__interval_s, 1) AS rows_per_s
FROM ` + series(rollup.Sink) + `
GROUP BY time, group
HAVING sum(flushes) > 0
ORDER BY time, group`,
		Columns: []string{"time", "group", "rows_per_s"},
	},
	{
		ID: "freshness", Title: "Freshness", Section: "Pipeline", Kind: Table, Unit: "s", Width: 15, Rollup: rollup.Sink.Name,
		Help: "Per sink group, now (not the range): newest event time landed and last flush, and how far each lies behind.",
		SQL: `SELECT group, topic, last_event_time, toInt64(now()) - toInt64(last_event_time) AS event_lag_s,
    last_flush, toInt64(now()) - toInt64(last_flush) AS flush_age_s, rows_total
FROM
(
    SELECT group, topic, max(last_event_time) AS last_event_time, max(last_flush) AS last_flush, sum(rows_landed) AS rows_total
    FROM ` + rollup.Sink.AllTime() + `
    GROUP BY group, topic
    HAVING sum(flushes) > 0
)
ORDER BY group, topic`,
		Columns: []string{"group", "topic", "last_event_time", "event_lag_s", "last_flush", "flush_age_s", "rows_total"},
	},
	{
		ID: "replay_history", Title: "Replay history", Section: "Pipeline", Kind: Table, Width: 24,
		Help: "Replays executed in the range: who moved which group's offsets, and how far.",
		SQL: `SELECT executed_at, who, group, topic, count() AS partitions, sum(offsets_moved) AS offsets_moved, spec, epoch
FROM v_replay_history
WHERE $__timeFilter(executed_at)
GROUP BY replay_id, executed_at, who, group, topic, spec, epoch
ORDER BY executed_at DESC, group, topic
LIMIT 50`,
		Columns: []string{"executed_at", "who", "group", "topic", "partitions", "offsets_moved", "spec", "epoch"},
	},
}

// PanelByID returns the panel with id.
func PanelByID(id string) (Panel, bool) {
	for _, p := range Panels {
		if p.ID == id {
			return p, true
		}
	}
	return Panel{}, false
}
