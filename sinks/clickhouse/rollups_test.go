package clickhouse

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/backflowhq/backflow/internal/rollup"
)

// stmtWriter is a memWriter that also runs statements (rollup.Conn): the first refuse Execs
// fail as ClickHouse refuses a statement it cannot run; every QueryRow reads a zero.
type stmtWriter struct {
	memWriter
	refuse int
	execs  []string
}

var errRefused = errors.New("code: 49, message: Unknown element 'UNKNOWN' for type Enum8('OK' = 1)")

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

// TestRollupRetriesARefusedStatement: a rollup ClickHouse refuses (here, after an operator
// narrowed an enum) is retried with backoff until it runs, not a fatal error that stops the
// sink; the rollups are derived, and the marks stay uncommitted meanwhile. A stop ends the
// retries with the context's error.
func TestRollupRetriesARefusedStatement(t *testing.T) {
	minute := time.Date(2026, 12, 6, 3, 49, 0, 0, time.UTC)
	rows := []Row{markRow{mark: mark{Source: rollup.InferenceResults, Hour: minute.Truncate(time.Hour).Unix(), Minutes: []int64{minute.Unix()}}, at: minute}}
	var retries atomic.Int64
	w := &stmtWriter{refuse: 3}
	in := &inserter{w: w, stmts: w, r: testRetrier(&retries), log: quiet()}
	rejected, err := newRollupMapping().Insert(context.Background(), in, rows)
	if err != nil || len(rejected) != 0 {
		t.Fatalf("insert = %v, %v; want the rollup run after the refusals", rejected, err)
	}
	if retries.Load() != 3 || len(w.execs) == 0 || !strings.Contains(w.execs[len(w.execs)-1], "rollup_watermarks") {
		t.Fatalf("%d retries, statements %q: want 3 retries, then the rollups and the watermark", retries.Load(), w.execs)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	w = &stmtWriter{refuse: 1 << 30}
	in.w, in.stmts = w, w
	if _, err := newRollupMapping().Insert(ctx, in, rows); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrClickHouseFatal) {
		t.Fatalf("insert while refused until the stop = %v, want the context's error and no ErrClickHouseFatal", err)
	}
}

// TestRollupLoopStopsWithoutFinishingItsFlush: the rollup loop's flush under way (here a
// rollup ClickHouse keeps refusing) is cancelled at the stop, not finished within
// InsertTimeout, and its mark stays uncommitted for the partition's next owner. Finishing it
// held every stop of a process for up to InsertTimeout on a loaded server.
func TestRollupLoopStopsWithoutFinishingItsFlush(t *testing.T) {
	k := fakeKafka(t, "in", "dlq")
	minute := time.Date(2026, 12, 6, 3, 49, 0, 0, time.UTC)
	rec := marksOf(rollup.InferenceResults, []time.Time{minute})[0].record("in")
	produce(t, k, "in", 0, string(rec.Value))

	cfg := Config{Group: "g", Topic: "in", DLQTopic: "dlq", FromStart: true, BatchRows: 1, BatchInterval: time.Hour,
		InsertTimeout: time.Hour, BackoffMin: time.Millisecond, BackoffMax: 5 * time.Millisecond}
	s := newRollupSink(cfg, RunConfig{Kafka: k, Logger: quiet()}, newRollupMapping())
	w := &stmtWriter{refuse: 1 << 30}
	s.w, s.stmts = w, w
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
	if got := committed(t, k); got[0] != 0 || len(w.execs) != 0 {
		t.Fatalf("committed %v, statements run %q: want the mark uncommitted and no rollup run", got, w.execs)
	}
}

// TestRollupsRunOnTheStatementsConnection: the rollups run their statements on the connection
// the flush hands them (Lander.statements), never on the writer behind sinks.BatchWriter found
// by a type assertion: without that connection they stop at once, even over a writer that
// could run statements, and run none.
func TestRollupsRunOnTheStatementsConnection(t *testing.T) {
	minute := time.Date(2026, 12, 6, 3, 49, 0, 0, time.UTC)
	rows := []Row{markRow{mark: mark{Source: rollup.InferenceResults, Hour: minute.Truncate(time.Hour).Unix(), Minutes: []int64{minute.Unix()}}, at: minute}}
	var retries atomic.Int64
	w := &stmtWriter{}
	in := &inserter{w: w, r: testRetrier(&retries), log: quiet()}
	if _, err := newRollupMapping().Insert(context.Background(), in, rows); !errors.Is(err, ErrClickHouseFatal) || len(w.execs) != 0 {
		t.Fatalf("insert without a statements connection = %v after %d statements on the writer, want ErrClickHouseFatal and none", err, len(w.execs))
	}
	in.stmts = w
	if _, err := newRollupMapping().Insert(context.Background(), in, rows); err != nil || len(w.execs) == 0 {
		t.Fatalf("insert with the statements connection = %v after %d statements, want the rollups run", err, len(w.execs))
	}
}
