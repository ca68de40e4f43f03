package dashdata

// ViewSQL is each dashboard panel's SQL, by panel id, as it read the per-minute views of
// migrations 0008, 0009 and 0014 (v_model_minute, ..., v_freshness) before the panels read
// the rollups: the reference the rollups' answers are held equal to (internal/dashboard's
// tests) and the old layout's queries that make bench-dashboard times. Do not change it to
// follow a panel: it is what the views answer.
var ViewSQL = map[string]string{
	"dlq_in_range": `SELECT toUInt64(sum(entries)) AS entries
FROM v_dlq_minute
WHERE $__timeFilter(minute)`,
	"requests_per_model": `SELECT toDateTime(intDiv(toUInt32(minute), $__interval_s) * $__interval_s) AS time, model, sum(requests) AS requests
FROM v_model_minute
WHERE $__timeFilter(minute)
GROUP BY time, model
ORDER BY time, model`,
	"errors_per_model": `SELECT toDateTime(intDiv(toUInt32(minute), $__interval_s) * $__interval_s) AS time, model, sum(errors) AS errors
FROM v_model_minute
WHERE $__timeFilter(minute)
GROUP BY time, model
ORDER BY time, model`,
	"latency_p95": `SELECT toDateTime(intDiv(toUInt32(minute), $__interval_s) * $__interval_s) AS time, model, round(quantilesMerge(0.5, 0.95, 0.99)(latency_ms_quantiles)[2]) AS p95_ms
FROM v_model_minute
WHERE $__timeFilter(minute)
GROUP BY time, model
ORDER BY time, model`,
	"latency_per_model": `SELECT model, requests, errors, unknown_status, round(q[1]) AS p50_ms, round(q[2]) AS p95_ms, round(q[3]) AS p99_ms
FROM
(
    SELECT model, sum(requests) AS requests, sum(errors) AS errors, sum(unknown) AS unknown_status,
        quantilesMerge(0.5, 0.95, 0.99)(latency_ms_quantiles) AS q
    FROM v_model_minute
    WHERE $__timeFilter(minute)
    GROUP BY model
)
ORDER BY requests DESC, model`,
	"tokens_per_tenant": `SELECT tenant_id, sum(tokens_total) AS tokens
FROM v_tenant_minute
WHERE $__timeFilter(minute)
GROUP BY tenant_id
ORDER BY tokens DESC, tenant_id
LIMIT 10`,
	"tokens_per_tenant_model": `SELECT tenant_id, model, sum(requests) AS requests, sum(tokens_prompt) AS prompt_tokens,
    sum(tokens_completion) AS completion_tokens, sum(tokens_total) AS total_tokens
FROM v_tenant_minute
WHERE $__timeFilter(minute)
GROUP BY tenant_id, model
ORDER BY total_tokens DESC, tenant_id, model
LIMIT 25`,
	"risk_hit_rate": `SELECT toDateTime(intDiv(toUInt32(minute), $__interval_s) * $__interval_s) AS time, record, round(100 * sum(with_hits) / sum(records), 2) AS hit_rate_pct
FROM v_moderation_minute
WHERE $__timeFilter(minute)
GROUP BY time, record
ORDER BY time, record`,
	"top_categories": `SELECT category, sum(hits) AS matches
FROM v_category_minute
WHERE $__timeFilter(minute)
GROUP BY category
ORDER BY matches DESC, category
LIMIT 10`,
	"verdict_mix": `SELECT if(verdict = '', concat('(', moderation_status, ')'), verdict) AS outcome, sum(records) AS texts
FROM v_moderation_minute
WHERE $__timeFilter(minute)
GROUP BY outcome
ORDER BY texts DESC, outcome`,
	"dlq_over_time": `SELECT toDateTime(intDiv(toUInt32(minute), $__interval_s) * $__interval_s) AS time, class, sum(entries) AS entries
FROM v_dlq_minute
WHERE $__timeFilter(minute)
GROUP BY time, class
ORDER BY time, class`,
	"dlq_by_class_origin": `SELECT class, stage, origin_topic, sum(entries) AS dead_letters, sum(bytes) AS value_bytes
FROM v_dlq_minute
WHERE $__timeFilter(minute)
GROUP BY class, stage, origin_topic
ORDER BY dead_letters DESC, class, stage, origin_topic`,
	"sink_throughput": `SELECT toDateTime(intDiv(toUInt32(minute), $__interval_s) * $__interval_s) AS time, group, round(sum(rows_landed) / $__interval_s, 1) AS rows_per_s
FROM v_sink_minute
WHERE $__timeFilter(minute)
GROUP BY time, group
ORDER BY time, group`,
	"freshness": `SELECT group, topic, last_event_time, event_lag_s, last_flush, flush_age_s, rows_total
FROM v_freshness
ORDER BY group, topic`,
	"replay_history": `SELECT executed_at, who, group, topic, count() AS partitions, sum(offsets_moved) AS offsets_moved, spec, epoch
FROM v_replay_history
WHERE $__timeFilter(executed_at)
GROUP BY replay_id, executed_at, who, group, topic, spec, epoch
ORDER BY executed_at DESC, group, topic
LIMIT 50`,
}
