package chschema

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// The ledger of applied versions: a version, once every statement of it ran (migrate.go), is
// recorded with what it was, and a version recorded is never applied again.
//   - The numbered migrations go to MigrationsTable (version, name, when), which each server
//     keeps for itself: in cluster mode each host, so that a host added later shows what it
//     lacks (MigrateCluster).
//   - A declared stream's versions go to StreamMigrationsTable (the stream, its table, the
//     version, the schema id it followed, the change and its DDL), built by migration 0013: in
//     cluster mode a Distributed table like the stream's own, one history for the cluster.

// MigrationsTable tracks which migrations ran: one row per applied migration.
const MigrationsTable = "backflow_migrations"

// StreamMigrationsTable records each declared stream's versioned migrations, one row per
// version (migration 0013): version 1 created the table, each later one added or modified the
// columns of a newer schema.
const StreamMigrationsTable = "stream_migrations"

// AppliedMigration is a row of MigrationsTable.
type AppliedMigration struct {
	Version   uint32    `ch:"version"`
	Name      string    `ch:"name"`
	AppliedAt time.Time `ch:"applied_at"`
}

const createMigrationsTable = `CREATE TABLE IF NOT EXISTS ` + MigrationsTable + ` (
    version    UInt32,
    name       String,
    applied_at DateTime
) ENGINE = MergeTree ORDER BY version`

// Applied creates the tracking table if needed and returns what it records, by version.
func Applied(ctx context.Context, conn driver.Conn) (map[uint32]AppliedMigration, error) {
	if err := conn.Exec(ctx, createMigrationsTable); err != nil {
		return nil, fmt.Errorf("clickhouse: create %s: %w", MigrationsTable, err)
	}
	rows, err := conn.Query(ctx, `SELECT version, name, applied_at FROM `+MigrationsTable)
	if err != nil {
		return nil, fmt.Errorf("clickhouse: read %s: %w", MigrationsTable, err)
	}
	defer rows.Close()
	out := map[uint32]AppliedMigration{}
	for rows.Next() {
		var a AppliedMigration
		if err := rows.Scan(&a.Version, &a.Name, &a.AppliedAt); err != nil {
			return nil, fmt.Errorf("clickhouse: read %s: %w", MigrationsTable, err)
		}
		if _, ok := out[a.Version]; !ok {
			out[a.Version] = a
		}
	}
	return out, rows.Err()
}

// recordMigration records m as applied, now, on the server conn is connected to.
func recordMigration(ctx context.Context, conn driver.Conn, m Migration) error {
	row := AppliedMigration{Version: m.Version, Name: m.Name, AppliedAt: time.Now().UTC()}
	if err := InsertRows(ctx, conn, MigrationsTable, []AppliedMigration{row}); err != nil {
		return fmt.Errorf("record migration %04d_%s: %w", m.Version, m.Name, err)
	}
	return nil
}

// streamMigration is a row of StreamMigrationsTable.
type streamMigration struct {
	Stream     string    `ch:"stream"`
	Table      string    `ch:"table_name"`
	Version    uint32    `ch:"version"`
	SchemaID   uint32    `ch:"schema_id"`
	Change     string    `ch:"change"` // what StreamPlan.Change said
	Statements []string  `ch:"statements"`
	AppliedAt  time.Time `ch:"applied_at"`
}

// lastStreamVersion is the highest version recorded for the stream, 0 for none; the table
// must exist.
func lastStreamVersion(ctx context.Context, conn driver.Conn, stream string) (uint32, error) {
	var v uint32
	if err := conn.QueryRow(ctx, `SELECT max(version) FROM `+StreamMigrationsTable+` WHERE stream = ?`, stream).Scan(&v); err != nil {
		return 0, fmt.Errorf("clickhouse: read %s: %w", StreamMigrationsTable, err)
	}
	return v, nil
}

// recordStream records an applied plan as the stream's next version, which it returns.
func recordStream(ctx context.Context, conn driver.Conn, p StreamPlan) (uint32, error) {
	if err := CheckTable(ctx, conn, StreamMigrationsTable); err != nil {
		return 0, fmt.Errorf("stream %s: %w", p.Stream.Name, err)
	}
	last, err := lastStreamVersion(ctx, conn, p.Stream.Name)
	if err != nil {
		return 0, err
	}
	row := streamMigration{Stream: p.Stream.Name, Table: p.Stream.Table, Version: last + 1, SchemaID: uint32(p.SchemaID),
		Change: p.Change(), Statements: p.Statements, AppliedAt: time.Now().UTC()}
	if err := InsertRows(ctx, conn, StreamMigrationsTable, []streamMigration{row}); err != nil {
		return 0, fmt.Errorf("stream %s: record migration: %w", p.Stream.Name, err)
	}
	return last + 1, nil
}
