package clickhouse

import (
	"io"
	"log/slog"
	"testing"

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
