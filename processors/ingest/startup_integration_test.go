package ingest_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/control"
	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/internal/moderation"
	"github.com/backflowhq/backflow/internal/ops"
	"github.com/backflowhq/backflow/processors/ingest"
	"github.com/backflowhq/backflow/test/testenv"
)

// TestEpochRightAfterCreate reads and writes the epoch on a control topic created a moment
// before, as a first start does: a fresh topic reads 0, the latest write of the group wins,
// other groups' keys do not count. (On a busy broker the read can come before the new
// topic's leader exists; ReadEpoch retries that. This test exercises the path but cannot force
// the timing.)
func TestEpochRightAfterCreate(t *testing.T) {
	kcfg := testenv.Kafka(t, "epoch-test")
	cl, err := kcfg.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < 5; i++ {
		topic := testenv.ID("control-epoch-")
		testenv.RemoveTopics(t, kcfg, topic)
		compact := "compact"
		if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": &compact}, topic); err != nil {
			t.Fatal(err)
		}
		epoch, err := control.ReadEpoch(ctx, cl, topic, "g")
		if err != nil || epoch != 0 {
			t.Fatalf("fresh topic: epoch %d, %v", epoch, err)
		}
		for _, e := range []int32{1, 3} {
			if err := control.WriteEpoch(ctx, cl, topic, "g", control.EpochRecord{Epoch: e, Time: time.Now()}); err != nil {
				t.Fatal(err)
			}
		}
		if err := control.WriteEpoch(ctx, cl, topic, "other", control.EpochRecord{Epoch: 9}); err != nil {
			t.Fatal(err)
		}
		if epoch, err := control.ReadEpoch(ctx, cl, topic, "g"); err != nil || epoch != 3 {
			t.Fatalf("after writes: epoch %d, %v; want 3", epoch, err)
		}
	}
}

// privateNames returns the stack's Kafka settings, a client (closed when the test ends) and an
// ingest config whose names are tag-inf-<id>, tag-gw-<id>...: its topics (goka's too) and its
// group are removed when the test ends. It creates nothing.
func privateNames(t *testing.T, tag string) (kafka.Conn, *kgo.Client, ingest.Config) {
	t.Helper()
	kcfg := testenv.Kafka(t, tag+"-test")
	cl, err := kcfg.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	id := testenv.ID("")
	cfg := ingest.Config{Group: tag + "-" + id, InferenceTopic: tag + "-inf-" + id, GatewayTopic: tag + "-gw-" + id,
		EnrichedTopic: tag + "-enriched-" + id, DLQTopic: tag + "-dlq-" + id, ControlTopic: tag + "-control-" + id}
	testenv.RemoveTopics(t, kcfg, cfg.InferenceTopic, cfg.GatewayTopic, cfg.EnrichedTopic, cfg.DLQTopic, cfg.ControlTopic, cfg.LoopTopic(), cfg.TableTopic())
	testenv.Groups(t, kcfg, cfg.Group)
	return kcfg, cl, cfg
}

// TestPrepareChecksSourceTopics: source topics with different partition counts stop ingest
// before it reads anything, with an error that says which; good topics get the internal
// topics created with their partition count.
func TestPrepareChecksSourceTopics(t *testing.T) {
	_, cl, cfg := privateNames(t, "prep")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)

	// A missing source topic is waited for (TestIngestWaitsForItsSourceTopics): only the end of
	// ctx ends that wait, with ctx's error.
	gone, end := context.WithCancel(ctx)
	end()
	if _, err := ingest.Prepare(gone, cl, cfg, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("missing topics, ctx ended: %v, want context.Canceled", err)
	}
	adm.CreateTopic(ctx, 3, 1, nil, cfg.InferenceTopic)
	adm.CreateTopic(ctx, 2, 1, nil, cfg.GatewayTopic)
	waitPartitions := func(want map[string]int) { waitTopics(t, ctx, adm, want) }
	visible := func(gwParts int) { waitPartitions(map[string]int{cfg.InferenceTopic: 3, cfg.GatewayTopic: gwParts}) }
	visible(2)
	if _, err := ingest.Prepare(ctx, cl, cfg, 1); !errors.Is(err, ingest.ErrNotCopartitioned) || !strings.Contains(err.Error(), "3 partitions") {
		t.Fatalf("3 vs 2 partitions: %v", err)
	}
	adm.CreatePartitions(ctx, 1, cfg.GatewayTopic)
	visible(3)
	n, err := ingest.Prepare(ctx, cl, cfg, 1)
	if err != nil || n != 3 {
		t.Fatalf("co-partitioned: %d, %v", n, err)
	}
	// The table's changelog is created here too, compacted and deleted a day past the dedupe
	// window (the store keeps no more), and by the time Prepare returns
	// every partition has a leader: goka asks those leaders for offsets at once, and on three
	// brokers a changelog goka created itself was not led yet (fault suite #17).
	td, err := adm.ListTopics(ctx, cfg.TableTopic())
	if err != nil || len(td[cfg.TableTopic()].Partitions) != 3 {
		t.Fatalf("table changelog after Prepare: %v %v, want 3 partitions", td, err)
	}
	for _, p := range td[cfg.TableTopic()].Partitions {
		if p.Leader < 0 || p.Err != nil {
			t.Fatalf("table changelog partition %d: leader %d, %v", p.Partition, p.Leader, p.Err)
		}
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, cfg.TableTopic())
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(cfg.TableTopic(), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range rc.Configs {
		got[c.Key] = c.MaybeValue()
	}
	// The default window, 168 h: retention 192 h, log segments of a day.
	if got["cleanup.policy"] != "compact,delete" || got["retention.ms"] != "691200000" || got["segment.ms"] != "86400000" {
		t.Fatalf("table changelog cleanup.policy %q, retention.ms %q, segment.ms %q; want compact,delete, 691200000, 86400000",
			got["cleanup.policy"], got["retention.ms"], got["segment.ms"])
	}
	waitPartitions(map[string]int{cfg.EnrichedTopic: 3, cfg.DLQTopic: 3, cfg.LoopTopic(): 3, cfg.ControlTopic: 1})
	// A second Prepare leaves the existing topics alone.
	if n, err := ingest.Prepare(ctx, cl, cfg, 1); err != nil || n != 3 {
		t.Fatalf("second prepare: %d, %v", n, err)
	}
}

// TestStartFlagsNonCompactedChangelog (reliability.md #14): the group table's changelog exists
// but with cleanup.policy=delete, so retention would drop dedupe claims and a store rebuilt from
// it would let duplicates through. goka ignores the settings of a changelog it did not create,
// so ingest used to start without a word. Its start-up check must flag the topic (a warning
// and backflow_table_changelog_misconfigured 1) and still run: stopping would only crash-loop.
func TestStartFlagsNonCompactedChangelog(t *testing.T) {
	kcfg, cl, cfg := privateNames(t, "chl")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := kadm.NewClient(cl)
	del := "delete"
	for _, topic := range []string{cfg.InferenceTopic, cfg.GatewayTopic, cfg.TableTopic()} {
		if resp, err := adm.CreateTopic(ctx, 3, 1, map[string]*string{"cleanup.policy": &del}, topic); err != nil || resp.Err != nil {
			t.Fatalf("create %s: %v %v", topic, err, resp.Err)
		}
	}
	// Ingest's start-up refuses missing source topics: wait until the broker lists them.
	waitTopics(t, ctx, adm, map[string]int{cfg.InferenceTopic: 3, cfg.GatewayTopic: 3, cfg.TableTopic(): 3})
	reg, err := avro.NewRegistryClient(avro.RegistryConn{URL: testenv.Get(testenv.RegistryURL)})
	if err != nil {
		t.Fatal(err)
	}
	mod, err := moderation.New(moderation.Conn{URL: testenv.Get(testenv.SensitiveURL)})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil))
	m := ops.NewMetrics(ops.NewRegistry())
	ready := make(chan struct{})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- ingest.Run(runCtx, cfg, ingest.RunConfig{Kafka: kcfg, Registry: reg, SensitiveWords: mod, StorageDir: t.TempDir(), Logger: log,
			Metrics: m.Stage("ingest"), OnReady: func(*ingest.Processor) { close(ready) }})
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("ingest stopped on a non-compacted changelog: %v", err)
	case <-ctx.Done():
		t.Fatal("ingest never got ready")
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("ingest: %v", err)
	}
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	flag := -1.0
	for _, mf := range mfs {
		if mf.GetName() == kafka.MetricTableChangelogMisconfigured {
			for _, s := range mf.GetMetric() {
				for _, l := range s.GetLabel() {
					if l.GetName() == "topic" && l.GetValue() == cfg.TableTopic() {
						flag = s.GetGauge().GetValue()
					}
				}
			}
		}
	}
	if flag != 1 {
		t.Errorf("%s{topic=%q} = %v, want 1", kafka.MetricTableChangelogMisconfigured, cfg.TableTopic(), flag)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logs.String(), "is not compacted") || !strings.Contains(logs.String(), cfg.TableTopic()) {
		t.Errorf("no warning naming the non-compacted changelog in the log:\n%s", logs.String())
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// waitTopics waits until the broker lists every topic of want with its partition count:
// metadata of new topics reaches the brokers a moment after CreateTopics returns.
func waitTopics(t *testing.T, ctx context.Context, adm *kadm.Client, want map[string]int) {
	t.Helper()
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	for {
		td, err := adm.ListTopics(ctx, names...)
		ok := err == nil
		for n, parts := range want {
			ok = ok && len(td[n].Partitions) == parts
		}
		if ok {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("topics never showed the partition counts %v: %v", want, td)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
