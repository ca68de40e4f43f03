-- Deduplicated views for dashboards and analysts: FINAL collapses re-writes at read time, so
-- a view shows one row per key even before the background merge ran.
CREATE VIEW IF NOT EXISTS v_inference_results AS SELECT * FROM inference_results FINAL;
CREATE VIEW IF NOT EXISTS v_gateway_logs AS SELECT * FROM gateway_logs FINAL;
CREATE VIEW IF NOT EXISTS v_moderation_hits AS SELECT * FROM moderation_hits FINAL
