package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/backflowhq/backflow/internal/dlq"
	"github.com/backflowhq/backflow/internal/rollup"
)

// TestDashboardHelpNamesItsMigrations: dashboard --help names the migrations that create what
// the panels read: for each table and view the dashboard and its rollups query, the last
// migration that creates it. Regression: the help named 0008 and 0009 after the panels had
// moved to the rollups of 0015.
func TestDashboardHelpNamesItsMigrations(t *testing.T) {
	_, help := runCLI(t, "dashboard", "--help")
	help = strings.Join(strings.Fields(help), " ")
	read := []string{rollup.Watermarks}
	for _, r := range rollup.All {
		read = append(read, r.Tables()...)
	}
	name := regexp.MustCompile(`\b(v_[a-z_]+|dlq_first)\b`)
	for _, dir := range []string{"internal/dashboard", "internal/rollup"} {
		files, err := filepath.Glob(filepath.Join("..", "..", dir, "*.go"))
		must(t, err)
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			must(t, err)
			read = append(read, name.FindAllString(string(b), -1)...)
		}
	}
	slices.Sort(read)
	read = slices.Compact(read)
	migrations, err := filepath.Glob(filepath.Join("..", "..", "sinks", "clickhouse", "chschema", "migrations", "*.sql"))
	must(t, err)
	slices.Sort(migrations)
	if len(migrations) < 19 {
		t.Fatalf("%d migrations found: the test does not see them", len(migrations))
	}
	for _, rel := range read {
		creates := regexp.MustCompile(`CREATE (TABLE|VIEW) IF NOT EXISTS ` + rel + `\b`)
		last := ""
		for _, m := range migrations {
			b, err := os.ReadFile(m)
			must(t, err)
			if creates.Match(b) {
				last = filepath.Base(m)[:4]
			}
		}
		if last == "" {
			continue // a name in a comment or a message, no relation
		}
		if !strings.Contains(help, last) {
			t.Errorf("the panels read %s, which migration %s creates: dashboard --help does not name it:\n%s", rel, last, help)
		}
	}
}

// TestReadmeNamesDLQListColumns: the columns README says dlq list prints are the ones it
// prints. Regression: README's list lacked REPEATS.
func TestReadmeNamesDLQListColumns(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	must(t, err)
	text := strings.Join(strings.Fields(string(readme)), " ")
	m := regexp.MustCompile("dlq list[^`]*```[^`]*\\(`([A-Z -]+)`").FindStringSubmatch(text)
	if m == nil {
		t.Fatal("README does not list dlq list's columns as (`DLQ ORIGIN ...`) after its example")
	}
	var out bytes.Buffer
	p := newEntryPrinter(&out, false)
	p.repeats = true
	must(t, p.printListed(dlq.Listed{Entry: dlq.Entry{Time: time.Unix(0, 0)}}))
	must(t, p.flush())
	head, _, _ := strings.Cut(out.String(), "\n")
	if got := strings.Join(strings.Fields(head), " "); got != m[1] {
		t.Fatalf("README says dlq list prints %q; it prints %q", m[1], got)
	}
}

// TestMigrateHelpOnTypeChanges: migrate --help says what PlanEvolution does with a changed
// type. Regression: it said any type change stops migrate, where int to long becomes a
// MODIFY COLUMN (docs/streams.md, sinks/clickhouse/evolve.go).
func TestMigrateHelpOnTypeChanges(t *testing.T) {
	_, help := runCLI(t, "migrate", "--help")
	help = strings.Join(strings.Fields(help), " ")
	for _, w := range []string{"MODIFY COLUMN for the types ClickHouse converts with the rows kept (int to long", "a narrowed or other changed type"} {
		if !strings.Contains(help, w) {
			t.Errorf("migrate --help does not say %q:\n%s", w, help)
		}
	}
}

// TestDLQExamplesNameTheEnvFile: every example of the dlq commands reaches the local stack as
// pasted in a fresh shell. Regression: dlq tail's and redrive's examples left out --env-file,
// and failed there with kafka.brokers not set (TestHelpExamplesRun runs them without the
// stack's variables).
func TestDLQExamplesNameTheEnvFile(t *testing.T) {
	n := 0
	for _, e := range helpExamples(newRootCmd()) {
		if strings.HasPrefix(e.cmd, "backflow dlq") {
			n++
			if !strings.Contains(e.line, "--env-file .stack/env") {
				t.Errorf("%s --help: %q does not name the env file", e.cmd, e.line)
			}
		}
	}
	if n < 10 {
		t.Fatalf("found %d dlq examples", n)
	}
}
