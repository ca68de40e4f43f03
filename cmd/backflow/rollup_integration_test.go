package main

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/backflowhq/backflow/internal/rollup"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
	"github.com/backflowhq/backflow/test/rollupcheck"
	"github.com/backflowhq/backflow/test/testenv"
	"github.com/backflowhq/backflow/tools/loadgen"
)

// caughtUp waits until every group of the ClickHouse side has committed the end of what it
// reads, in the order the records flow: ingest its sources, the sink the enriched topic, the
// mirror the DLQ, then the rollup loop its marks (a flush writes its marks before it commits,
// so once the sink and the mirror are at their ends every mark is in the rollup topic).
func (e *pipelineEnv) caughtUp(t *testing.T, ctx context.Context) {
	t.Helper()
	committedToEnd(t, ctx, e.Admin, e.Ingest.Group, e.Ingest.InferenceTopic, e.Ingest.GatewayTopic)
	committedToEnd(t, ctx, e.Admin, e.SinkGroup, e.Ingest.EnrichedTopic)
	committedToEnd(t, ctx, e.Admin, e.MirrorGroup, e.Ingest.DLQTopic)
	committedToEnd(t, ctx, e.Admin, e.SinkGroup+"-rollups", e.Ingest.EnrichedTopic+"-rollups")
}

// rollupsEqualViews compares every rollup with its view over the hours of the test's traffic.
func (e *pipelineEnv) rollupsEqualViews(t *testing.T, from, to time.Time, stage string) {
	t.Helper()
	ws := rollupcheck.Windows(from, to)
	n := rollupcheck.Equal(t, e.chDB(t), stage, ws)
	// The DLQ and ledger rollups have rows in every window; the others in all but those that
	// fall between the late traffic and today's.
	if n < len(rollup.All)*3 {
		t.Errorf("%s: %d comparisons had rows, want at least %d", stage, n, len(rollup.All)*3)
	}
	t.Logf("%s: the rollups equal the views over %d windows (%d comparisons with rows)", stage, len(ws), n)
}

// TestRollupsExactAfterLateRowsAKillAndAReplay runs `backflow run` (ingest and the ClickHouse
// sink, with its DLQ mirror and rollup loop) and holds every rollup to the per-minute view it
// mirrors, over ranges of hours, minutes and raw rows:
//  1. after traffic whose events happened 3 to 5 hours before they arrive (late rows, whose
//     minutes the loop rolls up long after the watermark passed them) and traffic of now;
//  2. after the process is SIGKILLed while more traffic lands, and started again, so the
//     batches it had not committed are written a second time (and marked again);
//  3. after a replay of ingest from the earliest offsets in a new epoch, which writes every row
//     again with a higher version.
func TestRollupsExactAfterLateRowsAKillAndAReplay(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	e := newPipelineEnv(t, ctx)
	bin := testenv.Build(t, "cmd/backflow")
	cfg := e.config(t, "ingest, sink-clickhouse", map[string]string{"sink_clickhouse": "batch_interval: 200ms"})
	p := startRun(t, bin, e.vars, "run", "--config", cfg)
	p.base(ctx)

	now := time.Now().UTC()
	e.load(t, ctx, loadgen.Config{Requests: 300, Seed: 91, DuplicateRate: 0.02, PoisonRate: 0.02,
		EventStart: now.Add(-5 * time.Hour), EventStep: 40 * time.Second})
	e.Load(t, ctx, loadgen.Config{Requests: 300, Seed: 92, DuplicateRate: 0.02, PoisonRate: 0.02})
	e.caughtUp(t, ctx)
	from, to := now.Add(-5*time.Hour-time.Minute), time.Now().UTC().Add(time.Minute)
	e.rollupsEqualViews(t, from, to, "late rows and now")

	// Killed while a third load lands: whatever it had inserted and not committed is written
	// again by the next run.
	loaded := make(chan struct{})
	go func() {
		defer close(loaded)
		e.Load(t, ctx, loadgen.Config{Requests: 600, Seed: 93, PoisonRate: 0.02})
	}()
	waitFlushes(t, ctx, e, 2)
	p.Kill()
	<-loaded
	p = startRun(t, bin, e.vars, "run", "--config", cfg)
	p.base(ctx)
	e.caughtUp(t, ctx)
	to = time.Now().UTC().Add(time.Minute)
	e.rollupsEqualViews(t, from, to, "after a SIGKILL")
	if code := p.signal(syscall.SIGTERM, 2*time.Minute); code != exitOK {
		t.Fatalf("exit code %d after SIGTERM:\n%s", code, p.log())
	}

	// A replay of ingest in a new epoch: every row written again, with a higher version. The
	// command records it in the test's ClickHouse database.
	for k, v := range e.vars {
		t.Setenv(k, v)
	}
	code, out, errOut := runReplayCLI(t, ctx, "replay", "--group", e.Ingest.Group, "--topic", e.Ingest.InferenceTopic, "--topic", e.Ingest.GatewayTopic,
		"--to-earliest", "--new-epoch", "--execute", "--control-topic", e.Ingest.ControlTopic, "--reason", "rollups test")
	if code != exitOK {
		t.Fatalf("replay: exit %d\n%s\n%s", code, out, errOut)
	}
	p = startRun(t, bin, e.vars, "run", "--config", cfg)
	p.base(ctx)
	e.caughtUp(t, ctx)
	var epochs uint64
	if err := e.chDB(t).QueryRow(ctx, "SELECT uniqExact(epoch) FROM inference_results").Scan(&epochs); err != nil || epochs < 2 {
		t.Fatalf("%d epochs in inference_results (%v): the replay wrote nothing again", epochs, err)
	}
	e.rollupsEqualViews(t, from, time.Now().UTC().Add(time.Minute), "after a replay")
	if code := p.signal(syscall.SIGTERM, 2*time.Minute); code != exitOK {
		t.Fatalf("exit code %d after SIGTERM:\n%s", code, p.log())
	}
}

// chDB is a connection on the test's database, closed when the test ends.
func (e *pipelineEnv) chDB(t *testing.T) driver.Conn {
	t.Helper()
	if e.db == nil {
		c := e.Stack.ClickHouse
		c.Database = e.DB
		conn, err := chschema.Open(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		e.db = conn
	}
	return e.db
}

// waitFlushes waits until the sink has written n ledger rows more than when it was called.
func waitFlushes(t *testing.T, ctx context.Context, e *pipelineEnv, n uint64) {
	t.Helper()
	q := fmt.Sprintf("SELECT count() FROM %s.sink_ledger", e.DB)
	start := e.count(t, ctx, q)
	for e.count(t, ctx, q) < start+n {
		if ctx.Err() != nil {
			t.Fatalf("the sink wrote fewer than %d ledger rows", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
