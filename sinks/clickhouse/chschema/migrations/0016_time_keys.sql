-- Tables keyed for time (docs/dashboards.md): a query with a time filter reads only its minutes'
-- granules, where the keys of 0001-0006 (source and request id first) made every query read the
-- whole month. Each table is sorted by the minute of its time first and partitioned by day. A
-- re-written row still collapses with its first copy: a row's time never changes, so its minute
-- and its day are those of every copy.
-- REBUILD TABLE is backflow's, not ClickHouse's (sinks/clickhouse/rebuild.go): ALTER cannot
-- change a sorting key, so the table is copied under the new key in chunks of its old key, the
-- progress recorded in backflow_rebuilds (a stopped run goes on), and swapped by RENAME; the old
-- rows stay in <table>_before_0016 for the operator to drop. A stage applies it at start-up only
-- to a table of at most a million rows; a larger one needs `backflow migrate`, with the ClickHouse
-- sinks stopped (`backflow migrate --dry-run` shows each table's rows and progress).
REBUILD TABLE inference_results PARTITION BY toYYYYMMDD(event_time) ORDER BY (toStartOfMinute(event_time), source_topic, request_id);
REBUILD TABLE gateway_logs PARTITION BY toYYYYMMDD(event_time) ORDER BY (toStartOfMinute(event_time), source_topic, request_id, phase);
REBUILD TABLE moderation_hits PARTITION BY toYYYYMMDD(event_time) ORDER BY (toStartOfMinute(event_time), source_topic, request_id, phase, start);
REBUILD TABLE dlq_entries PARTITION BY toYYYYMMDD(error_time) ORDER BY (toStartOfMinute(error_time), dlq_topic, dlq_partition, dlq_offset);
REBUILD TABLE sink_ledger PARTITION BY toYYYYMMDD(flushed_at) ORDER BY (toStartOfMinute(flushed_at), group, topic, partition, min_offset)
