package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/internal/dlq"
	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
	"github.com/backflowhq/backflow/test/testenv"
)

// The loop's unit tests: Sink over franz-go's kfake cluster, with a mapping of the test's own
// (testMapping) and the writer in memory (memWriter), so what the loop does — batching, the
// DLQ, the ledger, retries, commits, the stop — is seen without ClickHouse. The mappings have
// their own tests (enriched_test.go, mirror_test.go, stream_test.go); the whole sink against
// ClickHouse is sink_integration_test.go.

// memWriter is the sinks.BatchWriter of the unit tests: it keeps the batches it accepts, fails
// the first fail attempts with an outage, and rejects (ErrClickHouseRejected) a batch holding
// a test row whose value starts with "reject", or one reject says so of.
type memWriter struct {
	mu       sync.Mutex
	fail     int
	reject   func(Batch) bool
	attempts int
	batches  []Batch
}

var errOutage = fmt.Errorf("clickhouse down: %w", io.ErrUnexpectedEOF)

func (w *memWriter) WriteBatch(_ context.Context, b Batch) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.attempts++
	if w.fail > 0 {
		w.fail--
		return errOutage
	}
	if w.reject != nil && w.reject(b) {
		return fmt.Errorf("%w: a %s row", ErrClickHouseRejected, b.Table())
	}
	if tb, ok := b.(testBatch); ok {
		for _, r := range tb.rows {
			if strings.HasPrefix(r.value, "reject") {
				return fmt.Errorf("%w: value %s", ErrClickHouseRejected, r.value)
			}
		}
	}
	w.batches = append(w.batches, b)
	return nil
}

func (w *memWriter) Retryable(err error) bool { return IsRetryable(err) }
func (w *memWriter) Close() error             { return nil }

// landed returns the test rows' values and the ledger rows the writer accepted, in order.
func (w *memWriter) landed() (values []string, ledger []LedgerRow) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, b := range w.batches {
		switch b := b.(type) {
		case testBatch:
			for _, r := range b.rows {
				values = append(values, r.value)
			}
		case tableRows[LedgerRow]:
			ledger = append(ledger, b.rows...)
		}
	}
	return values, ledger
}

// testMapping maps a record by its value: one starting with "bad" is at fault, any other is a
// row; insert lands a batch's rows as one testBatch.
type testMapping struct{}

type testRow struct {
	value string
	at    time.Time
}

func (r testRow) Tally() Tally { return Tally{Rows: 1, EventTime: r.at, Epoch: 3} }

func (testMapping) Map(_ context.Context, _ Waiter, rec *kgo.Record) (Row, error, error) {
	if strings.HasPrefix(string(rec.Value), "bad") {
		return nil, dlq.WithClass("invalid", errors.New("a bad value")), nil
	}
	return testRow{value: string(rec.Value), at: rec.Timestamp.UTC().Truncate(time.Second)}, nil, nil
}

func (testMapping) Insert(ctx context.Context, in Lander, rows []Row) (map[int]error, error) {
	b := testBatch{}
	owners := make([]int, len(rows))
	for i, r := range rows {
		b.rows, owners[i] = append(b.rows, r.(testRow)), i
	}
	rejects := map[int]error{}
	return rejects, in.Insert(ctx, b, owners, rejects)
}

type testBatch struct{ rows []testRow }

func (b testBatch) Table() string             { return "t" }
func (b testBatch) Insert() string            { return "INSERT INTO t (value) VALUES" }
func (b testBatch) Len() int                  { return len(b.rows) }
func (b testBatch) Append(driver.Batch) error { return errors.New("memWriter does not append") }
func (b testBatch) Slice(i, j int) Batch      { return testBatch{rows: b.rows[i:j]} }

func (w *memWriter) attemptsMade() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.attempts
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// loopRun is a test sink over topic "in" of k, its flushes and its end.
type loopRun struct {
	t       *testing.T
	k       kafka.Conn
	s       *Sink
	w       *memWriter
	mu      sync.Mutex
	flushes []Flush
	cancel  context.CancelFunc
	done    chan error
}

func startLoop(t *testing.T, k kafka.Conn, w *memWriter, dlqStage string, cfg Config) *loopRun {
	t.Helper()
	cfg.Group, cfg.Topic, cfg.DLQTopic, cfg.FromStart = "g", "in", "dlq", true
	cfg.BackoffMin, cfg.BackoffMax = time.Millisecond, 5*time.Millisecond
	r := &loopRun{t: t, k: k, w: w, done: make(chan error, 1)}
	r.s = newSink(cfg, RunConfig{Kafka: k, Logger: quiet(), OnFlush: func(f Flush) {
		r.mu.Lock()
		r.flushes = append(r.flushes, f)
		r.mu.Unlock()
	}}, testMapping{}, dlqStage)
	r.s.w = w
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- r.s.Run(ctx) }()
	t.Cleanup(cancel)
	return r
}

// produce writes values to partition p of topic, in order.
func produce(t *testing.T, k kafka.Conn, topic string, p int32, values ...string) {
	t.Helper()
	cl, err := k.NewClient(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, v := range values {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// waitCommitted waits until the group has committed want on "in".
func (r *loopRun) waitCommitted(want map[int32]int64) {
	r.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for got := testenv.CommittedOffsets(r.t, r.k, "g", "in"); fmt.Sprint(got) != fmt.Sprint(want); got = testenv.CommittedOffsets(r.t, r.k, "g", "in") {
		if time.Now().After(deadline) {
			r.t.Fatalf("committed %v, want %v (stats %+v)", got, want, r.s.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop stops the sink and returns what Run returned.
func (r *loopRun) stop() error {
	r.cancel()
	select {
	case err := <-r.done:
		return err
	case <-time.After(30 * time.Second):
		r.t.Fatal("Run did not return 30 s after the stop")
		return nil
	}
}

// dead lists the sink's DLQ topic (dlq.List): each entry's origin partition/offset and class.
func dead(t *testing.T, k kafka.Conn) map[string]string {
	t.Helper()
	out := map[string]string{}
	_, err := dlq.List(context.Background(), k, "dlq", dlq.ListOptions{All: true}, func(l dlq.Listed) error {
		if l.Stage != Stage {
			t.Errorf("DLQ entry of stage %q, want %q", l.Stage, Stage)
		}
		out[fmt.Sprintf("%d/%d", l.Origin.Partition, l.Origin.Offset)] = l.Class
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestLoopLandsDeadLettersAndCommits: records of two partitions land in batches of at most
// BatchRows, in offset order, each once; the record at fault and the one ClickHouse rejects go
// to the DLQ once each with their classes; one ledger row per flushed partition covers every
// offset and counts the rows landed; the group commits each partition's end.
func TestLoopLandsDeadLettersAndCommits(t *testing.T) {
	k := testenv.FakeKafka(t, 2, "in", "dlq")
	produce(t, k, "in", 0, "a0", "a1", "bad2", "a3", "a4")
	produce(t, k, "in", 1, "b0", "reject1", "b2")
	w := &memWriter{}
	r := startLoop(t, k, w, Stage, Config{BatchRows: 3, BatchInterval: 20 * time.Millisecond})
	r.waitCommitted(map[int32]int64{0: 5, 1: 3})
	if err := r.stop(); err != nil {
		t.Fatalf("Run after a stop: %v", err)
	}

	values, ledger := w.landed()
	var p0, p1 []string
	for _, v := range values {
		if v[0] == 'a' {
			p0 = append(p0, v)
		} else {
			p1 = append(p1, v)
		}
	}
	if fmt.Sprint(p0) != "[a0 a1 a3 a4]" || fmt.Sprint(p1) != "[b0 b2]" {
		t.Fatalf("landed %v, want a0 a1 a3 a4 and b0 b2, each once and in order", values)
	}
	if got := dead(t, k); fmt.Sprint(got) != "map[0/2:invalid 1/1:clickhouse_rejected]" {
		t.Fatalf("DLQ %v, want bad2 (0/2) invalid and reject1 (1/1) clickhouse_rejected", got)
	}
	spans, rows := map[int32]int64{}, uint32(0)
	for _, l := range ledger {
		spans[l.Partition] += l.MaxOffset - l.MinOffset + 1
		rows += l.Rows
		if l.Group != "g" || l.Topic != "in" || l.Epoch != 3 || (l.Rows > 0 && l.MaxEventTime.Before(time.Now().Add(-time.Hour))) {
			t.Errorf("ledger row %+v: want group g, topic in, epoch 3 and a recent newest event time", l)
		}
	}
	if fmt.Sprint(spans) != "map[0:5 1:3]" || rows != 6 {
		t.Fatalf("ledger spans %v offsets with %d rows, want 5 and 3 offsets, 6 rows", spans, rows)
	}
	st := r.s.Stats()
	r.mu.Lock()
	defer r.mu.Unlock()
	var records, dlqs int
	for _, f := range r.flushes {
		if f.Records > 3 || f.Attempts != 1 {
			t.Errorf("flush %+v: more than BatchRows records, or retries without an outage", f)
		}
		records, dlqs = records+f.Records, dlqs+f.DLQ
	}
	if st.Records != 8 || st.Rows != 6 || st.DLQ != 2 || st.Flushes != int64(len(r.flushes)) || records != 8 || dlqs != 2 || st.Buffered != 0 {
		t.Fatalf("stats %+v, flushes %+v: want 8 records, 6 rows, 2 dead letters, nothing buffered", st, r.flushes)
	}
}

// TestLoopRetriesAnOutage: inserts that fail with an outage are retried until they succeed:
// every row lands once, the flush counts its attempts, and Stats.Retries every retry.
func TestLoopRetriesAnOutage(t *testing.T) {
	k := testenv.FakeKafka(t, 2, "in", "dlq")
	produce(t, k, "in", 0, "a0", "a1", "a2")
	w := &memWriter{fail: 4}
	r := startLoop(t, k, w, Stage, Config{BatchRows: 10, BatchInterval: 20 * time.Millisecond})
	r.waitCommitted(map[int32]int64{0: 3})
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	values, ledger := w.landed()
	r.mu.Lock()
	defer r.mu.Unlock()
	attempts := 0
	for _, f := range r.flushes {
		attempts += f.Attempts
	}
	// Each flush writes its rows and its ledger row; the first one also the 4 failed attempts.
	if fmt.Sprint(values) != "[a0 a1 a2]" || len(ledger) != len(r.flushes) || attempts != len(r.flushes)+4 || r.s.Stats().Retries != 4 ||
		w.attemptsMade() != 4+2*len(r.flushes) {
		t.Fatalf("landed %v, ledger %d rows, flushes %+v, stats %+v, %d writes: want every row once after 4 retries",
			values, len(ledger), r.flushes, r.s.Stats(), w.attemptsMade())
	}
}

// TestLoopWithoutDLQStopsOnARejectedRow: a sink without a DLQ (the DLQ mirror) cannot set a
// rejected row aside: it stops with ErrClickHouseFatal and commits nothing.
func TestLoopWithoutDLQStopsOnARejectedRow(t *testing.T) {
	k := testenv.FakeKafka(t, 2, "in")
	produce(t, k, "in", 0, "a0", "reject1", "a2")
	w := &memWriter{}
	r := startLoop(t, k, w, "", Config{BatchRows: 10, BatchInterval: 20 * time.Millisecond})
	var err error
	select {
	case err = <-r.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the sink did not stop on the rejected row")
	}
	if !errors.Is(err, ErrClickHouseFatal) || !IsRejected(err) {
		t.Fatalf("Run = %v, want ErrClickHouseFatal wrapping the rejection", err)
	}
	if got := testenv.CommittedOffsets(t, k, "g", "in"); len(got) != 0 {
		t.Fatalf("committed %v after the failed flush, want nothing", got)
	}
	if values, ledger := w.landed(); len(values) != 0 || len(ledger) != 0 {
		t.Fatalf("landed %v and %d ledger rows, want nothing", values, len(ledger))
	}
}

// TestLoopFlushesWhatItHoldsOnStop: records buffered when the sink is stopped, long before
// their batch is due, land and are committed by the final flush.
func TestLoopFlushesWhatItHoldsOnStop(t *testing.T) {
	k := testenv.FakeKafka(t, 2, "in", "dlq")
	produce(t, k, "in", 1, "b0", "b1", "b2", "b3", "b4")
	w := &memWriter{}
	r := startLoop(t, k, w, Stage, Config{BatchRows: 100, BatchInterval: time.Hour})
	for deadline := time.Now().Add(30 * time.Second); r.s.Stats().Buffered != 5; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v, want 5 records buffered", r.s.Stats())
		}
	}
	if values, _ := w.landed(); len(values) != 0 {
		t.Fatalf("landed %v before the batch was due", values)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	values, ledger := w.landed()
	if fmt.Sprint(values) != "[b0 b1 b2 b3 b4]" || len(ledger) != 1 || ledger[0].MinOffset != 0 || ledger[0].MaxOffset != 4 {
		t.Fatalf("after the stop: landed %v, ledger %+v; want b0..b4 and one ledger row over offsets 0..4", values, ledger)
	}
	if got := testenv.CommittedOffsets(t, k, "g", "in"); got[1] != 5 {
		t.Fatalf("committed %v, want partition 1 at 5", got)
	}
}

// TestDropRevoked: a revoked or lost partition's buffered records are forgotten (they stay
// uncommitted for the new owner); other partitions and other topics are untouched.
func TestDropRevoked(t *testing.T) {
	s := &Sink{cfg: Config{Topic: "enriched"}.withDefaults(), log: slog.New(slog.NewTextHandler(io.Discard, nil)), buf: map[int32][]pending{}}
	for p, n := range map[int32]int{0: 3, 1: 2, 2: 4} {
		for i := 0; i < n; i++ {
			s.buf[p] = append(s.buf[p], pending{rec: &kgo.Record{Partition: p, Offset: int64(i)}})
			s.n++
		}
	}
	s.drop(map[string][]int32{"enriched": {1, 5}, "other": {0}})
	if st := s.Stats(); st.Buffered != 7 || st.Dropped != 2 || len(s.buf[0]) != 3 || len(s.buf[2]) != 4 || s.buf[1] != nil {
		t.Fatalf("after revoking partition 1: %+v, buffers %v", st, s.buf)
	}
	s.drop(map[string][]int32{"enriched": {0, 2}})
	if st := s.Stats(); st.Buffered != 0 || st.Dropped != 9 || len(s.buf) != 0 {
		t.Fatalf("after revoking all: %+v", st)
	}
}

// TestConnectRetriesAreCounted: with ClickHouse unreachable, the sink logged one line per retry
// (nine of them in the report) and then stopped with a summary of retries=0: the retries of
// the first connection were not counted. They are, in Stats.Retries, one per logged retry.
func TestConnectRetriesAreCounted(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	var logged atomic.Int64
	log := slog.New(countingHandler{n: &logged})
	s := newSink(Config{BackoffMin: 5 * time.Millisecond, BackoffMax: 10 * time.Millisecond},
		RunConfig{ClickHouse: chschema.Conn{Addr: addr, DialTimeout: 100 * time.Millisecond}, Logger: log}, nil, Stage)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := s.openClickHouse(ctx); done <- err }()
	for deadline := time.Now().Add(30 * time.Second); logged.Load() < 3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("%d retries logged in 30 s with ClickHouse unreachable, want 3", logged.Load())
		}
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("connected to a closed port")
	}
	if got, want := s.Stats().Retries, logged.Load(); got != want || got < 3 {
		t.Fatalf("Stats.Retries = %d after %d logged retries", got, want)
	}
}

// countingHandler counts the warnings logged through it.
type countingHandler struct{ n *atomic.Int64 }

func (h countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn {
		h.n.Add(1)
	}
	return nil
}
func (h countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countingHandler) WithGroup(string) slog.Handler      { return h }
