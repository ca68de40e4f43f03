package clickhouse

import (
	"regexp"
	"strings"
	"testing"
	"testing/fstest"
)

func TestMigrationsParse(t *testing.T) {
	ms, err := Migrations()
	if err != nil {
		t.Fatal(err)
	}
	// Every numbered file is a migration; numbers are unique and increasing (gaps allowed).
	if len(ms) != 9 {
		t.Fatalf("%d migrations, want 9", len(ms))
	}
	byVersion := map[uint32]Migration{}
	// ClickHouse 18.16 rejects these; they may appear in comments only.
	forbidden := regexp.MustCompile(`(?i)\bTTL\b|\bMap\(|DateTime64|LowCardinality|ADD COLUMN IF NOT EXISTS`)
	for i, m := range ms {
		if i > 0 && m.Version <= ms[i-1].Version {
			t.Fatalf("migration %d has version %d after %d: versions must increase", i, m.Version, ms[i-1].Version)
		}
		byVersion[m.Version] = m
		for _, s := range m.Statements {
			if forbidden.MatchString(s) {
				t.Errorf("%04d_%s uses a feature 18.16 lacks: %s", m.Version, m.Name, forbidden.FindString(s))
			}
			if strings.HasPrefix(s, "CREATE") && !strings.Contains(s, "IF NOT EXISTS") {
				t.Errorf("%04d_%s: %q is not safe to run twice", m.Version, m.Name, s[:40])
			}
			if strings.Contains(s, "ENGINE = ReplacingMergeTree") && (!strings.Contains(s, "ReplacingMergeTree(version)") || !regexp.MustCompile(`PARTITION BY toYYYYMM\((event_time|error_time)\)`).MatchString(s)) {
				t.Errorf("%04d_%s: ReplacingMergeTree without the version column or the event-time partition", m.Version, m.Name)
			}
		}
	}
	if got := len(byVersion[5].Statements); got != 3 {
		t.Fatalf("views migration has %d statements, want 3", got)
	}
	// The dashboards' migrations: the ledger column and 7 rollup views; the replay history view
	// over replay_log (0007).
	if got := len(byVersion[8].Statements); got != 8 {
		t.Fatalf("0008 has %d statements, want 8", got)
	}
	if got := len(byVersion[9].Statements); got != 1 {
		t.Fatalf("0009 has %d statements, want 1", got)
	}
}

func TestAddColumnPattern(t *testing.T) {
	for stmt, want := range map[string][]string{
		"ALTER TABLE sink_ledger ADD COLUMN max_event_time DateTime DEFAULT toDateTime(0)": {"sink_ledger", "max_event_time"},
		"alter table t\n  add column c UInt8":                                              {"t", "c"},
		"ALTER TABLE t MODIFY COLUMN c UInt8":                                              nil,
		"CREATE TABLE IF NOT EXISTS t (c UInt8) ENGINE = Memory":                           nil,
	} {
		m := addColumn.FindStringSubmatch(stmt)
		if (m == nil) != (want == nil) || (m != nil && (m[1] != want[0] || m[2] != want[1])) {
			t.Errorf("%q: matched %q, want %q", stmt, m, want)
		}
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
