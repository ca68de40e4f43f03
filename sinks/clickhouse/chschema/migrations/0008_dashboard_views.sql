-- Per-minute rollups for the dashboards (internal/dashboard, deploy/grafana), read through the
-- deduplicating v_* views, so a re-written or replayed record counts once. They are plain views:
-- nothing is stored twice, and a panel asks for a time range with WHERE minute BETWEEN ... .
-- Every column is additive over minutes (counts, sums, a quantiles state to merge), so a panel
-- can re-bucket to any interval of whole minutes. Aliases never reuse a source column's name:
-- ClickHouse resolves a name to the alias first, which would nest one aggregate in another.
-- Runs on 18.16 and current releases. 18.16 does not push a WHERE on a view into the view
-- (enable_optimize_predicate_expression is 0 there, 1 on current releases), so on 18.16 each
-- query reads the whole deduplicated table; fine for demo volumes, see README.
--
-- The ledger records the newest event time each flush landed, for the freshness view. Where the
-- server has ADD COLUMN IF NOT EXISTS the statement carries it; 18.16 lacks it, and there Migrate
-- skips an ADD COLUMN whose column exists. Either way re-running this file converges.
ALTER TABLE sink_ledger ADD COLUMN {{ifnotexists}}max_event_time DateTime DEFAULT toDateTime(0);

-- Inference results per model and minute: requests, errors (status other than OK), latency and
-- tokens. latency_ms_quantiles is a quantilesState(0.5, 0.95, 0.99): merge it with
-- quantilesMerge(0.5, 0.95, 0.99) over the minutes you want.
CREATE VIEW IF NOT EXISTS v_model_minute AS
SELECT
    toStartOfMinute(event_time) AS minute,
    model,
    count() AS requests,
    countIf(status != 'OK') AS errors,
    sum(latency_ms) AS latency_ms_sum,
    quantilesState(0.5, 0.95, 0.99)(latency_ms) AS latency_ms_quantiles,
    sum(prompt_tokens) AS tokens_prompt,
    sum(completion_tokens) AS tokens_completion,
    countIf(verdict IN ('REVIEW', 'BLOCK')) AS flagged
FROM v_inference_results
GROUP BY minute, model;

-- Token spend per tenant, model and minute, from the gateway's RESPONSE log (the record that
-- carries the tenant and the token counts). errors: HTTP status 400 or above.
CREATE VIEW IF NOT EXISTS v_tenant_minute AS
SELECT
    toStartOfMinute(event_time) AS minute,
    tenant_id,
    model,
    count() AS requests,
    countIf(status_code >= 400) AS errors,
    sum(prompt_tokens) AS tokens_prompt,
    sum(completion_tokens) AS tokens_completion,
    sum(prompt_tokens + completion_tokens) AS tokens_total
FROM v_gateway_logs
WHERE phase = 'RESPONSE'
GROUP BY minute, tenant_id, model;

-- Moderation outcomes per minute, per kind of screened text (record: 'inference' for the model's
-- output, 'request' and 'response' for the gateway's prompt and response), verdict and status.
-- with_hits counts records with at least one dictionary match; hits the matches.
CREATE VIEW IF NOT EXISTS v_moderation_minute AS
SELECT
    toStartOfMinute(event_time) AS minute,
    'inference' AS record,
    verdict,
    moderation_status,
    count() AS records,
    countIf(hit_count > 0) AS with_hits,
    sum(hit_count) AS hits
FROM v_inference_results
GROUP BY minute, verdict, moderation_status
UNION ALL
SELECT
    toStartOfMinute(event_time) AS minute,
    lower(phase) AS record,
    verdict,
    moderation_status,
    count() AS records,
    countIf(hit_count > 0) AS with_hits,
    sum(hit_count) AS hits
FROM v_gateway_logs
GROUP BY minute, phase, verdict, moderation_status;

-- Dictionary matches per category, kind of text and minute. requests counts distinct requests;
-- a request's text has one event time, so the count adds up over minutes too.
CREATE VIEW IF NOT EXISTS v_category_minute AS
SELECT
    toStartOfMinute(event_time) AS minute,
    category,
    if(phase = '', 'inference', lower(phase)) AS record,
    count() AS hits,
    uniqExact(request_id) AS requests
FROM v_moderation_hits
GROUP BY minute, category, record;

-- Dead letters per minute (of the time they were dead-lettered), stage, error class and origin
-- topic, from the DLQ mirror.
CREATE VIEW IF NOT EXISTS v_dlq_minute AS
SELECT
    toStartOfMinute(error_time) AS minute,
    stage,
    class,
    origin_topic,
    count() AS entries,
    sum(value_bytes) AS bytes
FROM v_dlq_entries
GROUP BY minute, stage, class, origin_topic;

-- Sink throughput per minute of flush, group and topic, from the ledger (an audit log: a flush
-- redelivered after a crash counts twice here, as it was written twice). records: enriched
-- offsets consumed; rows: table rows landed; hit_rows: moderation_hits rows.
CREATE VIEW IF NOT EXISTS v_sink_minute AS
SELECT
    toStartOfMinute(flushed_at) AS minute,
    group,
    topic,
    uniqExact(batch_id) AS flushes,
    sum(max_offset - min_offset + 1) AS records,
    sum(rows) AS rows_landed,
    sum(hit_rows) AS hit_rows_landed
FROM sink_ledger
GROUP BY minute, group, topic;

-- Pipeline freshness per sink group and topic, from the ledger: the newest event time landed and
-- the last flush, and how many seconds each lies behind now. A group that stopped, or traffic
-- that stopped, both show as growing lag; the last flush tells which.
CREATE VIEW IF NOT EXISTS v_freshness AS
SELECT
    group,
    topic,
    max(max_event_time) AS last_event_time,
    max(flushed_at) AS last_flush,
    toInt64(now()) - toInt64(max(max_event_time)) AS event_lag_s,
    toInt64(now()) - toInt64(max(flushed_at)) AS flush_age_s,
    sum(rows) AS rows_total
FROM sink_ledger
GROUP BY group, topic
