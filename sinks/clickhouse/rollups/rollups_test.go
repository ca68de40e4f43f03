package rollups

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/internal/ops"
	"github.com/backflowhq/backflow/internal/retry"
	"github.com/backflowhq/backflow/internal/rollup"
	"github.com/backflowhq/backflow/sinks/clickhouse"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
	"github.com/backflowhq/backflow/test/testenv"
)

// The rollup loop's mapping is tested through the mapping contract alone (testLander), and
// the loop it runs in over franz-go's kfake cluster with its statements in memory
// (stmtWriter): what the loop itself does is sinks/clickhouse's tests.

// stmtWriter is the loop's writer in memory (sinks.BatchWriter) that also runs statements
// (rollup.Conn): the first refuse Execs fail as ClickHouse refuses a statement it cannot run;
// every QueryRow reads a zero.
type stmtWriter struct {
	mu     sync.Mutex
	refuse int
	execs  []string
}

var errRefused = errors.New("code: 49, message: Unknown element 'UNKNOWN' for type Enum8('OK' = 1)")

func (w *stmtWriter) WriteBatch(context.Context, clickhouse.Batch) error { return nil }
func (w *stmtWriter) Retryable(err error) bool                           { return clickhouse.IsRetryable(err) }
func (w *stmtWriter) Close() error                                       { return nil }

func (w *stmtWriter) Exec(_ context.Context, query string, _ ...any) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.refuse > 0 {
		w.refuse--
		return errRefused
	}
	w.execs = append(w.execs, query)
	return nil
}

func (w *stmtWriter) QueryRow(context.Context, string, ...any) driver.Row { return zeroRow{} }

type zeroRow struct{}

func (zeroRow) Err() error { return nil }
func (zeroRow) Scan(dest ...any) error {
	for _, d := range dest {
		if p, ok := d.(*uint64); ok {
			*p = 0
		}
	}
	return nil
}
func (zeroRow) ScanStruct(any) error { return nil }

// testLander is the clickhouse.Lander a flush lends its mapping, as the contract says: Retry
// retries with a short backoff, counting each retry; Statements is stmts. It inserts nothing:
// the rollups insert no batch.
type testLander struct {
	stmts   rollup.Conn
	retries atomic.Int64
}

func (l *testLander) Insert(context.Context, clickhouse.Batch, []int, map[int]error) error {
	return errors.New("the rollups insert no batch")
}

func (l *testLander) InsertAll(context.Context, ...clickhouse.Owned) (map[int]error, error) {
	return nil, errors.New("the rollups insert no batch")
}

func (l *testLander) Retry(ctx context.Context, _ string, retryable func(error) bool, op func(context.Context) error) error {
	return retry.Do(ctx, retry.Policy{Min: time.Millisecond, Max: 5 * time.Millisecond}, retryable,
		func(error, int, time.Duration) { l.retries.Add(1) }, func() error { return op(ctx) })
}

func (l *testLander) Statements() rollup.Conn { return l.stmts }

func markAt(minute time.Time) []clickhouse.Row {
	return []clickhouse.Row{markRow{Mark: clickhouse.MarksOf(rollup.InferenceResults, []time.Time{minute})[0], at: minute}}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestRollupRetriesARefusedStatement: a rollup ClickHouse refuses (here, after an operator
// narrowed an enum) is retried with backoff until it runs, not a fatal error that stops the
// sink; the rollups are derived, and the marks stay uncommitted meanwhile. A stop ends the
// retries with the context's error.
func TestRollupRetriesARefusedStatement(t *testing.T) {
	rows := markAt(time.Date(2026, 12, 6, 3, 49, 0, 0, time.UTC))
	w := &stmtWriter{refuse: 3}
	in := &testLander{stmts: w}
	rejected, err := newRollupMapping().Insert(context.Background(), in, rows)
	if err != nil || len(rejected) != 0 {
		t.Fatalf("insert = %v, %v; want the rollup run after the refusals", rejected, err)
	}
	if in.retries.Load() != 3 || len(w.execs) == 0 || !strings.Contains(w.execs[len(w.execs)-1], "rollup_watermarks") {
		t.Fatalf("%d retries, statements %q: want 3 retries, then the rollups and the watermark", in.retries.Load(), w.execs)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	w = &stmtWriter{refuse: 1 << 30}
	in.stmts = w
	if _, err := newRollupMapping().Insert(ctx, in, rows); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, clickhouse.ErrClickHouseFatal) {
		t.Fatalf("insert while refused until the stop = %v, want the context's error and no ErrClickHouseFatal", err)
	}
}

// TestRollupLoopStopsWithoutFinishingItsFlush: the rollup loop's flush under way (here a
// rollup ClickHouse keeps refusing) is cancelled at the stop, not finished within
// InsertTimeout, and its mark stays uncommitted for the partition's next owner. Finishing it
// held every stop of a process for up to InsertTimeout on a loaded server.
func TestRollupLoopStopsWithoutFinishingItsFlush(t *testing.T) {
	k := testenv.FakeKafka(t, 2, "marks", "dlq")
	minute := time.Date(2026, 12, 6, 3, 49, 0, 0, time.UTC)
	rec := clickhouse.MarksOf(rollup.InferenceResults, []time.Time{minute})[0].Record("marks")
	rec.Partition = 0
	cl, err := k.NewClient(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(context.Background(), rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()

	cfg := clickhouse.Config{Group: "sink", Topic: "in", DLQTopic: "dlq", RollupTopic: "marks", RollupGroup: "g", FromStart: true,
		BatchRows: 1, BatchInterval: time.Hour, InsertTimeout: time.Hour, BackoffMin: time.Millisecond, BackoffMax: 5 * time.Millisecond}
	s, err := New(cfg, clickhouse.RunConfig{Kafka: k, ClickHouse: chschema.Conn{Addr: "127.0.0.1:1"}, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	w := &stmtWriter{refuse: 1 << 30}
	s.UseWriter(w, w)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	for deadline := time.Now().Add(30 * time.Second); s.Stats().Retries == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v: the rollup was never tried", s.Stats())
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v after a stop, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return 30 s after the stop: it waits for the rollup under way (InsertTimeout 1 h)")
	}
	if got := testenv.CommittedOffsets(t, k, "g", "marks"); got[0] != 0 || len(w.execs) != 0 {
		t.Fatalf("committed %v, statements run %q: want the mark uncommitted and no rollup run", got, w.execs)
	}
}

// TestRollupsRunOnTheStatementsConnection: the rollups run their statements on the connection
// the flush hands them (Lander.Statements), the only way the contract gives them to
// ClickHouse: without that connection they stop at once, and with it they run.
func TestRollupsRunOnTheStatementsConnection(t *testing.T) {
	rows := markAt(time.Date(2026, 12, 6, 3, 49, 0, 0, time.UTC))
	w := &stmtWriter{}
	in := &testLander{}
	if _, err := newRollupMapping().Insert(context.Background(), in, rows); !errors.Is(err, clickhouse.ErrClickHouseFatal) || len(w.execs) != 0 {
		t.Fatalf("insert without a statements connection = %v after %d statements, want ErrClickHouseFatal and none", err, len(w.execs))
	}
	in.stmts = w
	if _, err := newRollupMapping().Insert(context.Background(), in, rows); err != nil || len(w.execs) == 0 {
		t.Fatalf("insert with the statements connection = %v after %d statements, want the rollups run", err, len(w.execs))
	}
}

// TestRollupLoopExportsItsLag: the rollup loop exports MetricLag once per table the rollups
// read, labelled with its group, and the sink's buffer gauge for its group.
func TestRollupLoopExportsItsLag(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := New(clickhouse.Config{RollupGroup: "rg"}, clickhouse.RunConfig{ClickHouse: chschema.Conn{Addr: "127.0.0.1:1"},
		Metrics: ops.NewMetrics(reg).Stage(Stage)}); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "group" {
					got[f.GetName()] = append(got[f.GetName()], l.GetValue())
				}
			}
		}
	}
	if len(got[MetricLag]) != len(rollup.Sources()) || got[MetricLag][0] != "rg" || fmt.Sprint(got[clickhouse.MetricBuffered]) != "[rg]" {
		t.Fatalf("group labels by family %v: want %s for each of %d tables and %s, all of group rg", got, MetricLag, len(rollup.Sources()), clickhouse.MetricBuffered)
	}
}
