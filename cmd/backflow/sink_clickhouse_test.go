package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
	"github.com/backflowhq/backflow/test/pipelinetest"
	"github.com/backflowhq/backflow/test/testenv"
)

func TestSinkClickHouseUsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{
		{"sink-clickhouse", "extra"},
		{"sink-clickhouse", "--batch-rows", "0"},
		{"sink-clickhouse", "--batch-interval", "0s"},
		{"sink-clickhouse", "--group", "bad group"},
		{"sink-clickhouse", "--topic", "t", "--dlq-topic", "t"},
		{"migrate", "extra"},
		{"migrate", "--timeout", "0s"},
	} {
		if code, _ := runCLI(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}
}

func TestSinkClickHouseHelp(t *testing.T) {
	code, out := runCLI(t, "sink-clickhouse", "--help")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"--group", "--topic", "--batch-rows", "--batch-interval", "--migrate", "backflow-sink-clickhouse", "backflow.enriched", "10000"} {
		if !strings.Contains(out, want) {
			t.Errorf("sink-clickhouse --help does not mention %q", want)
		}
	}
}

// TestMigrateCommand runs `backflow migrate --dry-run`, `migrate` and `migrate` again against a
// fresh database: 5 pending, 5 applied, then 0.
func TestMigrateCommand(t *testing.T) {
	testenv.Integration(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	chcfg, _ := pipelinetest.Database(t, ctx, pipelinetest.Plain().ClickHouse, testenv.ID("itcmd_"))
	// migrate takes the database's migration lock: a topic and a group of that name.
	lock := "backflow-migrations." + chcfg.Database
	testenv.RemoveTopics(t, pipelinetest.Plain().Kafka, lock)
	testenv.Groups(t, pipelinetest.Plain().Kafka, lock)
	t.Setenv("BACKFLOW_CLICKHOUSE_ADDR", chcfg.Addr)
	t.Setenv("BACKFLOW_CLICKHOUSE_DATABASE", chcfg.Database)
	all, _ := chschema.Migrations()

	code, out := runCLI(t, "migrate", "--dry-run")
	if code != exitOK || strings.Count(out, "\npending ")+strings.Count(out[:min(len(out), 8)], "pending ") != len(all) || !strings.Contains(out, fmt.Sprintf("%d pending migrations", len(all))) {
		t.Fatalf("dry run: exit %d\n%s", code, out)
	}
	if code, out = runCLI(t, "migrate", "--dry-run"); strings.Count(out, "\npending ")+strings.Count(out[:min(len(out), 8)], "pending ") != len(all) {
		t.Fatalf("a dry run applied something:\n%s", out)
	}
	code, out = runCLI(t, "migrate")
	if code != exitOK || strings.Count(out, "applied 0") != len(all) || !strings.Contains(out, "applied 0001_inference_results") {
		t.Fatalf("migrate: exit %d\n%s", code, out)
	}
	code, out = runCLI(t, "migrate")
	if code != exitOK || strings.Contains(out, "applied 0") || !strings.Contains(out, "0 migrations applied") {
		t.Fatalf("second migrate: exit %d\n%s", code, out)
	}
	t.Logf("second run: %s", strings.TrimSpace(out))
}
