-- The rollups (0015) of the rows the tables held before the rollup loop ran: every day of every
-- table a rollup reads, re-aggregated from FINAL, oldest first, and every dead letter's origin in
-- dlq_first. BACKFILL ROLLUPS is backflow's, not ClickHouse's (sinks/clickhouse/backfill.go):
-- each day done is recorded in backflow_rebuilds, so a stopped run goes on, and a day done twice
-- gives the same rows. It reads each table once, in its time order: after 0016, a day at a time.
BACKFILL ROLLUPS
