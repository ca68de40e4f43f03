package dashboard_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/backflowhq/backflow/internal/dashboard"
	"github.com/backflowhq/backflow/internal/rollup"
	"github.com/backflowhq/backflow/test/pipelinetest"
)

// TestRollupLagCountsAnEventToComeAsNow: a flush that landed an event dated an hour ahead of
// the server's clock (a producer's clock ahead, or a stream whose records carry dates to come)
// does not make the rollup card show an hour of lag: no rollup can hold a minute that has not
// ended, so the newest event counts as now.
func TestRollupLagCountsAnEventToComeAsNow(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn := pipelinetest.Migrated(t, ctx, "it_lag_")
	now := time.Now().UTC()
	for i, ev := range []time.Time{now.Add(-20 * time.Minute), now.Add(time.Hour)} {
		err := conn.Exec(ctx, fmt.Sprintf(`INSERT INTO sink_ledger (batch_id, group, topic, partition, min_offset, max_offset, rows, hit_rows, epoch, flushed_at, max_event_time)
			SELECT 'b%d', 'backflow-stream-x', 'x', 0, %d, %d, 1, 0, 0, toDateTime(%d), toDateTime(%d)`,
			i, i, i, now.Add(-10*time.Minute).Unix(), ev.Unix()))
		if err != nil {
			t.Fatal(err)
		}
	}
	watermark := now.Add(-5 * time.Minute)
	if err := rollup.Backfill(ctx, conn, rollup.SinkLedger, now.Add(-time.Hour), watermark); err != nil {
		t.Fatal(err)
	}
	l := dashboard.ReadRollupLag(ctx, conn)
	if l.Error != "" || l.NewestEvent == nil || l.RolledUpTo == nil || l.LagS == nil {
		t.Fatalf("card: %+v", l)
	}
	after := time.Now().Unix()
	if *l.NewestEvent < now.Unix()-1 || *l.NewestEvent > after+1 {
		t.Errorf("newest event %v, want the server's now (%v to %v): an event to come counts as now", time.Unix(*l.NewestEvent, 0).UTC(), now, time.Unix(after, 0).UTC())
	}
	// Rolled up to the watermark's minute (give or take the minute it falls in), whatever time
	// the test took to get here; the lag is measured from it to the server's now.
	if *l.RolledUpTo < watermark.Unix()-60 || *l.RolledUpTo > watermark.Unix()+60 {
		t.Errorf("rolled up to %v, want the watermark's minute (%v)", time.Unix(*l.RolledUpTo, 0).UTC(), watermark)
	}
	if want := *l.NewestEvent - *l.RolledUpTo; *l.LagS != want {
		t.Errorf("lag %d s (newest %d, rolled up to %d), want %d: the newest event as now, not the hour ahead", *l.LagS, *l.NewestEvent, *l.RolledUpTo, want)
	}
}
