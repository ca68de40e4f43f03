package kafka_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/codec"
	"github.com/lovoo/goka/storage"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/internal/ops"
	"github.com/backflowhq/backflow/test/testenv"
)

// logBuffer is a log destination safe for the goroutines of a running processor.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// gatedStorage holds a table partition's restore at its (at+1)th write until open is closed.
type gatedStorage struct {
	storage.Storage
	sets *atomic.Int64
	at   int64
	open chan struct{}
}

func (g *gatedStorage) Set(key string, value []byte) error {
	if g.sets.Add(1) == g.at+1 {
		<-g.open
	}
	return g.Storage.Set(key, value)
}

// poll calls f until it is true, failing the test when ctx ends first.
func poll(t *testing.T, ctx context.Context, what string, f func() bool) {
	t.Helper()
	for !f() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not reached: %v", what, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestTableRestoreReported restores a group table from a changelog of 3,000 records on empty
// storage, with partition 0's restore held after 700 records. While it is held, /readyz's
// reason and the progress line must name partition 0 with exactly 700 restored and the rest
// to go, and the metrics must say so; once released, the done line and the metrics must count
// every changelog record, and the stage must stop with nothing left to redelivery.
func TestTableRestoreReported(t *testing.T) {
	cfg := testenv.Kafka(t, "backflow-restore")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	input := testenv.CreateTopic(t, ctx, cfg, "restore-in", 2)
	group := goka.Group(input + "-g")
	table := string(goka.GroupTable(group))
	testenv.Groups(t, cfg, string(group))
	testenv.TopicSpecs(t, ctx, cfg, kafka.TopicSpec{Name: table, Partitions: 2, Configs: map[string]string{"cleanup.policy": "compact"}})

	// the changelog, as a stage that ran before left it
	cl, err := cfg.NewClient(kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const n = 3000
	perPart := map[int32]int64{}
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: table, Key: []byte(fmt.Sprintf("key-%d", i)), Value: []byte(strconv.Itoa(i))}
	}
	res := cl.ProduceSync(ctx, recs...)
	if err := res.FirstErr(); err != nil {
		t.Fatalf("produce changelog: %v", err)
	}
	for _, r := range res {
		perPart[r.Record.Partition]++
	}
	if perPart[0] < 1000 || perPart[1] == 0 {
		t.Fatalf("changelog records per partition %v: want partition 0 above 1000 and both used", perPart)
	}

	const held = 700
	open := make(chan struct{})
	var sets atomic.Int64
	mem := storage.MemoryBuilder()
	builder := func(topic string, partition int32) (storage.Storage, error) {
		st, err := mem(topic, partition)
		if err != nil || partition != 0 {
			return st, err
		}
		return &gatedStorage{Storage: st, sets: &sets, at: held, open: open}, nil
	}
	g := goka.DefineGroup(group,
		goka.Input(goka.Stream(input), new(codec.String), func(ctx goka.Context, _ any) {}),
		goka.Persist(new(codec.String)),
	)
	proc, err := goka.NewProcessor(cfg.Brokers, g, append(cfg.ProcessorOptions(context.Background()), goka.WithStorageBuilder(builder))...)
	if err != nil {
		t.Fatalf("processor: %v", err)
	}

	var logs logBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	reg := prometheus.NewRegistry()
	var (
		mu     sync.Mutex
		reason string
	)
	reasonNow := func() string {
		mu.Lock()
		defer mu.Unlock()
		return reason
	}
	ready := make(chan struct{})
	parent, stop := context.WithCancel(ctx)
	defer stop()
	life := kafka.NewGokaLife(parent)
	var runErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		runErr = life.Run(proc, kafka.GokaRun{Name: "restore-test", Log: log, Metrics: ops.NewMetrics(reg).Stage("restore-test"),
			Waiting: func(err error) {
				mu.Lock()
				defer mu.Unlock()
				reason = err.Error()
			},
			OnReady:            func() { close(ready) },
			RestoreSampleEvery: 10 * time.Millisecond, RestoreLogEvery: 10 * time.Millisecond})
	}()
	defer func() {
		stop()
		<-done
	}()

	gauge := func(name, partition string) (float64, bool) {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "partition" && l.GetValue() == partition {
						return m.GetGauge().GetValue(), true
					}
				}
			}
		}
		return 0, false
	}
	// held: partition 1 is restored, partition 0 waits at exactly 700 records
	wantReason := fmt.Sprintf("restoring table partition 0: %s of %s records", kafka.HumanCount(held), kafka.HumanCount(perPart[0]))
	poll(t, ctx, "readiness names the held restore", func() bool {
		return strings.HasPrefix(reasonNow(), wantReason)
	})
	progress := regexp.MustCompile(fmt.Sprintf(`msg="table restore" stage=restore-test partition=0 restored=%d to_go=%d rate=\d+/s eta=\S+`, held, perPart[0]-held))
	poll(t, ctx, "a progress line names the held restore", func() bool { return progress.MatchString(logs.String()) })
	for name, want := range map[string]float64{kafka.MetricTableRestoring: 1, kafka.MetricTableRestored: held, kafka.MetricTableRestoreToGo: float64(perPart[0] - held)} {
		poll(t, ctx, name+" while held", func() bool { v, ok := gauge(name, "0"); return ok && v == want })
	}
	select {
	case <-ready:
		t.Fatal("ready while a table partition is still restoring")
	default:
	}

	close(open)
	select {
	case <-ready:
	case <-done:
		t.Fatalf("stopped before ready: %v", runErr)
	case <-ctx.Done():
		t.Fatal("not ready after the restore")
	}
	doneLine := regexp.MustCompile(`msg="table restored" stage=restore-test group=\S+ partitions=0,1 records=(\d+) seconds=`)
	m := doneLine.FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("no done line naming both partitions in:\n%s", logs.String())
	}
	if m[1] != strconv.Itoa(n) {
		t.Fatalf("done line counts %s records, want the changelog's %d", m[1], n)
	}
	if c := strings.Count(logs.String(), `msg="table restored"`); c != 1 {
		t.Fatalf("%d done lines, want 1", c)
	}
	for p, want := range perPart {
		part := strconv.Itoa(int(p))
		if v, ok := gauge(kafka.MetricTableRestored, part); !ok || v != float64(want) {
			t.Errorf("partition %d: restored gauge %v (%v), want %d", p, v, ok, want)
		}
		if v, _ := gauge(kafka.MetricTableRestoreToGo, part); v != 0 {
			t.Errorf("partition %d: to-go gauge %v after the restore, want 0", p, v)
		}
		if v, _ := gauge(kafka.MetricTableRestoring, part); v != 0 {
			t.Errorf("partition %d: restoring gauge %v after the restore, want 0", p, v)
		}
	}
	if v, err := proc.Get("key-0"); err != nil || v != "0" {
		t.Fatalf("restored table: key-0 = %v (%v), want \"0\"", v, err)
	}

	stop()
	<-done
	if runErr != nil {
		t.Fatalf("run after a stop: %v", runErr)
	}
	if !strings.Contains(logs.String(), `msg="stopped; left to redelivery" stage=restore-test records=0`) {
		t.Fatalf("no stop line with 0 records left in:\n%s", logs.String())
	}
}

// TestStopLeavesRecordsToRedelivery holds every record a goka processor reads uncommitted
// (as ingest does while a record waits for moderation) and stops it. The stop must log one
// line counting exactly those records, nothing at error level and no failed commit at info;
// Run must return nil, and the group must have committed none of them.
func TestStopLeavesRecordsToRedelivery(t *testing.T) {
	cfg := testenv.Kafka(t, "backflow-stopline")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	input := testenv.CreateTopic(t, ctx, cfg, "stopline-in", 2)
	group := goka.Group(input + "-g")
	testenv.Groups(t, cfg, string(group))
	testenv.RemoveTopics(t, cfg, string(goka.GroupTable(group)))

	const n = 31
	cl, err := cfg.NewClient(kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: input, Key: []byte(fmt.Sprintf("key-%d", i)), Value: []byte("v")}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	var (
		mu      sync.Mutex
		pending []func(error)
	)
	held := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(pending)
	}
	errReleased := errors.New("stopped before the record finished; it will be redelivered")
	g := goka.DefineGroup(group,
		goka.Input(goka.Stream(input), new(codec.String), func(ctx goka.Context, _ any) {
			commit := ctx.DeferCommit()
			mu.Lock()
			defer mu.Unlock()
			pending = append(pending, commit)
		}),
		goka.Persist(new(codec.String)),
	)
	var logs logBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	proc, err := goka.NewProcessor(cfg.Brokers, g, append(cfg.ProcessorOptions(context.Background()), goka.WithStorageBuilder(storage.MemoryBuilder()),
		goka.WithLogger(kafka.GokaLogger(log)))...)
	if err != nil {
		t.Fatal(err)
	}
	parent, stop := context.WithCancel(ctx)
	defer stop()
	life := kafka.NewGokaLife(parent)
	done := make(chan error, 1)
	go func() {
		done <- life.Run(proc, kafka.GokaRun{Name: "stop-test", Log: log,
			// release what is held uncommitted, as ingest's Close does
			OnStopping: func() {
				mu.Lock()
				defer mu.Unlock()
				for _, c := range pending {
					c(errReleased)
				}
				pending = nil
			}})
	}()
	poll(t, ctx, "every record held", func() bool { return held() == n })
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run after a requested stop: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("processor did not stop")
	}
	out := logs.String()
	want := fmt.Sprintf(`msg="stopped; left to redelivery" stage=stop-test records=%d`, n)
	if strings.Count(out, want) != 1 {
		t.Fatalf("want one line %q in:\n%s", want, out)
	}
	for _, bad := range []string{"level=ERROR", "could not commit message", "errors occurred"} {
		if strings.Contains(out, bad) {
			t.Errorf("stop logged %q:\n%s", bad, out)
		}
	}
	offs, err := kadm.NewClient(cl).FetchOffsets(ctx, string(group))
	if err != nil {
		t.Fatal(err)
	}
	var committed int64
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == input && o.At > 0 {
			committed += o.At
		}
	})
	if committed != 0 {
		t.Fatalf("group committed %d records, want none (all were held)", committed)
	}
}
