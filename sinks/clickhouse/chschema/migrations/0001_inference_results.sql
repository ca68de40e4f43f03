-- One row per (source_topic, request_id): the model's inference result with its moderation
-- verdict. Re-writes (redelivery, replay) collapse by the ORDER BY key; the highest version
-- wins (version = epoch << 40 | source_offset, see sinks/clickhouse/rows.go).
-- Rendered per server (see Migration in migrations.go): on 18.16 the text columns are String
-- and the times DateTime; where the server has them, LowCardinality(String) and DateTime64(3).
-- The TTL comes with 0010_ttl on servers that have TTL.
CREATE TABLE IF NOT EXISTS inference_results (
    source_topic      String,
    request_id        String,
    model             {{lowcard}},
    model_version     {{lowcard}},
    event_time        {{time}},
    latency_ms        UInt32,
    prompt_tokens     UInt32,
    completion_tokens UInt32,
    cached_tokens     UInt32,
    risk_score        Float32,
    labels            Array(String),
    label_scores      Array(Float32),
    status            {{lowcard}},
    error             Nullable(String),
    region            {{lowcard}},
    finish_reason     Nullable(String),
    embedding_dim     UInt16,
    output_chars      UInt32,
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
ORDER BY (source_topic, request_id)
