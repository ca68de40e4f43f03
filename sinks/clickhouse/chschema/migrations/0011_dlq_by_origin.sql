-- The DLQ mirror's view counts each bad record once, by its origin. A replay of ingest in a new
-- epoch dead-letters its poison again: new DLQ positions, the same origin (topic, partition,
-- offset). dlq_entries keeps both rows (they are both in the DLQ topic); v_dlq_entries, which
-- the dashboards read, keeps the first by DLQ position per (origin, stage). An entry without
-- readable DLQ headers (class unreadable_entry, no origin) is kept by its DLQ position.
-- A view cannot be altered on 18.16: it is dropped and created again (both steps are safe to
-- re-run, and views hold no data).
DROP TABLE IF EXISTS v_dlq_entries;
CREATE VIEW IF NOT EXISTS v_dlq_entries AS
SELECT *
FROM dlq_entries FINAL
ORDER BY dlq_topic, dlq_partition, dlq_offset
LIMIT 1 BY origin_topic, origin_partition, origin_offset, stage,
    if(origin_topic = '', concat(dlq_topic, '/', toString(dlq_partition), '/', toString(dlq_offset)), '')
