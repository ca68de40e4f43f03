package main

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/backflowhq/backflow/test/testenv"
)

// TestRunStopWhileClickHouseDownExits0: `backflow run --stages sink-clickhouse` with ClickHouse
// unreachable, stopped by SIGTERM while it waits, logged "stage failed ... context canceled" and
// exited 1; run --help promises 0 after a signal (as with Kafka down). With and without the
// start-up migration, the stop must be clean: exit 0, no stage failure logged.
func TestRunStopWhileClickHouseDownExits0(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e := newPipelineEnv(t, ctx)
	bin := testenv.Build(t, "cmd/backflow")
	e.vars["BACKFLOW_CLICKHOUSE_ADDR"] = fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)) // nothing listens there
	cfg := e.config(t, "sink-clickhouse", nil)
	for _, migrate := range []string{"true", "false"} {
		t.Run("migrate="+migrate, func(t *testing.T) {
			vars := map[string]string{"BACKFLOW_SINK_CLICKHOUSE_MIGRATE": migrate}
			for k, v := range e.vars {
				vars[k] = v
			}
			p := startRun(t, bin, vars, "run", "--config", cfg)
			p.base(ctx)
			// Wait until the stage is waiting for ClickHouse, then stop it.
			deadline := time.Now().Add(time.Minute)
			for !strings.Contains(p.log(), "clickhouse") && time.Now().Before(deadline) {
				time.Sleep(200 * time.Millisecond)
			}
			time.Sleep(2 * time.Second)
			if code := p.signal(syscall.SIGTERM, 2*time.Minute); code != exitOK {
				t.Fatalf("exit code %d after SIGTERM with ClickHouse down, want %d:\n%s", code, exitOK, p.log())
			}
			if log := p.log(); strings.Contains(log, "stage failed") || !strings.Contains(log, "backflow stopped cleanly") {
				t.Fatalf("the stop is not logged as clean:\n%s", log)
			}
		})
	}
}
