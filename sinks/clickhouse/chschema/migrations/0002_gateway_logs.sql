-- One row per (source_topic, request_id, phase): the gateway's REQUEST and RESPONSE log
-- entries with their moderation verdicts. Versioned like inference_results.
-- Rendered per server like inference_results (LowCardinality, DateTime64 where available).
CREATE TABLE IF NOT EXISTS gateway_logs (
    source_topic      String,
    request_id        String,
    phase             String,
    event_time        {{time}},
    tenant_id         {{lowcard}},
    user_id           String,
    route             {{lowcard}},
    model             {{lowcard}},
    status_code       UInt16,
    latency_ms        UInt32,
    prompt_tokens     UInt32,
    completion_tokens UInt32,
    prompt_chars      UInt32,
    response_chars    UInt32,
    moderation_status {{lowcard}},
    verdict           {{lowcard}},
    moderation_risk   Float32,
    categories        Array(String),
    hit_count         UInt16,
    schema_id         Int32,
    epoch             Int32,
    source_partition  Int32,
    source_offset     Int64,
    ingest_time       {{time}},
    version           UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(event_time)
ORDER BY (source_topic, request_id, phase)
