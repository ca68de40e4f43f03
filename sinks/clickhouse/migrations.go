package clickhouse

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// MigrationsTable tracks which migrations ran: one row per applied migration.
const MigrationsTable = "backflow_migrations"

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migration is one numbered DDL file from migrations/: NNNN_name.sql. A file holds one or more
// statements separated by ';' at the end of a line. Every statement must be safe to run again
// (CREATE ... IF NOT EXISTS, or an ALTER TABLE ... ADD COLUMN of one column, whose "already
// exists" Migrate takes as done), so a migration interrupted between its statements, or between
// its last statement and its tracking row, converges when re-run.
type Migration struct {
	Version    uint32
	Name       string
	Statements []string
}

var migrationName = regexp.MustCompile(`^(\d{4})_([a-z0-9_]+)\.sql$`)

// Migrations returns the embedded migrations in version order.
func Migrations() ([]Migration, error) { return parseMigrations(migrationFiles, "migrations") }

func parseMigrations(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("clickhouse: migrations: %w", err)
	}
	var out []Migration
	seen := map[uint32]string{}
	for _, e := range entries {
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("clickhouse: migrations: %q is not named NNNN_name.sql", e.Name())
		}
		v, _ := strconv.ParseUint(m[1], 10, 32)
		if prev, dup := seen[uint32(v)]; dup {
			return nil, fmt.Errorf("clickhouse: migrations: version %d used by %s and %s", v, prev, e.Name())
		}
		seen[uint32(v)] = e.Name()
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("clickhouse: migrations: %w", err)
		}
		stmts := splitStatements(string(b))
		if len(stmts) == 0 {
			return nil, fmt.Errorf("clickhouse: migrations: %s holds no statement", e.Name())
		}
		out = append(out, Migration{Version: uint32(v), Name: m[2], Statements: stmts})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// splitStatements drops '--' comment lines and splits at ';' ending a line.
func splitStatements(src string) []string {
	var out []string
	var cur strings.Builder
	emit := func() {
		if s := strings.TrimSpace(cur.String()); s != "" {
			out = append(out, s)
		}
		cur.Reset()
	}
	for _, line := range strings.Split(src, "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "--") {
			continue
		}
		if strings.HasSuffix(t, ";") {
			cur.WriteString(strings.TrimSuffix(strings.TrimRight(line, " \t\r"), ";"))
			emit()
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
	}
	emit()
	return out
}

// AppliedMigration is a row of MigrationsTable.
type AppliedMigration struct {
	Version   uint32
	Name      string
	AppliedAt time.Time
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

// Pending returns the embedded migrations not yet recorded in MigrationsTable, in order.
func Pending(ctx context.Context, conn driver.Conn) ([]Migration, error) {
	all, err := Migrations()
	if err != nil {
		return nil, err
	}
	done, err := Applied(ctx, conn)
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, m := range all {
		if _, ok := done[m.Version]; !ok {
			out = append(out, m)
		}
	}
	return out, nil
}

// Migrate applies the pending migrations in version order, each once, and records each in
// MigrationsTable after all its statements succeeded. It returns what it applied (empty when
// the database is up to date). It stops at the first failure; what was applied before it stays
// recorded, and a re-run continues from the failed migration. Two Migrate calls must not run at
// once against one database: ClickHouse has no transactional DDL to serialize them (both would
// succeed, thanks to IF NOT EXISTS, but record the migration twice; Applied tolerates that).
func Migrate(ctx context.Context, conn driver.Conn) ([]Migration, error) {
	pending, err := Pending(ctx, conn)
	if err != nil {
		return nil, err
	}
	var applied []Migration
	for _, m := range pending {
		for i, stmt := range m.Statements {
			if err := conn.Exec(ctx, stmt); err != nil && !columnAlreadyAdded(stmt, err) {
				return applied, fmt.Errorf("clickhouse: migration %04d_%s statement %d: %w", m.Version, m.Name, i+1, err)
			}
		}
		// Inserts go through PrepareBatch with named columns: conn.Exec of an INSERT hangs
		// against 18.16.
		b, err := conn.PrepareBatch(ctx, `INSERT INTO `+MigrationsTable+` (version, name, applied_at) VALUES`)
		if err != nil {
			return applied, fmt.Errorf("clickhouse: record migration %04d_%s: %w", m.Version, m.Name, err)
		}
		if err := b.Append(m.Version, m.Name, time.Now().UTC()); err != nil {
			b.Abort()
			return applied, fmt.Errorf("clickhouse: record migration %04d_%s: %w", m.Version, m.Name, err)
		}
		if err := b.Send(); err != nil {
			return applied, fmt.Errorf("clickhouse: record migration %04d_%s: %w", m.Version, m.Name, err)
		}
		applied = append(applied, m)
	}
	return applied, nil
}

// columnAlreadyAdded reports whether err is ClickHouse refusing an ALTER TABLE ... ADD COLUMN
// statement because the column exists: the statement ran before (a migration interrupted after
// it), and 18.16 has no ADD COLUMN IF NOT EXISTS. 18.16 answers 44 ILLEGAL_COLUMN, newer servers
// 15 DUPLICATE_COLUMN or 44, each with "already exists".
func columnAlreadyAdded(stmt string, err error) bool {
	var ex *ch.Exception
	if !errors.As(err, &ex) || (ex.Code != codeIllegalColumn && ex.Code != codeDuplicateColumn) {
		return false
	}
	s := strings.ToUpper(strings.Join(strings.Fields(stmt), " "))
	return strings.HasPrefix(s, "ALTER TABLE ") && strings.Contains(s, " ADD COLUMN ") &&
		!strings.Contains(s, ",") && strings.Contains(ex.Message, "already exists")
}
