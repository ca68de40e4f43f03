package clickhouse

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"

	ch "github.com/ClickHouse/clickhouse-go/v2"
)

func TestMigrationsParse(t *testing.T) {
	ms, err := Migrations()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 7 {
		t.Fatalf("%d migrations, want 7", len(ms))
	}
	// ClickHouse 18.16 rejects these; they may appear in comments only.
	forbidden := regexp.MustCompile(`(?i)\bTTL\b|\bMap\(|DateTime64|LowCardinality|ADD COLUMN IF NOT EXISTS`)
	// Numbers are reserved per area (README), so there may be gaps; the order must be strict.
	for i, m := range ms {
		if i == 0 && m.Version != 1 || i > 0 && m.Version <= ms[i-1].Version {
			t.Fatalf("migration %d has version %d: versions must start at 1 and increase", i, m.Version)
		}
		for _, s := range m.Statements {
			if forbidden.MatchString(s) {
				t.Errorf("%04d_%s uses a feature 18.16 lacks: %s", m.Version, m.Name, forbidden.FindString(s))
			}
			if strings.HasPrefix(s, "CREATE") && !strings.Contains(s, "IF NOT EXISTS") {
				t.Errorf("%04d_%s: %q is not safe to run twice", m.Version, m.Name, s[:40])
			}
			if strings.HasPrefix(s, "ALTER") && !columnAlreadyAdded(s, &ch.Exception{Code: codeIllegalColumn, Message: "already exists"}) {
				t.Errorf("%04d_%s: %q is not one ADD COLUMN, so not safe to run twice", m.Version, m.Name, s)
			}
			if strings.Contains(s, "ENGINE = ReplacingMergeTree") && (!strings.Contains(s, "ReplacingMergeTree(version)") || !regexp.MustCompile(`PARTITION BY toYYYYMM\((event_time|error_time)\)`).MatchString(s)) {
				t.Errorf("%04d_%s: ReplacingMergeTree without the version column or the event-time partition", m.Version, m.Name)
			}
		}
	}
	if got := len(ms[4].Statements); got != 3 {
		t.Fatalf("views migration has %d statements, want 3", got)
	}
}

func TestParseMigrationsRejectsBadNames(t *testing.T) {
	for name, files := range map[string]fstest.MapFS{
		"bad name":  {"m/1_x.sql": {Data: []byte("SELECT 1")}},
		"duplicate": {"m/0001_a.sql": {Data: []byte("SELECT 1")}, "m/0001_b.sql": {Data: []byte("SELECT 1")}},
		"empty":     {"m/0001_a.sql": {Data: []byte("-- nothing\n")}},
	} {
		if _, err := parseMigrations(files, "m"); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	ms, err := parseMigrations(fstest.MapFS{"m/0002_b.sql": {Data: []byte("SELECT 2;\n-- c;\nSELECT\n 3\n")}, "m/0001_a.sql": {Data: []byte("SELECT 1")}}, "m")
	if err != nil || len(ms) != 2 || ms[0].Name != "a" || len(ms[1].Statements) != 2 || ms[1].Statements[1] != "SELECT\n 3" {
		t.Fatalf("%+v %v", ms, err)
	}
}

func TestColumnAlreadyAdded(t *testing.T) {
	exists := &ch.Exception{Code: codeIllegalColumn, Message: "Cannot add column event_time_ms: column with this name already exists"}
	for _, tt := range []struct {
		name string
		stmt string
		err  error
		want bool
	}{
		{"18.16 answer", "ALTER TABLE t ADD COLUMN c Int64 DEFAULT 0", exists, true},
		{"newer servers' code", "alter table t\n  add column c Int64", &ch.Exception{Code: codeDuplicateColumn, Message: "column c already exists"}, true},
		{"other statement", "CREATE TABLE t (c Int64) ENGINE = Log", exists, false},
		{"two columns at once", "ALTER TABLE t ADD COLUMN a Int64, ADD COLUMN b Int64", exists, false},
		{"other illegal column", "ALTER TABLE t ADD COLUMN c Foo", &ch.Exception{Code: codeIllegalColumn, Message: "bad type"}, false},
		{"not an exception", "ALTER TABLE t ADD COLUMN c Int64", errors.New("already exists"), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := columnAlreadyAdded(tt.stmt, fmt.Errorf("wrapped: %w", tt.err)); got != tt.want {
				t.Fatalf("columnAlreadyAdded(%q, %v) = %v, want %v", tt.stmt, tt.err, got, tt.want)
			}
		})
	}
}
