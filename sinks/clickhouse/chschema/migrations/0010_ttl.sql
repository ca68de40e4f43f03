-- requires: ttl
-- Retention, on servers that have TTL (19.6 and later; not 18.16, where this migration waits
-- and is not recorded, so it runs on the first migrate after an upgrade). MODIFY TTL is safe
-- to run again. Rows go in background merges once their event time is older than:
--   inference_results, gateway_logs, moderation_hits: 400 days (a year of dashboards plus a
--   month of margin); sink_ledger and dlq_entries: 90 days (audit and triage).
-- toDateTime() keeps the expression valid for DateTime and DateTime64(3) columns alike.
ALTER TABLE inference_results MODIFY TTL toDateTime(event_time) + INTERVAL 400 DAY;
ALTER TABLE gateway_logs MODIFY TTL toDateTime(event_time) + INTERVAL 400 DAY;
ALTER TABLE moderation_hits MODIFY TTL toDateTime(event_time) + INTERVAL 400 DAY;
ALTER TABLE sink_ledger MODIFY TTL flushed_at + INTERVAL 90 DAY;
ALTER TABLE dlq_entries MODIFY TTL toDateTime(error_time) + INTERVAL 90 DAY
