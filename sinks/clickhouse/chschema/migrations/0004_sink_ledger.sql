-- One row per (flush, topic, partition) the sink committed: which offsets of the enriched topic
-- it wrote, and how many rows they became. Plain MergeTree: an audit log, never collapsed. A
-- flush that is redelivered after a crash between insert and commit appears twice, and so do
-- its rows in the raw (non-FINAL) tables.
-- rows: rows written to inference_results + gateway_logs (one per enriched record);
-- hit_rows: rows written to moderation_hits.
-- The same on every server; 0010_ttl adds a 90-day TTL where the server has TTL.
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
ORDER BY (group, topic, partition, min_offset)
