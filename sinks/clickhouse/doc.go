// Package clickhouse is backflow's ClickHouse sink. Start with Sink, the one loop from a
// Kafka topic into ClickHouse (poll, map, buffer, flush, retry, DLQ, ledger, commit), and the
// mappings it runs (mapping.go): the built-in tables (New), a declared stream's table
// (NewStream) and the DLQ mirror (NewDLQMirror). Then Migrate, the one migration engine
// (migrate.go) applying the numbered DDL of migrations/ and the streams' versioned changes,
// on one server or a cluster. Conn says where ClickHouse is; Config what the sink reads and
// how it batches. Rows are versioned by Version, so re-writes collapse in the
// ReplacingMergeTree tables and the v_* views (FINAL) show one row per key.
//
// The files, by job: the loop (sink.go, flush.go, retry.go, insert.go), the one batch
// contract and its writer (batch.go, columns.go, writer.go), the mappings (mapping.go,
// enriched.go and rows.go, stream.go and stream_rows.go, mirror.go), migrations (migrate.go,
// ledger.go, migrations.go, cluster.go, capabilities.go), a declared stream's table
// (stream_config.go, stream_plan.go) and the Avro-to-column derivation it uses (derive.go,
// derive_values.go, evolve.go), a table rebuilt under a new key (rebuild.go, rebuild_plan.go,
// rebuild_log.go) and the rollup marks a flush leaves (rollup_marks.go).
//
// clickhouse-go v2 is used over the native protocol only, because the HTTP protocol fails
// against ClickHouse 18.16 ("Unknown setting client_protocol_version"). Against 18.16, an INSERT
// must name its columns and go through PrepareBatch (conn.Exec of an INSERT hangs); DDL must do
// without TTL, Map, DateTime64 and ADD COLUMN IF NOT EXISTS.
package clickhouse
