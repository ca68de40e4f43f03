-- A mirror of the dead-letter topic for dashboards: one row per DLQ record, keyed by where it
-- sits in the DLQ, so re-reading the DLQ collapses (version = dlq_offset). The raw key and
-- value stay in Kafka (re-drive reads them there); the mirror keeps the key as text and the
-- value's size.
-- Rendered per server: LowCardinality for stage and class, DateTime64(3) for the times where
-- available; 0010_ttl adds a 90-day TTL where the server has TTL.
CREATE TABLE IF NOT EXISTS dlq_entries (
    dlq_topic        String,
    dlq_partition    Int32,
    dlq_offset       Int64,
    origin_topic     String,
    origin_partition Int32,
    origin_offset    Int64,
    origin_time      {{time}},
    stage            {{lowcard}},
    class            {{lowcard}},
    message          String,
    error_time       {{time}},
    record_key       String,
    value_bytes      UInt32,
    truncated_from   UInt32,
    version          UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(error_time)
ORDER BY (dlq_topic, dlq_partition, dlq_offset);
CREATE VIEW IF NOT EXISTS v_dlq_entries AS SELECT * FROM dlq_entries FINAL
