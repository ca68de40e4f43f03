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
-- 0007_replay_log statement 1
CREATE TABLE IF NOT EXISTS replay_log (
    replay_id      String,
    replayed_at    DateTime,
    who            String,
    consumer_group String,
    spec           String,
    reason         String,
    actions        Array(String),
    epoch_from     Int32,
    epoch_to       Int32,
    topic          String,
    partition      Int32,
    from_offset    Int64,
    to_offset      Int64
) ENGINE = MergeTree
PARTITION BY toYYYYMM(replayed_at)
ORDER BY (consumer_group, replayed_at, replay_id, topic, partition);
-- 0008_dashboard_views statement 1
ALTER TABLE sink_ledger ADD COLUMN max_event_time DateTime DEFAULT toDateTime(0);
-- 0008_dashboard_views statement 2
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
-- 0008_dashboard_views statement 3
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
-- 0008_dashboard_views statement 4
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
-- 0008_dashboard_views statement 5
CREATE VIEW IF NOT EXISTS v_category_minute AS
SELECT
    toStartOfMinute(event_time) AS minute,
    category,
    if(phase = '', 'inference', lower(phase)) AS record,
    count() AS hits,
    uniqExact(request_id) AS requests
FROM v_moderation_hits
GROUP BY minute, category, record;
-- 0008_dashboard_views statement 6
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
-- 0008_dashboard_views statement 7
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
-- 0008_dashboard_views statement 8
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
GROUP BY group, topic;
-- 0009_replay_history statement 1
CREATE VIEW IF NOT EXISTS v_replay_history AS
SELECT
    replay_id,
    replayed_at AS executed_at,
    who,
    consumer_group AS group,
    topic,
    partition,
    from_offset,
    to_offset,
    if(from_offset < 0, toInt64(0), to_offset - from_offset) AS offsets_moved,
    spec,
    reason,
    actions,
    epoch_to AS epoch
FROM replay_log;
-- 0011_dlq_by_origin statement 1
DROP TABLE IF EXISTS v_dlq_entries;
-- 0011_dlq_by_origin statement 2
CREATE VIEW IF NOT EXISTS v_dlq_entries AS
SELECT *
FROM dlq_entries FINAL
ORDER BY dlq_topic, dlq_partition, dlq_offset
LIMIT 1 BY origin_topic, origin_partition, origin_offset, stage,
    if(origin_topic = '', concat(dlq_topic, '/', toString(dlq_partition), '/', toString(dlq_offset)), '');
-- 0012_latency_ms statement 1
ALTER TABLE inference_results ADD COLUMN event_time_ms Int64 DEFAULT toInt64(toUInt32(event_time)) * 1000;
-- 0012_latency_ms statement 2
ALTER TABLE inference_results ADD COLUMN landed_time_ms Int64 DEFAULT 0;
-- 0012_latency_ms statement 3
ALTER TABLE gateway_logs ADD COLUMN event_time_ms Int64 DEFAULT toInt64(toUInt32(event_time)) * 1000;
-- 0012_latency_ms statement 4
ALTER TABLE gateway_logs ADD COLUMN landed_time_ms Int64 DEFAULT 0;
-- 0013_stream_migrations statement 1
CREATE TABLE IF NOT EXISTS stream_migrations (
    stream      String,
    table_name  String,
    version     UInt32,
    schema_id   UInt32,
    change      String,
    statements  Array(String),
    applied_at  DateTime
) ENGINE = MergeTree
ORDER BY (stream, version);
-- 0014_unknown_status statement 1
DROP TABLE IF EXISTS v_model_minute;
-- 0014_unknown_status statement 2
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
GROUP BY minute, model;
-- 0015_rollups statement 1
CREATE TABLE IF NOT EXISTS rollup_model_minute (
    minute               DateTime,
    model                String,
    requests             UInt64,
    errors               UInt64,
    unknown              UInt64,
    latency_ms_sum       UInt64,
    latency_ms_quantiles AggregateFunction(quantiles(0.5, 0.95, 0.99), UInt32),
    tokens_prompt        UInt64,
    tokens_completion    UInt64,
    flagged              UInt64,
    version              UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(minute)
ORDER BY (minute, model);
-- 0015_rollups statement 2
CREATE TABLE IF NOT EXISTS rollup_model_hour (
    hour                 DateTime,
    model                String,
    requests             UInt64,
    errors               UInt64,
    unknown              UInt64,
    latency_ms_sum       UInt64,
    latency_ms_quantiles AggregateFunction(quantiles(0.5, 0.95, 0.99), UInt32),
    tokens_prompt        UInt64,
    tokens_completion    UInt64,
    flagged              UInt64,
    version              UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(hour)
ORDER BY (hour, model);
-- 0015_rollups statement 3
CREATE TABLE IF NOT EXISTS rollup_tenant_minute (
    minute            DateTime,
    tenant_id         String,
    model             String,
    requests          UInt64,
    errors            UInt64,
    tokens_prompt     UInt64,
    tokens_completion UInt64,
    tokens_total      UInt64,
    version           UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(minute)
ORDER BY (minute, tenant_id, model);
-- 0015_rollups statement 4
CREATE TABLE IF NOT EXISTS rollup_tenant_hour (
    hour              DateTime,
    tenant_id         String,
    model             String,
    requests          UInt64,
    errors            UInt64,
    tokens_prompt     UInt64,
    tokens_completion UInt64,
    tokens_total      UInt64,
    version           UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(hour)
ORDER BY (hour, tenant_id, model);
-- 0015_rollups statement 5
CREATE TABLE IF NOT EXISTS rollup_moderation_minute (
    minute            DateTime,
    record            String,
    verdict           String,
    moderation_status String,
    records           UInt64,
    with_hits         UInt64,
    hits              UInt64,
    version           UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(minute)
ORDER BY (minute, record, verdict, moderation_status);
-- 0015_rollups statement 6
CREATE TABLE IF NOT EXISTS rollup_moderation_hour (
    hour              DateTime,
    record            String,
    verdict           String,
    moderation_status String,
    records           UInt64,
    with_hits         UInt64,
    hits              UInt64,
    version           UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(hour)
ORDER BY (hour, record, verdict, moderation_status);
-- 0015_rollups statement 7
CREATE TABLE IF NOT EXISTS rollup_category_minute (
    minute   DateTime,
    category String,
    record   String,
    hits     UInt64,
    requests UInt64,
    version  UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(minute)
ORDER BY (minute, category, record);
-- 0015_rollups statement 8
CREATE TABLE IF NOT EXISTS rollup_category_hour (
    hour     DateTime,
    category String,
    record   String,
    hits     UInt64,
    requests UInt64,
    version  UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(hour)
ORDER BY (hour, category, record);
-- 0015_rollups statement 9
CREATE TABLE IF NOT EXISTS rollup_dlq_minute (
    minute       DateTime,
    stage        String,
    class        String,
    origin_topic String,
    entries      UInt64,
    bytes        UInt64,
    version      UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(minute)
ORDER BY (minute, stage, class, origin_topic);
-- 0015_rollups statement 10
CREATE TABLE IF NOT EXISTS rollup_dlq_hour (
    hour         DateTime,
    stage        String,
    class        String,
    origin_topic String,
    entries      UInt64,
    bytes        UInt64,
    version      UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(hour)
ORDER BY (hour, stage, class, origin_topic);
-- 0015_rollups statement 11
CREATE TABLE IF NOT EXISTS rollup_sink_minute (
    minute          DateTime,
    group           String,
    topic           String,
    flushes         UInt64,
    records         UInt64,
    rows_landed     UInt64,
    hit_rows_landed UInt64,
    last_event_time DateTime,
    last_flush      DateTime,
    version         UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(minute)
ORDER BY (minute, group, topic);
-- 0015_rollups statement 12
CREATE TABLE IF NOT EXISTS rollup_sink_hour (
    hour            DateTime,
    group           String,
    topic           String,
    flushes         UInt64,
    records         UInt64,
    rows_landed     UInt64,
    hit_rows_landed UInt64,
    last_event_time DateTime,
    last_flush      DateTime,
    version         UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(hour)
ORDER BY (hour, group, topic);
-- 0015_rollups statement 13
CREATE TABLE IF NOT EXISTS rollup_watermarks (
    source  String,
    minute  DateTime,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY source;
-- 0015_rollups statement 14
CREATE TABLE IF NOT EXISTS dlq_first (
    origin_topic     String,
    origin_partition Int32,
    origin_offset    Int64,
    stage            String,
    orphan           String,
    dlq_topic        String,
    dlq_partition    Int32,
    dlq_offset       Int64,
    version          UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY (origin_topic, origin_partition, origin_offset, stage, orphan);
-- 0015_rollups statement 15
DROP TABLE IF EXISTS v_dlq_entries;
-- 0015_rollups statement 16
CREATE VIEW IF NOT EXISTS v_dlq_entries AS
SELECT *
FROM (SELECT * FROM dlq_entries FINAL)
ORDER BY dlq_topic, dlq_partition, dlq_offset
LIMIT 1 BY origin_topic, origin_partition, origin_offset, stage,
    if(origin_topic = '', concat(dlq_topic, '/', toString(dlq_partition), '/', toString(dlq_offset)), '');
-- 0016_time_keys statement 1
REBUILD TABLE inference_results PARTITION BY toYYYYMMDD(event_time) ORDER BY (toStartOfMinute(event_time), source_topic, request_id);
-- 0016_time_keys statement 2
REBUILD TABLE gateway_logs PARTITION BY toYYYYMMDD(event_time) ORDER BY (toStartOfMinute(event_time), source_topic, request_id, phase);
-- 0016_time_keys statement 3
REBUILD TABLE moderation_hits PARTITION BY toYYYYMMDD(event_time) ORDER BY (toStartOfMinute(event_time), source_topic, request_id, phase, start);
-- 0016_time_keys statement 4
REBUILD TABLE dlq_entries PARTITION BY toYYYYMMDD(error_time) ORDER BY (toStartOfMinute(error_time), dlq_topic, dlq_partition, dlq_offset);
-- 0016_time_keys statement 5
REBUILD TABLE sink_ledger PARTITION BY toYYYYMMDD(flushed_at) ORDER BY (toStartOfMinute(flushed_at), group, topic, partition, min_offset);
-- 0017_rollup_backfill statement 1
BACKFILL ROLLUPS;
-- 0018_rollup_days statement 1
CREATE TABLE IF NOT EXISTS rollup_model_day (
    day                  DateTime,
    model                String,
    requests             UInt64,
    errors               UInt64,
    unknown              UInt64,
    latency_ms_sum       UInt64,
    latency_ms_quantiles AggregateFunction(quantiles(0.5, 0.95, 0.99), UInt32),
    tokens_prompt        UInt64,
    tokens_completion    UInt64,
    flagged              UInt64,
    version              UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(day)
ORDER BY (day, model);
-- 0018_rollup_days statement 2
CREATE TABLE IF NOT EXISTS rollup_tenant_day (
    day               DateTime,
    tenant_id         String,
    model             String,
    requests          UInt64,
    errors            UInt64,
    tokens_prompt     UInt64,
    tokens_completion UInt64,
    tokens_total      UInt64,
    version           UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(day)
ORDER BY (day, tenant_id, model);
-- 0018_rollup_days statement 3
CREATE TABLE IF NOT EXISTS rollup_moderation_day (
    day               DateTime,
    record            String,
    verdict           String,
    moderation_status String,
    records           UInt64,
    with_hits         UInt64,
    hits              UInt64,
    version           UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(day)
ORDER BY (day, record, verdict, moderation_status);
-- 0018_rollup_days statement 4
CREATE TABLE IF NOT EXISTS rollup_category_day (
    day      DateTime,
    category String,
    record   String,
    hits     UInt64,
    requests UInt64,
    version  UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(day)
ORDER BY (day, category, record);
-- 0018_rollup_days statement 5
CREATE TABLE IF NOT EXISTS rollup_dlq_day (
    day          DateTime,
    stage        String,
    class        String,
    origin_topic String,
    entries      UInt64,
    bytes        UInt64,
    version      UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(day)
ORDER BY (day, stage, class, origin_topic);
-- 0018_rollup_days statement 6
CREATE TABLE IF NOT EXISTS rollup_sink_day (
    day             DateTime,
    group           String,
    topic           String,
    flushes         UInt64,
    records         UInt64,
    rows_landed     UInt64,
    hit_rows_landed UInt64,
    last_event_time DateTime,
    last_flush      DateTime,
    version         UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(day)
ORDER BY (day, group, topic);
-- 0018_rollup_days statement 7
BACKFILL ROLLUP DAYS;
-- 0019_dlq_first_by_time statement 1
DROP TABLE IF EXISTS dlq_first;
-- 0019_dlq_first_by_time statement 2
CREATE TABLE IF NOT EXISTS dlq_first (
    origin_time      DateTime,
    origin_topic     String,
    origin_partition Int32,
    origin_offset    Int64,
    stage            String,
    orphan           String,
    dlq_topic        String,
    dlq_partition    Int32,
    dlq_offset       Int64,
    version          UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMMDD(origin_time)
ORDER BY (origin_time, origin_topic, origin_partition, origin_offset, stage, orphan);
-- 0019_dlq_first_by_time statement 3
BACKFILL DLQ FIRST;
