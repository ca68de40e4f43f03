package pipelines

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/internal/ops"
)

// TestWaitingHookNamesTheRestore: while a stage's table is restored, /readyz gives the
// restore's own words (partition, records, time left), not a start-up wait's "waiting: ...";
// other waits keep their prefix.
func TestWaitingHookNamesTheRestore(t *testing.T) {
	ready := ops.NewReadiness(time.Second)
	ready.AddStage(StageIngest)
	e := &stageEnv{ready: ready}
	hook := e.waitingHook(StageIngest)
	reason := func() string {
		for _, r := range ready.Evaluate(context.Background()) {
			if r.Name == "stage "+StageIngest && r.Err != nil {
				return r.Err.Error()
			}
		}
		return ""
	}
	hook(&kafka.RestoreStatus{Partitions: []int32{2}, Restored: 1_200_000, ToGo: 2_200_000, ETA: 6 * time.Second})
	if got, want := reason(), "restoring table partition 2: 1.2M of 3.4M records, about 6 s left"; got != want {
		t.Fatalf("reason %q, want %q", got, want)
	}
	hook(errors.New("topic gateway-log not in the metadata"))
	if got, want := reason(), "waiting: topic gateway-log not in the metadata"; got != want {
		t.Fatalf("reason %q, want %q", got, want)
	}
}
