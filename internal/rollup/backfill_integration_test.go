package rollup_test

import (
	"context"
	"reflect"
	"sort"
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
	wm, err := rollup.ReadWatermarks(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
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

// TestAllTimeEqualsTheViews: every rollup read over all time (AllTime: whole days, whole hours,
// the minutes below the watermark, raw rows after it) gives the views' answer over every
// minute, by the day (the first UTC day of the data is read from the day table), and the
// sink rollup's maxima and sums per group give v_freshness's.
func TestAllTimeEqualsTheViews(t *testing.T) {
	conn := migrated(t)
	fill(t, conn, 6000, 1, 0, "1")
	backfill(t, conn, base.Add((dataMinutes-70)*time.Minute))
	for _, r := range rollup.All {
		ms := rollupcheck.ViewMeasures(t, conn, r)
		got := rollupcheck.Answer(t, conn, r, ms, r.AllTime(), 86400)
		want := rollupcheck.Answer(t, conn, r, ms, "v_"+r.Name+"_minute", 86400)
		if !reflect.DeepEqual(got, want) || len(want) < 4 {
			t.Errorf("rollup %s over all time: %d rows, the view %d\nrollup: %v\nview:   %v", r.Name, len(got), len(want), rollupcheck.Head(got), rollupcheck.Head(want))
		}
	}
	// One line per group and topic, as one array: "group topic last_event_time last_flush rows".
	fresh := func(q string) []string {
		var out []string
		if err := conn.QueryRow(context.Background(), "SELECT groupArray(s) FROM ("+q+")").Scan(&out); err != nil {
			t.Fatalf("%v\n%s", err, q)
		}
		sort.Strings(out)
		return out
	}
	got := fresh("SELECT concat(group, ' ', topic, ' ', toString(max(last_event_time)), ' ', toString(max(last_flush)), ' ', toString(sum(rows_landed))) AS s FROM " +
		rollup.Sink.AllTime() + " GROUP BY group, topic HAVING sum(flushes) > 0")
	want := fresh("SELECT concat(group, ' ', topic, ' ', toString(last_event_time), ' ', toString(last_flush), ' ', toString(rows_total)) AS s FROM v_freshness")
	if !reflect.DeepEqual(got, want) || len(want) != 2 {
		t.Errorf("freshness over the sink rollup %v, v_freshness %v", got, want)
	}
}
