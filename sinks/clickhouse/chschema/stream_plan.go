package chschema

import (
	"context"
	"fmt"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	hamba "github.com/hamba/avro/v2"
)

// StreamPlan is what following a schema takes for a stream's table: creating it (and its
// view), or the columns to add, or nothing. Applied (ApplyStream), it is recorded as the
// stream's next version in StreamMigrationsTable.
type StreamPlan struct {
	Stream   StreamConfig
	SchemaID int      // the registry id of the schema the plan follows
	Columns  []Column // the schema's columns, as the table will have them
	Create   bool     // the table does not exist yet
	// Statements are the DDL in order: CREATE TABLE and CREATE VIEW, or the ADD and MODIFY
	// COLUMNs and the view's re-creation; empty: up to date.
	Statements []string
	// Version is the version the plan would be recorded under (the stream's last one, plus
	// one), or with no Statements the version the table is at; 0 for a stream whose table
	// backflow has not recorded (StreamMigrationsTable missing or without its rows).
	Version uint32
}

// Change says in a few words what the plan does: "create", "add columns a, b", "modify
// columns c" (a type it follows: new enum symbols, a promotion), both joined by "; ", or "up
// to date".
func (p StreamPlan) Change() string {
	if p.Create {
		return "create"
	}
	var added, modified []string
	for _, s := range p.Statements {
		if m := addColumn.FindStringSubmatch(s); m != nil {
			added = append(added, m[2])
		}
		if m := modifyColumn.FindStringSubmatch(s); m != nil {
			modified = append(modified, m[2])
		}
	}
	var parts []string
	for _, s := range p.Statements {
		if _, ok := parseRebuild(0, s); ok {
			parts = append(parts, "rebuild under the time key")
		}
	}
	if len(added) > 0 {
		parts = append(parts, "add columns "+strings.Join(added, ", "))
	}
	if len(modified) > 0 {
		parts = append(parts, "modify columns "+strings.Join(modified, ", "))
	}
	if len(parts) == 0 {
		return "up to date"
	}
	return strings.Join(parts, "; ")
}

// Heads are the first line of each statement, for a log line each.
func (p StreamPlan) Heads() []string {
	out := make([]string, len(p.Statements))
	for i, s := range p.Statements {
		out[i] = firstLine(s)
	}
	return out
}

// PlanStream compares the stream's table on the server conn is connected to with the columns
// schema (registry id schemaID) derives: a table to create, columns to add or modify
// (PlanEvolution), or nothing. A change the table cannot follow is an *IncompatibleError naming the field.
func PlanStream(ctx context.Context, conn driver.Conn, c StreamConfig, schema hamba.Schema, schemaID int, caps Capabilities) (StreamPlan, error) {
	c = c.WithDefaults()
	cols, err := c.Columns(schema, caps)
	if err != nil {
		return StreamPlan{}, fmt.Errorf("stream %s: %w", c.Name, err)
	}
	p := StreamPlan{Stream: c, SchemaID: schemaID, Columns: cols}
	have, err := tableColumns(ctx, conn, c.Table)
	if err != nil {
		return p, err
	}
	var last uint32
	if ok, err := TableExists(ctx, conn, StreamMigrationsTable); err != nil {
		return p, err
	} else if ok { // absent before the built-in migrations ran (a first migrate --dry-run)
		if last, err = lastStreamVersion(ctx, conn, c.Name); err != nil {
			return p, err
		}
	}
	p.Version = last
	if len(have) == 0 {
		p.Create = true
		p.Statements = []string{c.Spec(cols).CreateDDL(), c.ViewDDL()}
	} else {
		spec := c.Spec(cols)
		stmts, err := PlanEvolution(c.Table, have, cols, spec.OrderBy...)
		if err != nil {
			return p, fmt.Errorf("stream %s: table %s: %w", c.Name, c.Table, err)
		}
		p.Statements = c.ViewAfter(stmts)
		// A table made before streams were keyed for time gets its new key (rebuild.go).
		if rb := spec.RebuildDDL(); rb != "" {
			// In cluster mode the table is Distributed (no sorting key) over <table>_local.
			var key string
			if err := conn.QueryRow(ctx, "SELECT max(sorting_key) FROM system.tables WHERE database = currentDatabase() AND name IN (?, ?)", c.Table, c.Table+LocalSuffix).Scan(&key); err != nil {
				return p, fmt.Errorf("stream %s: sorting key of %s: %w", c.Name, c.Table, err)
			}
			if !sameKey(key, spec.orderBy()) {
				p.Statements = append(p.Statements, rb)
			}
		}
	}
	if len(p.Statements) > 0 {
		p.Version = last + 1
	}
	return p, nil
}

// tableColumns lists the columns the table has in the connection's database (none when it
// does not exist).
func tableColumns(ctx context.Context, conn driver.Conn, table string) ([]Column, error) {
	rows, err := conn.Query(ctx, `SELECT name, type FROM system.columns WHERE database = currentDatabase() AND table = ?`, table)
	if err != nil {
		return nil, fmt.Errorf("clickhouse: columns of %s: %w", table, err)
	}
	defer rows.Close()
	var out []Column
	for rows.Next() {
		var c Column
		if err := rows.Scan(&c.Name, &c.Type); err != nil {
			return nil, fmt.Errorf("clickhouse: columns of %s: %w", table, err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// ApplyStream runs a plan's statements on the ClickHouse c points at, then records them in
// StreamMigrationsTable as the stream's next version, which it returns (0: nothing to apply).
// It is the migrations' engine (migrate.go): in cluster mode the table becomes a replicated
// <table>_local on every shard under a Distributed <table>, the view and the added columns run
// ON CLUSTER. An ADD COLUMN whose column is already there is skipped, so applying a plan twice
// converges (and records it twice: a failure between the DDL and its row is retried whole).
func ApplyStream(ctx context.Context, c Conn, p StreamPlan) (uint32, error) {
	if len(p.Statements) == 0 {
		return 0, nil
	}
	t, err := openTarget(ctx, c, map[string]bool{p.Stream.Table: true})
	if err != nil {
		return 0, err
	}
	defer t.close()
	t.version = p.Version
	if err := t.apply(ctx, "stream "+p.Stream.Name, p.Statements); err != nil {
		return 0, err
	}
	return recordStream(ctx, t.seed, p)
}
