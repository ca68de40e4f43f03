package dlqmirror_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/backflowhq/backflow/internal/rollup"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
	"github.com/backflowhq/backflow/sinks/clickhouse/dlqmirror"
	"github.com/backflowhq/backflow/test/pipelinetest"
)

// TestDLQFirstDropsDaysPastRetention: dlq_first holds origins of ten days, a hundred each, and
// some of time 0 (records without a time). With a retention of 7 days and 12 hours, the days
// that ended before now minus it are dropped, whole partitions, and nothing else: the rows of
// the days kept and of time 0 are all there. A second call drops nothing; a retention of 0 (a
// topic kept for ever) drops nothing.
func TestDLQFirstDropsDaysPastRetention(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	conn := pipelinetest.Migrated(t, ctx, "it_dlqfirst_")
	now := time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC)
	today := now.Truncate(24 * time.Hour)
	// 100 origins a day, today and the nine days before it, at noon; 5 of time 0.
	if err := conn.Exec(ctx, fmt.Sprintf(`INSERT INTO dlq_first (origin_time, origin_topic, origin_partition, origin_offset, stage, orphan, dlq_topic, dlq_partition, dlq_offset, version)
SELECT if(number < 1000, toDateTime(%d) - intDiv(number, 100) * 86400, toDateTime(0)), 'inf', 0, toInt64(number), 'ingest', '', 'dlq', 0, toInt64(number), 1 FROM numbers(1005)`,
		today.Add(12*time.Hour).Unix())); err != nil {
		t.Fatal(err)
	}
	days := func() map[string]uint64 {
		rows, err := conn.Query(ctx, "SELECT toString(toYYYYMMDD(origin_time)), count() FROM "+rollup.DLQFirst+" GROUP BY origin_time")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[string]uint64{}
		for rows.Next() {
			var d string
			var n uint64
			if err := rows.Scan(&d, &n); err != nil {
				t.Fatal(err)
			}
			out[d] += n
		}
		return out
	}
	// The cut-off is 7.5 days before 03:00: 15:00 eight days ago. The only day that ended by
	// then is the ninth back; the eighth, the cut-off's own, is kept.
	dropped, err := dlqmirror.DropExpiredDLQFirst(ctx, conn, chschema.Conn{}, 7*24*time.Hour+12*time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	want := []uint32{ymd(today.Add(-9 * 24 * time.Hour))}
	if !reflect.DeepEqual(dropped, want) {
		t.Fatalf("dropped days %v, want %v", dropped, want)
	}
	left := days()
	for i := 0; i < 10; i++ {
		d := fmt.Sprint(ymd(today.Add(-time.Duration(i) * 24 * time.Hour)))
		if w := map[bool]uint64{true: 100, false: 0}[i < 9]; left[d] != w {
			t.Errorf("day %s holds %d origins, want %d", d, left[d], w)
		}
	}
	if left["19700101"] != 5 {
		t.Errorf("%d origins of time 0 left, want 5", left["19700101"])
	}
	for _, r := range []time.Duration{7*24*time.Hour + 12*time.Hour, 0} {
		if again, err := dlqmirror.DropExpiredDLQFirst(ctx, conn, chschema.Conn{}, r, now); err != nil || len(again) != 0 {
			t.Fatalf("retention %v, again: dropped %v (%v), want nothing", r, again, err)
		}
	}
}

func ymd(t time.Time) uint32 { return uint32(t.Year()*10000 + int(t.Month())*100 + t.Day()) }
