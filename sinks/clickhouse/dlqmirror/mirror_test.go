package dlqmirror

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/internal/dlq"
	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/internal/ops"
	"github.com/backflowhq/backflow/internal/rollup"
	"github.com/backflowhq/backflow/sinks/clickhouse"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
	"github.com/backflowhq/backflow/test/testenv"
)

// The DLQ mirror's mapping is tested through the mapping contract alone (recLander), and the
// mirror as New builds it over franz-go's kfake cluster with its writer in memory (memWriter):
// what the loop itself does is sinks/clickhouse's tests.

// recLander is the clickhouse.Lander a flush lends its mapping, keeping the batches inserted.
type recLander struct{ batches []clickhouse.Batch }

func (l *recLander) Insert(_ context.Context, b clickhouse.Batch, _ []int, _ map[int]error) error {
	l.batches = append(l.batches, b)
	return nil
}

func (l *recLander) InsertAll(context.Context, ...clickhouse.Owned) (map[int]error, error) {
	return nil, errors.New("the mirror inserts its tables one after the other")
}

func (l *recLander) Retry(ctx context.Context, _ string, _ func(error) bool, op func(context.Context) error) error {
	return op(ctx)
}

func (l *recLander) Statements() rollup.Conn { return nil }

// memWriter is the mirror's writer in memory (sinks.BatchWriter) and its statements
// (rollup.Conn): it rejects every batch when reject is set, and keeps the statements' SQL
// (every QueryRow reads nothing).
type memWriter struct {
	mu       sync.Mutex
	reject   bool
	attempts int
	tables   []string
	queries  []string
}

func (w *memWriter) WriteBatch(_ context.Context, b clickhouse.Batch) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.attempts++
	if w.reject {
		return fmt.Errorf("%w: a %s row", clickhouse.ErrClickHouseRejected, b.Table())
	}
	w.tables = append(w.tables, fmt.Sprintf("%s %d", b.Table(), b.Len()))
	return nil
}

func (w *memWriter) Retryable(err error) bool { return clickhouse.IsRetryable(err) }
func (w *memWriter) Close() error             { return nil }

func (w *memWriter) Exec(_ context.Context, query string, _ ...any) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.queries = append(w.queries, query)
	return nil
}

func (w *memWriter) QueryRow(_ context.Context, query string, _ ...any) driver.Row {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.queries = append(w.queries, query)
	return emptyRow{}
}

func (w *memWriter) seen() (attempts int, tables, queries []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.attempts, append([]string(nil), w.tables...), append([]string(nil), w.queries...)
}

type emptyRow struct{}

func (emptyRow) Err() error           { return nil }
func (emptyRow) Scan(...any) error    { return nil }
func (emptyRow) ScanStruct(any) error { return nil }

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// entry is a DLQ entry of ingest's, as dlq.Writer writes it to topic.
func entry(t *testing.T, topic string) *kgo.Record {
	t.Helper()
	rec, err := dlq.Config{Topic: topic, Stage: "ingest"}.Record(dlq.NewEntry(dlq.Origin{Topic: "gateway-log", Partition: 2, Offset: 41,
		Key: []byte("req-9"), Value: []byte("0123456789"), Timestamp: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)},
		dlq.WithClass("corrupt", errors.New("body ends early"))), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// startMirror produces one entry to the dead-letter topic "dlq" of a kfake cluster and runs
// the mirror New builds over it, in group "g", writing through w; it returns the cluster, the
// mirror and Run's end.
func startMirror(t *testing.T, w *memWriter) (kafka.Conn, *clickhouse.Sink, <-chan error) {
	t.Helper()
	k := testenv.FakeKafka(t, 1, "dlq")
	cl, err := k.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(context.Background(), entry(t, "dlq")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Group: "g", Topic: "dlq", FromStart: true, BatchInterval: 10 * time.Millisecond,
		BackoffMin: time.Millisecond, BackoffMax: 5 * time.Millisecond}, k, chschema.Conn{Addr: "127.0.0.1:1"}, quiet())
	if err != nil {
		t.Fatal(err)
	}
	s.UseWriter(w, w)
	ctx, cancel := context.WithCancel(context.Background())
	done, ended := make(chan error, 1), make(chan struct{})
	go func() {
		done <- s.Run(ctx)
		close(ended)
	}()
	t.Cleanup(func() {
		cancel()
		<-ended
	})
	return k, s, done
}

// TestMirrorMapsEntries: a DLQ entry becomes its dlq_entries row (where it is in the DLQ, its
// origin, stage, class, message, key and value size); a record that is not a DLQ entry is
// mirrored too, as unreadable_entry; neither is ever at fault.
func TestMirrorMapsEntries(t *testing.T) {
	rec := entry(t, "dlq")
	rec.Partition, rec.Offset = 1, 12 // where the DLQ topic put it
	got, fault, err := (&mirrorMapping{}).Map(context.Background(), nil, rec)
	if err != nil || fault != nil {
		t.Fatalf("Map = %v, %v", fault, err)
	}
	row := got.(DLQRow)
	if row.DLQTopic != "dlq" || row.DLQPartition != 1 || row.DLQOffset != 12 || row.Version != 12 || row.OriginTopic != "gateway-log" ||
		row.OriginPartition != 2 || row.OriginOffset != 41 || !row.OriginTime.Equal(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)) ||
		row.Stage != "ingest" || row.Class != "corrupt" || row.Message != "body ends early" || row.RecordKey != "req-9" || row.ValueBytes != 10 {
		t.Fatalf("row %+v", row)
	}
	if c := got.Tally(); c != (clickhouse.Tally{Rows: 1}) {
		t.Fatalf("tally %+v, want one row", c)
	}
	odd, fault, err := (&mirrorMapping{}).Map(context.Background(), nil, &kgo.Record{Topic: "dlq", Offset: 7, Key: []byte("k"), Value: []byte("v")})
	if err != nil || fault != nil || odd.(DLQRow).Class != "unreadable_entry" || odd.(DLQRow).Message == "" || odd.(DLQRow).RecordKey != "k" {
		t.Fatalf("a record without the DLQ headers: %+v, %v, %v; want an unreadable_entry row saying why", odd, fault, err)
	}
}

// TestMirrorInsertsItsTables: the entries land in dlq_entries in one batch, then their origins
// in dlq_first (each versioned so that FINAL keeps an origin's lowest DLQ position; an entry
// without an origin is its own).
func TestMirrorInsertsItsTables(t *testing.T) {
	rows := []clickhouse.Row{DLQRow{DLQTopic: "dlq", DLQOffset: 1, Class: "corrupt", OriginTopic: "gw", OriginOffset: 9, Stage: "ingest"},
		DLQRow{DLQTopic: "dlq", DLQPartition: 1, DLQOffset: 2, Class: "unreadable_entry"}}
	in := &recLander{}
	rejected, err := (&mirrorMapping{}).Insert(context.Background(), in, rows)
	if err != nil || len(rejected) != 0 || len(in.batches) != 2 || in.batches[0].Table() != TableDLQ || in.batches[0].Len() != 2 ||
		in.batches[1].Table() != "dlq_first" || in.batches[1].Len() != 2 {
		t.Fatalf("insert = %v, %v; batches %v: want a dlq_entries batch of 2, then a dlq_first one", rejected, err, in.batches)
	}
	first := []DLQFirstRow{rows[0].(DLQRow).first(), rows[1].(DLQRow).first()}
	if f := first[0]; f.OriginTopic != "gw" || f.OriginOffset != 9 || f.Stage != "ingest" || f.Orphan != "" || f.Version != ^uint64(0)-1 {
		t.Errorf("first of an entry with an origin: %+v", f)
	}
	if f := first[1]; f.Orphan != "dlq/1/2" || f.Version != ^uint64(0)-(1<<40+2) || first[0].Version <= f.Version {
		t.Errorf("first of an entry without an origin: %+v; a lower DLQ position must have the higher version", f)
	}
}

// TestMirrorStopsOnARejectedRow: with no DLQ for the DLQ, a batch ClickHouse rejects stops the
// mirror (ErrClickHouseFatal) at the first attempt instead of being set aside, and nothing is
// committed.
func TestMirrorStopsOnARejectedRow(t *testing.T) {
	w := &memWriter{reject: true}
	k, _, done := startMirror(t, w)
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the mirror did not stop on the rejected row")
	}
	if attempts, _, _ := w.seen(); !errors.Is(err, clickhouse.ErrClickHouseFatal) || attempts != 1 {
		t.Fatalf("rejected: %v after %d attempts, want ErrClickHouseFatal at once", err, attempts)
	}
	if got := testenv.CommittedOffsets(t, k, "g", "dlq"); len(got) != 0 {
		t.Fatalf("committed %v after the rejected batch, want nothing", got)
	}
}

// TestMirrorLandsAndSweeps: an entry lands in dlq_entries and dlq_first, no sink_ledger row,
// and is committed; the first flush then reads the topic's retention on Kafka and sweeps
// dlq_first's expired days on the flush's statements connection.
func TestMirrorLandsAndSweeps(t *testing.T) {
	w := &memWriter{}
	k, s, _ := startMirror(t, w)
	for deadline := time.Now().Add(30 * time.Second); testenv.CommittedOffsets(t, k, "g", "dlq")[0] != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("committed %v, stats %+v: want the entry committed", testenv.CommittedOffsets(t, k, "g", "dlq"), s.Stats())
		}
	}
	_, tables, queries := w.seen()
	if fmt.Sprint(tables) != "[dlq_entries 1 dlq_first 1]" {
		t.Fatalf("inserted %v, want the entry in dlq_entries and dlq_first, and no ledger row", tables)
	}
	if len(queries) != 1 || !strings.Contains(queries[0], "FROM "+rollup.DLQFirst) {
		t.Fatalf("statements %q: want the sweep's one query of dlq_first's expired days", queries)
	}
}

// TestConfigOf: the mirror's part of the sink_clickhouse section is its group (defaulted),
// the sink's DLQ topic and batching, and the rollup marks' topic with rollups on.
func TestConfigOf(t *testing.T) {
	if m := ConfigOf(clickhouse.Config{DLQTopic: "d"}); m.Group != "backflow-sink-clickhouse-dlq" || m.Topic != "d" || m.BatchRows != clickhouse.DefaultBatchRows || m.RollupTopic != "" {
		t.Fatalf("mirror %+v", m)
	}
	if m := ConfigOf(clickhouse.Config{Rollups: true}); m.RollupTopic != "backflow.rollups" {
		t.Fatalf("mirror with rollups %+v, want its marks on backflow.rollups", m)
	}
}

// TestMirrorExportsNoBufferGauge: of the metrics, the mirror exports its stage's shared
// families only, not the sink's buffer gauge and dropped counter: its backlog is its group's
// consumer lag.
func TestMirrorExportsNoBufferGauge(t *testing.T) {
	reg := prometheus.NewRegistry()
	st := ops.NewMetrics(reg).Stage(Stage)
	if _, err := New(Config{Group: "g", Topic: "dlq", Metrics: st}, kafka.Conn{Brokers: []string{"127.0.0.1:1"}}, chschema.Conn{Addr: "127.0.0.1:1"}, quiet()); err != nil {
		t.Fatal(err)
	}
	st.In(1)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range families {
		names = append(names, f.GetName())
	}
	if slices.Contains(names, clickhouse.MetricBuffered) || slices.Contains(names, clickhouse.MetricDropped) || len(names) == 0 {
		t.Fatalf("families %v: want the stage's, without %s and %s", names, clickhouse.MetricBuffered, clickhouse.MetricDropped)
	}
}
