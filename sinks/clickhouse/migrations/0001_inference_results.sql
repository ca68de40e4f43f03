-- One row per (source_topic, request_id): the model's inference result with its moderation
-- verdict. Re-writes (redelivery, replay) collapse by the ORDER BY key; the highest version
-- wins (version = epoch << 40 | source_offset, see sinks/clickhouse/rows.go).
-- Runs on ClickHouse 18.16 and current releases. On servers that have them, a later migration
-- could add: TTL event_time + INTERVAL 400 DAY (18.16: syntax error), LowCardinality(String)
-- for model/region/status (18.16: experimental setting), DateTime64(3) for millisecond times.
CREATE TABLE IF NOT EXISTS inference_results (
    source_topic      String,
    request_id        String,
    model             String,
    model_version     String,
    event_time        DateTime,
    latency_ms        UInt32,
    prompt_tokens     UInt32,
    completion_tokens UInt32,
    cached_tokens     UInt32,
    risk_score        Float32,
    labels            Array(String),
    label_scores      Array(Float32),
    status            String,
    error             Nullable(String),
    region            String,
    finish_reason     Nullable(String),
    embedding_dim     UInt16,
    output_chars      UInt32,
    moderation_status String,
    verdict           String,
    moderation_risk   Float32,
    categories        Array(String),
    hit_count         UInt16,
    schema_id         Int32,
    epoch             Int32,
    source_partition  Int32,
    source_offset     Int64,
    ingest_time       DateTime,
    version           UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(event_time)
ORDER BY (source_topic, request_id)
