package chschema

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/template"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migration is one numbered DDL file from migrations/: NNNN_name.sql. A file holds one or more
// statements separated by ';' at the end of a line. Every statement must be safe to run again
// (CREATE ... IF NOT EXISTS, ALTER ... MODIFY TTL), so a migration interrupted between its
// statements, or between its last statement and its tracking row, converges when re-run. 18.16
// has no ADD COLUMN IF NOT EXISTS, so Migrate skips an "ALTER TABLE t ADD COLUMN c ..."
// statement (one column per statement) when system.columns already lists c in t.
//
// A file is a text/template rendered for the server's Capabilities before it is split:
//
//	{{lowcard}}   LowCardinality(String) where the server has it, else String
//	{{time}}      DateTime64(3) where the server has it, else DateTime
//	{{ifnotexists}} "IF NOT EXISTS " in an ADD COLUMN where the server has it, else nothing
//
// With no capabilities (ClickHouse 18.16) every file renders to the DDL written for 18.16,
// byte for byte (testdata/migrations-18.16.golden.sql pins that). A line
// "-- requires: ttl[, ...]" makes the whole migration wait until the server has those
// capabilities: it is neither applied nor recorded before, and `migrate` applies it on the first
// run against a server that has them (after an upgrade, say).
type Migration struct {
	Version    uint32
	Name       string
	Statements []string
	// Requires names the capabilities the migration needs (CapTTL, ...); empty for most.
	Requires []string
}

var (
	migrationName = regexp.MustCompile(`^(\d{4})_([a-z0-9_]+)\.sql$`)
	requiresLine  = regexp.MustCompile(`(?m)^--\s*requires:\s*(.+)$`)
)

// Migrations returns the embedded migrations rendered for a server without any of the newer
// features (ClickHouse 18.16), in version order; migrations that wait for a capability are
// left out. MigrationsFor renders them for another server.
func Migrations() ([]Migration, error) { return MigrationsFor(Capabilities{}) }

// MigrationsFor returns the embedded migrations rendered for a server with caps, in version
// order, leaving out those whose Requires caps lacks (WaitingFor lists them).
func MigrationsFor(caps Capabilities) ([]Migration, error) {
	ready, _, err := parseMigrations(migrationFiles, "migrations", caps)
	return ready, err
}

// WaitingFor returns the embedded migrations a server with caps cannot run yet, because it
// lacks a capability they require.
func WaitingFor(caps Capabilities) ([]Migration, error) {
	_, waiting, err := parseMigrations(migrationFiles, "migrations", caps)
	return waiting, err
}

// templateFuncs are the functions a migration file may call, rendered for caps.
func templateFuncs(caps Capabilities) template.FuncMap {
	return template.FuncMap{
		"lowcard": func() string {
			if caps.LowCardinality {
				return "LowCardinality(String)"
			}
			return "String"
		},
		"time": func() string {
			if caps.DateTime64 {
				return "DateTime64(3)"
			}
			return "DateTime"
		},
		"ifnotexists": func() string {
			if caps.AddColumnIfNotExists {
				return "IF NOT EXISTS "
			}
			return ""
		},
	}
}

func parseMigrations(fsys fs.FS, dir string, caps Capabilities) (ready, waiting []Migration, err error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, nil, fmt.Errorf("clickhouse: migrations: %w", err)
	}
	seen := map[uint32]string{}
	for _, e := range entries {
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, nil, fmt.Errorf("clickhouse: migrations: %q is not named NNNN_name.sql", e.Name())
		}
		v, _ := strconv.ParseUint(m[1], 10, 32)
		if prev, dup := seen[uint32(v)]; dup {
			return nil, nil, fmt.Errorf("clickhouse: migrations: version %d used by %s and %s", v, prev, e.Name())
		}
		seen[uint32(v)] = e.Name()
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, nil, fmt.Errorf("clickhouse: migrations: %w", err)
		}
		tmpl, err := template.New(e.Name()).Funcs(templateFuncs(caps)).Option("missingkey=error").Parse(string(b))
		if err != nil {
			return nil, nil, fmt.Errorf("clickhouse: migrations: %w", err)
		}
		var src strings.Builder
		if err := tmpl.Execute(&src, caps); err != nil {
			return nil, nil, fmt.Errorf("clickhouse: migrations: %w", err)
		}
		stmts := splitStatements(src.String())
		if len(stmts) == 0 {
			return nil, nil, fmt.Errorf("clickhouse: migrations: %s holds no statement", e.Name())
		}
		mig := Migration{Version: uint32(v), Name: m[2], Statements: stmts}
		lacks := false
		for _, r := range requiresLine.FindAllStringSubmatch(src.String(), -1) {
			for _, name := range strings.Split(r[1], ",") {
				name = strings.TrimSpace(name)
				if name != CapTTL && name != CapLowCardinality && name != CapDateTime64 {
					return nil, nil, fmt.Errorf("clickhouse: migrations: %s requires unknown capability %q", e.Name(), name)
				}
				mig.Requires = append(mig.Requires, name)
				lacks = lacks || !caps.Has(name)
			}
		}
		if lacks {
			waiting = append(waiting, mig)
		} else {
			ready = append(ready, mig)
		}
	}
	byVersion := func(ms []Migration) {
		sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	}
	byVersion(ready)
	byVersion(waiting)
	return ready, waiting, nil
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

// Pending returns the embedded migrations not yet recorded in MigrationsTable, in order,
// rendered for the server's capabilities (read with Server at each call); migrations that wait
// for a capability the server lacks are not pending.
func Pending(ctx context.Context, conn driver.Conn) ([]Migration, error) {
	v, err := Server(ctx, conn)
	if err != nil {
		return nil, err
	}
	all, err := MigrationsFor(v.Capabilities())
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

// Migrate applies the pending migrations (see Pending: rendered for the server's version) in
// version order, each once, and records each in MigrationsTable after all its statements
// succeeded (the engine of migrate.go on one server). It returns what it applied (empty when
// the database is up to date). It stops at the first failure; what was applied before it stays
// recorded, and a re-run continues from the failed migration. Two Migrate calls must not run at
// once against one database: ClickHouse has no transactional DDL to serialize them (one's
// REBUILD renames a table under the other's BACKFILL). The callers in pipelines take a lock
// on the Kafka brokers around it.
func Migrate(ctx context.Context, conn driver.Conn) ([]Migration, error) {
	return MigrateWith(ctx, conn, MigrateOptions{})
}

// MigrateWith is Migrate with o saying how the long statements run (a REBUILD, a BACKFILL).
func MigrateWith(ctx context.Context, conn driver.Conn, o MigrateOptions) ([]Migration, error) {
	pending, err := Pending(ctx, conn)
	if err != nil {
		return nil, err
	}
	t := onServer(conn)
	t.opts = o
	var applied []Migration
	for _, m := range pending {
		if o.UpTo != 0 && m.Version > o.UpTo {
			break
		}
		t.version = m.Version
		if err := t.apply(ctx, m.label(), m.Statements); err != nil {
			return applied, fmt.Errorf("clickhouse: %w", err)
		}
		if err := recordMigration(ctx, conn, m); err != nil {
			return applied, fmt.Errorf("clickhouse: %w", err)
		}
		applied = append(applied, m)
	}
	return applied, nil
}

// label names m in errors: migration 0004_sink_ledger.
func (m Migration) label() string { return fmt.Sprintf("migration %04d_%s", m.Version, m.Name) }
