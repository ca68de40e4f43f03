-- Millisecond times for latency: 18.16 has only second-resolution DateTime (no DateTime64), so
-- the event time and the moment the sink sent the row's INSERT are kept as Unix milliseconds
-- beside it. Latency = landed_time_ms - event_time_ms (bench/ reads it this way). Rows written
-- before this migration read event_time_ms from event_time (whole seconds) and landed_time_ms 0.
-- ADD COLUMN has no IF NOT EXISTS on 18.16; Migrate treats "column already exists" from an
-- ADD COLUMN as already applied, so a re-run after an interruption converges.
-- Newer servers: DateTime64(3) columns would do the same job.
ALTER TABLE inference_results ADD COLUMN event_time_ms Int64 DEFAULT toInt64(toUInt32(event_time)) * 1000;
ALTER TABLE inference_results ADD COLUMN landed_time_ms Int64 DEFAULT 0;
ALTER TABLE gateway_logs ADD COLUMN event_time_ms Int64 DEFAULT toInt64(toUInt32(event_time)) * 1000;
ALTER TABLE gateway_logs ADD COLUMN landed_time_ms Int64 DEFAULT 0
