-- An unknown status is not a success. A status a newer producer adds (and this version's reader
-- schema does not know) lands as 'UNKNOWN' (the enum's default in avro/schemas). The status,
-- verdict, moderation_status and phase columns are String (LowCardinality(String) where the
-- server has it), so they take 'UNKNOWN' as they are: no column changes. v_model_minute counted
-- every status other than OK as an error; it now counts errors (ERROR, TIMEOUT, FILTERED) and
-- unknown statuses apart. A view refuses ALTER, so it is dropped and created again; both
-- statements are safe to re-run, and dashboards reading it fail only between the two.
DROP TABLE IF EXISTS v_model_minute;

-- Inference results per model and minute: requests, errors (a known status other than OK),
-- unknown (status UNKNOWN: neither a success nor an error), latency and tokens.
-- latency_ms_quantiles is a quantilesState(0.5, 0.95, 0.99): merge it with
-- quantilesMerge(0.5, 0.95, 0.99) over the minutes you want.
CREATE VIEW IF NOT EXISTS v_model_minute AS
SELECT
    toStartOfMinute(event_time) AS minute,
    model,
    count() AS requests,
    countIf(status NOT IN ('OK', 'UNKNOWN')) AS errors,
    countIf(status = 'UNKNOWN') AS unknown,
    sum(latency_ms) AS latency_ms_sum,
    quantilesState(0.5, 0.95, 0.99)(latency_ms) AS latency_ms_quantiles,
    sum(prompt_tokens) AS tokens_prompt,
    sum(completion_tokens) AS tokens_completion,
    countIf(verdict IN ('REVIEW', 'BLOCK')) AS flagged
FROM v_inference_results
GROUP BY minute, model
