// Package chschema is the ClickHouse sink's schema engine: what backflow's tables are, and how
// they get there. Start with Migrate (migrate.go), the one engine that applies the numbered
// DDL of migrations/ (rendered per server version: migrations.go, capabilities.go) and each
// declared stream's versioned changes (stream_plan.go: PlanStream, ApplyStream), on one server
// or on every host of a cluster (cluster.go), recording each version in its ledger (ledger.go).
// Conn says where ClickHouse is and Open connects to it, for the engine and the sink alike.
//
// The files, by job: a declared stream's config and table (stream_config.go), the Avro-to-column
// derivation and its evolution (derive.go, derive_values.go, evolve.go; Protobuf and JSON
// Schema subjects reach it as the Avro records they map to, package avro), a table rebuilt under a
// new key in chunks (rebuild.go, rebuild_plan.go, rebuild_log.go) and the rollups' backfill
// (backfill.go), the audit tables' inserts (insert.go) and the check that a table exists
// (tables.go).
//
// The sink loop (package clickhouse, the folder above) runs on this package; this package
// never imports it. cmd/backflow's migrate reaches it through pipelines.Migrate.
package chschema
