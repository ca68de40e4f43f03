package clickhouse

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

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
		RunConfig{ClickHouse: Conn{Addr: addr, DialTimeout: 100 * time.Millisecond}, Logger: log}, nil, Stage)
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
