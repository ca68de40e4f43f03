package chschema

import (
	"flag"
	"fmt"
	"io/fs"
	"os"
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
	// On 18.16, 0010_ttl waits: all files but one.
	files, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil || len(files) < 15 {
		t.Fatalf("%d migration files (%v)", len(files), err)
	}
	if len(ms) != len(files)-1 {
		t.Fatalf("%d migrations, want %d", len(ms), len(files)-1)
	}
	byVersion := map[uint32]Migration{}
	// ClickHouse 18.16 rejects these; they may appear in comments only.
	forbidden := regexp.MustCompile(`(?i)\bTTL\b|\bMap\(|DateTime64|LowCardinality|ADD COLUMN IF NOT EXISTS`)
	// Numbers are reserved per area (docs/architecture.md), so there may be gaps; the order must be strict.
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
			if strings.HasPrefix(s, "ALTER") && (!addColumn.MatchString(s) || strings.Contains(s, ",")) {
				t.Errorf("%04d_%s: %q is not one ADD COLUMN, so not safe to run twice", m.Version, m.Name, s)
			}
			// A ReplacingMergeTree collapses by its version; one with partitions has them by the
			// month of a time that never changes for a row (its copies meet in one partition).
			// rollup_watermarks is keyed by what it collapses, without partitions; dlq_first (0019)
			// by the day of its origin's time, the same in every copy of a row.
			if strings.Contains(s, "ENGINE = ReplacingMergeTree") && (!strings.Contains(s, "ReplacingMergeTree(version)") ||
				strings.Contains(s, "PARTITION BY") && !regexp.MustCompile(`PARTITION BY (toYYYYMM\((event_time|error_time|minute|hour|day)\)|toYYYYMMDD\(origin_time\))`).MatchString(s) ||
				!strings.Contains(s, "PARTITION BY") && !regexp.MustCompile(`EXISTS (dlq_first|rollup_watermarks) `).MatchString(s)) {
				t.Errorf("%04d_%s: ReplacingMergeTree without the version column or the time partition", m.Version, m.Name)
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
		"ALTER TABLE t ADD COLUMN IF NOT EXISTS c UInt8":                                   {"t", "c"},
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
		"bad name":           {"m/1_x.sql": {Data: []byte("SELECT 1")}},
		"duplicate":          {"m/0001_a.sql": {Data: []byte("SELECT 1")}, "m/0001_b.sql": {Data: []byte("SELECT 1")}},
		"empty":              {"m/0001_a.sql": {Data: []byte("-- nothing\n")}},
		"unknown capability": {"m/0001_a.sql": {Data: []byte("-- requires: map\nSELECT 1")}},
		"bad template":       {"m/0001_a.sql": {Data: []byte("SELECT {{nosuch}}")}},
	} {
		if _, _, err := parseMigrations(files, "m", Capabilities{}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	ms, _, err := parseMigrations(fstest.MapFS{"m/0002_b.sql": {Data: []byte("SELECT 2;\n-- c;\nSELECT\n 3\n")}, "m/0001_a.sql": {Data: []byte("SELECT 1")}}, "m", Capabilities{})
	if err != nil || len(ms) != 2 || ms[0].Name != "a" || len(ms[1].Statements) != 2 || ms[1].Statements[1] != "SELECT\n 3" {
		t.Fatalf("%+v %v", ms, err)
	}
}

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/migrations-18.16.golden.sql (after adding a migration)")

// TestMigrationsFallbackGolden: rendered for a server without the newer features (18.16), the
// migrations are exactly the DDL written for 18.16, statement by statement (0001-0006 as they
// were before rendering existed; a new migration adds its DDL with -update-golden), and the
// TTL migration waits.
func TestMigrationsFallbackGolden(t *testing.T) {
	want, err := os.ReadFile("testdata/migrations-18.16.golden.sql")
	if err != nil {
		t.Fatal(err)
	}
	v, err := ParseServerVersion("18.16.1")
	if err != nil {
		t.Fatal(err)
	}
	if v.Capabilities() != (Capabilities{}) {
		t.Fatalf("18.16.1 has %v, want none", v.Capabilities())
	}
	ms, err := MigrationsFor(v.Capabilities())
	if err != nil {
		t.Fatal(err)
	}
	if *updateGolden {
		if err := os.WriteFile("testdata/migrations-18.16.golden.sql", []byte(renderGolden(ms)), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got := renderGolden(ms); got != string(want) {
		t.Fatalf("18.16 rendering differs from testdata/migrations-18.16.golden.sql:\n%s", got)
	}
	waiting, err := WaitingFor(v.Capabilities())
	if err != nil || len(waiting) != 1 || waiting[0].Version != 10 || fmt.Sprint(waiting[0].Requires) != "[ttl]" {
		t.Fatalf("waiting on 18.16: %+v (%v), want 0010_ttl requiring ttl", waiting, err)
	}
}

func renderGolden(ms []Migration) string {
	var b strings.Builder
	for _, m := range ms {
		for i, s := range m.Statements {
			fmt.Fprintf(&b, "-- %04d_%s statement %d\n%s;\n", m.Version, m.Name, i+1, s)
		}
	}
	return b.String()
}

// TestMigrationsRenderPerCapability: each capability changes only what it names.
func TestMigrationsRenderPerCapability(t *testing.T) {
	count := func(caps Capabilities, re string) (n int, versions []uint32) {
		ms, err := MigrationsFor(caps)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			versions = append(versions, m.Version)
			for _, s := range m.Statements {
				n += len(regexp.MustCompile(re).FindAllString(s, -1))
			}
		}
		return n, versions
	}
	if n, _ := count(Capabilities{LowCardinality: true}, `LowCardinality\(String\)`); n != 16 {
		t.Errorf("LowCardinality columns: %d, want 16", n)
	}
	if n, _ := count(Capabilities{LowCardinality: true}, `DateTime64|TTL`); n != 0 {
		t.Errorf("LowCardinality alone brings %d DateTime64/TTL", n)
	}
	if n, _ := count(Capabilities{DateTime64: true}, `DateTime64\(3\)`); n != 7 {
		t.Errorf("DateTime64 columns: %d, want 7", n)
	}
	// With TTL every migration is ready, 0010_ttl included: versions 1 to the newest.
	n, versions := count(Capabilities{TTL: true}, `MODIFY TTL`)
	files, _ := fs.Glob(migrationFiles, "migrations/*.sql")
	var every []uint32
	for v := range len(files) {
		every = append(every, uint32(v+1))
	}
	if n != 5 || fmt.Sprint(versions) != fmt.Sprint(every) {
		t.Errorf("TTL: %d MODIFY TTL in %v, want 5 in %v", n, versions, every)
	}
	if n, _ := count(Capabilities{TTL: true}, `LowCardinality|DateTime64`); n != 0 {
		t.Errorf("TTL alone brings %d LowCardinality/DateTime64", n)
	}
}

func TestParseServerVersion(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Capabilities
		wantErr bool
	}{
		{in: "18.16.1", want: Capabilities{}},
		{in: "19.5.4.22", want: Capabilities{}},
		{in: "19.6.1.1", want: Capabilities{TTL: true}},
		{in: "19.17.2", want: Capabilities{TTL: true}},
		{in: "20.1.2.4", want: Capabilities{TTL: true, LowCardinality: true, DateTime64: true, AddColumnIfNotExists: true}},
		{in: "26.9.2.1", want: Capabilities{TTL: true, LowCardinality: true, DateTime64: true, AddColumnIfNotExists: true}},
		{in: " 24.8.4.13\n", want: Capabilities{TTL: true, LowCardinality: true, DateTime64: true, AddColumnIfNotExists: true}},
		{in: "25.3.1-testing", want: Capabilities{TTL: true, LowCardinality: true, DateTime64: true, AddColumnIfNotExists: true}},
		{in: "", wantErr: true},
		{in: "26", wantErr: true},
		{in: "x.y.z", wantErr: true},
	} {
		v, err := ParseServerVersion(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("%q: err %v, wantErr %v", tc.in, err, tc.wantErr)
			continue
		}
		if err == nil && v.Capabilities() != tc.want {
			t.Errorf("%q: %v, want %v", tc.in, v.Capabilities(), tc.want)
		}
	}
}
