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
	if len(ms) != 7 {
		t.Fatalf("%d migrations, want 7", len(ms))
	}
	// ClickHouse 18.16 rejects these; they may appear in comments only.
	forbidden := regexp.MustCompile(`(?i)\bTTL\b|\bMap\(|DateTime64|LowCardinality|ADD COLUMN IF NOT EXISTS`)
	for i, m := range ms {
		if m.Version != uint32(i+1) {
			t.Fatalf("migration %d has version %d: versions must run 1, 2, 3...", i, m.Version)
		}
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
