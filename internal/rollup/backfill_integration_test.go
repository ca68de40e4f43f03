package rollup_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/backflowhq/backflow/internal/rollup"
	"github.com/backflowhq/backflow/test/rollupcheck"
)

// backfill rolls up every source from an hour before the data to upTo, as an existing
// deployment's backfill does.
func backfill(t *testing.T, conn driver.Conn, upTo time.Time) {
	t.Helper()
	for _, src := range rollup.Sources() {
		if err := rollup.Backfill(context.Background(), conn, src, base.Add(-time.Hour), upTo); err != nil {
			t.Fatal(err)
		}
	}
}

// watermarks reads each source's watermark.
func watermarks(t *testing.T, conn driver.Conn) map[string]time.Time {
	t.Helper()
	rows, err := conn.Query(context.Background(), "SELECT source, max(minute) FROM "+rollup.Watermarks+" GROUP BY source")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]time.Time{}
	for rows.Next() {
		var s string
		var m time.Time
		if err := rows.Scan(&s, &m); err != nil {
			t.Fatal(err)
		}
		out[s] = m.UTC()
	}
	return out
}

// TestBackfillEqualsTheViews: rows a table held before any rollup ran, rolled up by Backfill
// (over several UTC days, the DLQ's first entries included), give the views' answer, with the
// watermark of every source at the last minute backfilled; a second Backfill changes nothing.
func TestBackfillEqualsTheViews(t *testing.T) {
	conn := migrated(t)
	fill(t, conn, 6000, 1, 0, "1")
	// dlq_first as it was before the mirror wrote it: empty, for Backfill to fill.
	exec(t, conn, "TRUNCATE TABLE "+rollup.DLQFirst)
	upTo := base.Add((dataMinutes - 40) * time.Minute).Add(30 * time.Second) // up to the end of its minute
	backfill(t, conn, upTo)
	wm := watermarks(t, conn)
	for _, src := range rollup.Sources() {
		if want := upTo.Truncate(time.Minute); !wm[src].Equal(want) {
			t.Errorf("watermark of %s: %v, want %v", src, wm[src], want)
		}
	}
	if base.Day() == upTo.Day() {
		t.Fatal("the data does not cross a UTC day: Backfill's days are not tested")
	}
	check(t, conn, "backfill")
	backfill(t, conn, upTo)
	check(t, conn, "backfill again")
}

// TestAllTimeEqualsTheViews: every rollup read over all time (AllTime: whole hours, the minutes
// below the watermark, raw rows after it) gives the views' answer over every minute, and the
// sink rollup's maxima and sums per group give v_freshness's.
func TestAllTimeEqualsTheViews(t *testing.T) {
	conn := migrated(t)
	fill(t, conn, 6000, 1, 0, "1")
	backfill(t, conn, base.Add((dataMinutes-70)*time.Minute))
	for _, r := range rollup.All {
		ms := rollupcheck.ViewMeasures(t, conn, r)
		got := rollupcheck.Answer(t, conn, r, ms, r.AllTime(), 3600)
		want := rollupcheck.Answer(t, conn, r, ms, "v_"+r.Name+"_minute", 3600)
		if !reflect.DeepEqual(got, want) || len(want) < 4 {
			t.Errorf("rollup %s over all time: %d rows, the view %d\nrollup: %v\nview:   %v", r.Name, len(got), len(want), rollupcheck.Head(got), rollupcheck.Head(want))
		}
	}
	fresh := func(q string) []string {
		rows, err := conn.Query(context.Background(), q)
		if err != nil {
			t.Fatalf("%v\n%s", err, q)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var group, topic string
			var last, flush time.Time
			var total uint64
			if err := rows.Scan(&group, &topic, &last, &flush, &total); err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%s %s %s %s %d", group, topic, last.UTC().Format(time.DateTime), flush.UTC().Format(time.DateTime), total))
		}
		return out
	}
	got := fresh("SELECT group, topic, max(last_event_time), max(last_flush), sum(rows_landed) FROM " + rollup.Sink.AllTime() +
		" GROUP BY group, topic HAVING sum(flushes) > 0 ORDER BY group, topic")
	want := fresh("SELECT group, topic, last_event_time, last_flush, toUInt64(rows_total) FROM v_freshness ORDER BY group, topic")
	if !reflect.DeepEqual(got, want) || len(want) != 2 {
		t.Errorf("freshness over the sink rollup %v, v_freshness %v", got, want)
	}
}
