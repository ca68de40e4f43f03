package ingest_test

import (
	"context"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/processors/ingest"
	"github.com/backflowhq/backflow/tools/loadgen"
)

// lockedLog is a log destination safe for the stage's goroutines.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestIngestRestoreReported runs ingest over loadgen traffic until every offset is committed,
// stops it, and starts it again on an empty storage folder: the dedupe table is restored from
// its changelog. The done line must count exactly the changelog's records, readiness must have
// named the restore before the stage was ready, and the second stop must say how many records
// it left to redelivery (none: nothing new arrived).
func TestIngestRestoreReported(t *testing.T) {
	s := newStage(t, 2)
	m := s.load(loadgen.Config{Requests: 400, DuplicateRate: 0.05, Seed: 5})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	done := s.run(runCtx, moderationClient(t, ""))
	s.landedExactly(ctx, m, 1200+12, stop, done) // 3 records a request, and the poison

	// the changelog the restore reads: every record between each partition's start and end
	adm := kadm.NewClient(s.Admin)
	table := s.Ingest.TableTopic()
	starts, err := adm.ListStartOffsets(ctx, table)
	if err != nil {
		t.Fatal(err)
	}
	ends, err := adm.ListEndOffsets(ctx, table)
	if err != nil {
		t.Fatal(err)
	}
	var changelog int64
	ends.Each(func(o kadm.ListedOffset) {
		st, _ := starts.Lookup(o.Topic, o.Partition)
		changelog += o.Offset - st.Offset
	})
	if changelog < 1200 {
		t.Fatalf("changelog %s holds %d records, want at least one claim per enriched record (1200)", table, changelog)
	}

	var logs lockedLog
	var (
		mu      sync.Mutex
		reasons []string
	)
	ready := make(chan struct{})
	runCtx, stop = context.WithCancel(ctx)
	defer stop()
	result := make(chan error, 1)
	go func() {
		result <- ingest.Run(runCtx, s.Ingest, ingest.RunConfig{Kafka: s.Kafka, Registry: s.Registry, SensitiveWords: moderationClient(t, ""),
			StorageDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(&logs, nil)),
			Waiting: func(err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					reasons = append(reasons, err.Error())
				}
			},
			OnReady: func(*ingest.Processor) { close(ready) }})
	}()
	select {
	case <-ready:
	case err := <-result:
		t.Fatalf("ingest stopped before ready: %v", err)
	case <-ctx.Done():
		t.Fatal("ingest not ready")
	}
	done0 := regexp.MustCompile(`msg="table restored" stage=ingest group=\S+ partitions=0,1 records=(\d+) seconds=`).FindStringSubmatch(logs.String())
	if done0 == nil {
		t.Fatalf("no done line for both partitions in:\n%s", logs.String())
	}
	if done0[1] != strconv.FormatInt(changelog, 10) {
		t.Fatalf("done line counts %s records, the changelog holds %d", done0[1], changelog)
	}
	mu.Lock()
	named := false
	for _, r := range reasons {
		named = named || strings.HasPrefix(r, "restoring table partition") || r == "restored table partitions 0, 1: "+kafka.HumanCount(changelog)+" records; joining the group"
	}
	got := append([]string(nil), reasons...)
	mu.Unlock()
	if !named {
		t.Fatalf("readiness never named the restore; reasons %q", got)
	}

	stop()
	if err := <-result; err != nil {
		t.Fatalf("ingest: %v", err)
	}
	if !strings.Contains(logs.String(), `msg="stopped; left to redelivery" stage=ingest records=0`) {
		t.Fatalf("no stop line with 0 records left in:\n%s", logs.String())
	}
}
