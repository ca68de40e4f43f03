package pipelines_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backflowhq/backflow/pipelines"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
	"github.com/backflowhq/backflow/test/pipelinetest"
)

// TestMigrationsTakeTurns: three processes migrate one new database at once, as the pods of a
// StatefulSet do on a first install. Each succeeds, each migration is applied by one of them
// and recorded once, and the two that waited find nothing left to apply.
func TestMigrationsTakeTurns(t *testing.T) {
	env := pipelinetest.NewEnv(t, "mlk")
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	chcfg, conn := env.Database(t, ctx, "")
	cfg := pipelines.Config{Conns: pipelines.Conns{Kafka: env.Kafka, ClickHouse: chcfg}}
	pending, err := chschema.Pending(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) == 0 {
		t.Fatal("a new database has no pending migration")
	}

	outs := make([]bytes.Buffer, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var log bytes.Buffer
			errs[i] = pipelines.Migrate(ctx, cfg, pipelines.MigrateRun{Out: &outs[i], Log: &log})
		}()
	}
	wg.Wait()
	applied, appliers := 0, 0
	for i := range outs {
		if errs[i] != nil {
			t.Fatalf("process %d: %v\n%s", i, errs[i], outs[i].String())
		}
		n := strings.Count(outs[i].String(), "\napplied ")
		applied += n
		if n > 0 {
			appliers++
		}
	}
	if applied != len(pending) || appliers != 1 {
		t.Fatalf("%d migrations applied by %d processes, want the %d pending applied by one", applied, appliers, len(pending))
	}
	var rows uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM "+chschema.MigrationsTable).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != uint64(len(pending)) {
		t.Fatalf("%s holds %d rows, want one per migration: %d", chschema.MigrationsTable, rows, len(pending))
	}
}
