package ingest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/backflowhq/backflow/internal/testenv"
	"github.com/backflowhq/backflow/processors/ingest"
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
		topic := fmt.Sprintf("control-epoch-%d-%d", time.Now().UnixNano(), i)
		compact := "compact"
		if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": &compact}, topic); err != nil {
			t.Fatal(err)
		}
		epoch, err := ingest.ReadEpoch(ctx, cl, topic, "g")
		if err != nil || epoch != 0 {
			t.Fatalf("fresh topic: epoch %d, %v", epoch, err)
		}
		for _, e := range []int32{1, 3} {
			if err := ingest.WriteEpoch(ctx, cl, topic, "g", ingest.EpochRecord{Epoch: e, Time: time.Now()}); err != nil {
				t.Fatal(err)
			}
		}
		if err := ingest.WriteEpoch(ctx, cl, topic, "other", ingest.EpochRecord{Epoch: 9}); err != nil {
			t.Fatal(err)
		}
		if epoch, err := ingest.ReadEpoch(ctx, cl, topic, "g"); err != nil || epoch != 3 {
			t.Fatalf("after writes: epoch %d, %v; want 3", epoch, err)
		}
		kadm.NewClient(cl).DeleteTopics(ctx, topic)
	}
}
