-- dlq_first (0015) bounded by time. Keyed by origin alone, it kept one row per origin ever
-- dead-lettered, and the DLQ rollup's lookup of a range's origins read from the lowest origin
-- offset among them: one origin partition with low offsets made it read nearly the whole table.
-- Now the origin's time leads the key, and partitions are by its day: every entry of an origin
-- carries the same origin time, so its copies still meet in one partition and FINAL still keeps
-- the first; a lookup reads the granules of its origins' times, whatever the table's age; and a
-- day's partition is dropped once it is older than the dead-letter topic's retention (the DLQ
-- mirror does it, reading retention.ms from the topic: docs/dashboards.md). An entry without an
-- origin (orphan) carries its own dead-letter time. The table is derived: it is dropped and
-- filled again from dlq_entries, and the DLQ rollup of every day is built again from it
-- (BACKFILL DLQ FIRST is backflow's, not ClickHouse's: sinks/clickhouse/chschema/backfill.go;
-- each day recorded when done); all three steps are safe to run again. Like 0017, it
-- is for `backflow migrate` with the sinks stopped, or a stage's start-up before its loops.
DROP TABLE IF EXISTS dlq_first;

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

BACKFILL DLQ FIRST
