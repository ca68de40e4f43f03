// Package clickhouse is backflow's ClickHouse sink. Start with Sink, the one loop from a
// Kafka topic into ClickHouse (poll, map, buffer, flush, retry, DLQ, ledger, rollup marks,
// commit), and the contract of the mappings it runs (Mapping, mapping.go): the built-in tables
// (New), a declared stream's table (NewStream), and, through NewLoop, the mappings of the two
// stages that run on this loop as consumer groups of their own, each in a package named by its
// stage: the DLQ mirror, stage sink-clickhouse-dlq-mirror, in dlqmirror; the rollup loop, stage
// sink-clickhouse-rollups, in rollups. What the tables are and how they get there (migrations,
// the streams' tables and their evolution, rebuilds, the cluster's DDL) is the schema engine's,
// package chschema below this folder, which also says where ClickHouse is (chschema.Conn).
// Config says what the sink reads and how it batches (its section also holds the two stages'
// keys). Rows are versioned by Version, so re-writes collapse in the ReplacingMergeTree tables
// and the v_* views (FINAL) show one row per key.
//
// The files, by job: the loop (sink.go, flush.go, retry.go, insert.go), the mapping contract
// and NewLoop (mapping.go), the one batch contract and its writer (batch.go, columns.go,
// writer.go), the mappings of this package (enriched.go and rows.go, stream.go and
// stream_rows.go), the rollup marks a flush leaves for the rollup loop (rollup_marks.go) and
// the error classes (errors.go).
//
// clickhouse-go v2 is used over the native protocol only, because the HTTP protocol fails
// against ClickHouse 18.16 ("Unknown setting client_protocol_version"). Against 18.16, an INSERT
// must name its columns and go through PrepareBatch (conn.Exec of an INSERT hangs); DDL must do
// without TTL, Map, DateTime64 and ADD COLUMN IF NOT EXISTS.
package clickhouse
