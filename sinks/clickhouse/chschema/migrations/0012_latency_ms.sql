-- Millisecond times for latency: 18.16 has only second-resolution DateTime (no DateTime64), so
-- the event time and the moment the sink sent the row's INSERT are kept as Unix milliseconds
-- beside it. Latency = landed_time_ms - event_time_ms (bench/ reads it this way). Rows written
-- before this migration read event_time_ms from event_time (whole seconds) and landed_time_ms 0.
-- Where the server has ADD COLUMN IF NOT EXISTS the statements carry it; 18.16 lacks it, and
-- there Migrate skips an ADD COLUMN whose column exists. Either way a re-run converges.
-- Newer servers: DateTime64(3) columns would do the same job.
ALTER TABLE inference_results ADD COLUMN {{ifnotexists}}event_time_ms Int64 DEFAULT toInt64(toUInt32(event_time)) * 1000;
ALTER TABLE inference_results ADD COLUMN {{ifnotexists}}landed_time_ms Int64 DEFAULT 0;
ALTER TABLE gateway_logs ADD COLUMN {{ifnotexists}}event_time_ms Int64 DEFAULT toInt64(toUInt32(event_time)) * 1000;
ALTER TABLE gateway_logs ADD COLUMN {{ifnotexists}}landed_time_ms Int64 DEFAULT 0
