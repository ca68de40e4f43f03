-- The day level of the rollups (internal/rollup, docs/dashboards.md): per rollup, a row per UTC
-- day and combination of dimensions, merged from the day's hour rows with the hour level's own
-- merges (sums, maxima, quantile states), so a panel over 30 days reads 30 rows a key where it
-- read 720. The rollup loop writes a day again whenever it writes one of its hours (the same
-- marks), and the rollups' backfill (0017) builds days with the hours; the days of the hours
-- already rolled up are built here, from those hours (BACKFILL ROLLUP DAYS is backflow's, not
-- ClickHouse's: sinks/clickhouse/chschema/backfill.go; running it again changes nothing). Like
-- 0017, it is for `backflow migrate` with the sinks stopped, or a stage's start-up before its
-- loops.
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

BACKFILL ROLLUP DAYS
