-- The dashboards' rollups (internal/rollup, docs/dashboards.md): per-minute and per-hour rows
-- that mirror the per-minute views of 0008 and 0014, one pair of tables per family of panels.
-- A row is never changed in place: the sink's rollup loop re-aggregates whole minutes (and the
-- hours they fall in) from the deduplicated tables and writes them again with a higher version,
-- so the newest row per key (FINAL) is always an aggregate of what the views hold. Keys that a
-- re-aggregation no longer finds get a zero row. Columns, names and filters are internal/rollup's
-- definitions; a test holds the two together. Quantile states are the views' own
-- (quantilesState(0.5, 0.95, 0.99)), merged with quantilesMerge. Runs on 18.16 and current
-- releases; in cluster mode each becomes a replicated _local table and a Distributed table
-- sharded by its key, like the others.
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

-- The newest minute of each source table the rollup loop has rolled up: a panel reads rollups
-- below it and the table's own rows from it on (internal/rollup Range). The newest version
-- (the minute itself) is the watermark; readers take max(minute), so merges only tidy.
CREATE TABLE IF NOT EXISTS rollup_watermarks (
    source  String,
    minute  DateTime,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY source;

-- Each dead-lettered origin's first entry in the DLQ topic, the one v_dlq_entries keeps: the
-- DLQ mirror writes a row for every entry, versioned so that FINAL keeps the lowest DLQ
-- position (version = 2^64-1 - (partition << 40 | offset)). The DLQ rollup counts an entry only
-- if it is its origin's first; this table answers that by key, without a scan of dlq_entries.
-- orphan is the entry's own position where it has no origin (see 0011). The entries mirrored
-- before this migration are added by the rollups' backfill (docs/dashboards.md).
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

-- v_dlq_entries (0011) read dlq_entries FINAL with ORDER BY and LIMIT BY in one query. In cluster
-- mode, where dlq_entries is Distributed, 18.16 then asks the shards for the columns the outer
-- query names only, and FINAL finds neither its version nor its key ("Cannot find column ... in
-- source stream"), so v_dlq_entries and v_dlq_minute failed on a cluster. Reading FINAL in a
-- subquery of its own keeps every column; the answer is the same on one server.
DROP TABLE IF EXISTS v_dlq_entries;
CREATE VIEW IF NOT EXISTS v_dlq_entries AS
SELECT *
FROM (SELECT * FROM dlq_entries FINAL)
ORDER BY dlq_topic, dlq_partition, dlq_offset
LIMIT 1 BY origin_topic, origin_partition, origin_offset, stage,
    if(origin_topic = '', concat(dlq_topic, '/', toString(dlq_partition), '/', toString(dlq_offset)), '')
