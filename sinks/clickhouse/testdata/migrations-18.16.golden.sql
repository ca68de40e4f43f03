-- 0001_inference_results statement 1
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
ORDER BY (source_topic, request_id);
-- 0002_gateway_logs statement 1
CREATE TABLE IF NOT EXISTS gateway_logs (
    source_topic      String,
    request_id        String,
    phase             String,
    event_time        DateTime,
    tenant_id         String,
    user_id           String,
    route             String,
    model             String,
    status_code       UInt16,
    latency_ms        UInt32,
    prompt_tokens     UInt32,
    completion_tokens UInt32,
    prompt_chars      UInt32,
    response_chars    UInt32,
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
ORDER BY (source_topic, request_id, phase);
-- 0003_moderation_hits statement 1
CREATE TABLE IF NOT EXISTS moderation_hits (
    source_topic     String,
    request_id       String,
    phase            String,
    start            UInt32,
    end              UInt32,
    word             String,
    category         String,
    event_time       DateTime,
    epoch            Int32,
    source_partition Int32,
    source_offset    Int64,
    version          UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(event_time)
ORDER BY (source_topic, request_id, phase, start);
-- 0004_sink_ledger statement 1
CREATE TABLE IF NOT EXISTS sink_ledger (
    batch_id   String,
    group      String,
    topic      String,
    partition  Int32,
    min_offset Int64,
    max_offset Int64,
    rows       UInt32,
    hit_rows   UInt32,
    epoch      Int32,
    flushed_at DateTime
) ENGINE = MergeTree
PARTITION BY toYYYYMM(flushed_at)
ORDER BY (group, topic, partition, min_offset);
-- 0005_views statement 1
CREATE VIEW IF NOT EXISTS v_inference_results AS SELECT * FROM inference_results FINAL;
-- 0005_views statement 2
CREATE VIEW IF NOT EXISTS v_gateway_logs AS SELECT * FROM gateway_logs FINAL;
-- 0005_views statement 3
CREATE VIEW IF NOT EXISTS v_moderation_hits AS SELECT * FROM moderation_hits FINAL;
-- 0006_dlq_entries statement 1
CREATE TABLE IF NOT EXISTS dlq_entries (
    dlq_topic        String,
    dlq_partition    Int32,
    dlq_offset       Int64,
    origin_topic     String,
    origin_partition Int32,
    origin_offset    Int64,
    origin_time      DateTime,
    stage            String,
    class            String,
    message          String,
    error_time       DateTime,
    record_key       String,
    value_bytes      UInt32,
    truncated_from   UInt32,
    version          UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(error_time)
ORDER BY (dlq_topic, dlq_partition, dlq_offset);
-- 0006_dlq_entries statement 2
CREATE VIEW IF NOT EXISTS v_dlq_entries AS SELECT * FROM dlq_entries FINAL;
