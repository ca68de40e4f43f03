package rollup_test

import (
	"context"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/backflowhq/backflow/internal/rollup"
	"github.com/backflowhq/backflow/test/rollupcheck"
)

// dayBase is the first minute of the synthetic data of the day tests: 54 hours of it, from
// 21:00 on one day to 03:00 two days later, so two whole UTC days with hours on either side.
var dayBase = time.Date(2026, 11, 5, 21, 0, 0, 0, time.UTC)

const dayMinutes = 54 * 60

// dayWindows are ranges over the day data that read days, the hours and minutes at their edges,
// and raw rows: by the day (days read), by the week (a table: days read), by 6 hours (hours,
// no day), with edges inside minutes and hours.
func dayWindows() []rollupcheck.Window {
	from, to := dayBase, dayBase.Add(dayMinutes*time.Minute)
	return []rollupcheck.Window{
		{Name: "all, daily", From: from.Add(-time.Hour), To: to.Add(time.Hour), Interval: 86400},
		{Name: "edges inside minutes and hours, daily", From: from.Add(37*time.Minute + 10*time.Second), To: to.Add(-70*time.Minute + 59*time.Second), Interval: 86400},
		{Name: "edges inside minutes, as a table", From: from.Add(2*time.Hour + 5*time.Minute + 30*time.Second), To: to.Add(-2*time.Minute - 30*time.Second), Interval: 7 * 86400},
		{Name: "by 6 hours", From: from, To: to, Interval: 6 * 3600},
		{Name: "one whole day, hourly", From: dayBase.Add(3 * time.Hour), To: dayBase.Add(27*time.Hour - time.Second), Interval: 3600},
	}
}

func checkDays(t *testing.T, conn driver.Conn, stage string) {
	t.Helper()
	ws := dayWindows()
	if n := rollupcheck.Equal(t, conn, stage, ws); n < len(rollup.All)*len(ws) {
		t.Errorf("%s: %d of %d comparisons had data", stage, n, len(rollup.All)*len(ws))
	}
}

// TestDaysEqualTheViews: the day level. Over two whole UTC days and the hours on either side, a
// panel reading the rollups (days, hours, minutes, raw rows past the watermark) gives the
// per-minute views' answer (counts, sums, maxima, quantiles) for ranges whose buckets are days,
// weeks, 6 hours and hours, with edges inside minutes and hours; and it still does after a
// replay rewrites keys of a whole day, and after late rows arrive in one minute of a whole day
// and only that minute is rolled up again: the day is re-aggregated with it.
func TestDaysEqualTheViews(t *testing.T) {
	conn := migrated(t)
	const n = dayMinutes * 5                                         // at most 8,192 latencies a model in any answer: the quantiles merge exactly
	const lateRows = "intDiv(number, 5) = 600"                       // the rows of one minute, 07:00 on the first whole day
	fillSpan(t, conn, dayBase, dayMinutes, n, 1, 0, "NOT "+lateRows) // they arrive late, below
	// Everything but the last 50 minutes rolled up: those are read from the tables.
	for _, src := range rollup.Sources() {
		if err := rollup.Backfill(context.Background(), conn, src, dayBase, dayBase.Add((dayMinutes-50)*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	var days uint64
	if err := conn.QueryRow(context.Background(), "SELECT count() FROM "+rollup.Model.DayTable()+" FINAL WHERE requests > 0").Scan(&days); err != nil || days == 0 {
		t.Fatalf("%d model day rows (%v): the backfill built no day level", days, err)
	}
	checkDays(t, conn, "backfilled")

	// A replay in a new epoch rewrites a tenth of the keys with other values, the first whole
	// day among them; the minutes it touched are rolled up again, as the rollup loop does.
	fillSpan(t, conn, dayBase, dayMinutes, n, 2, 3, "number % 10 = 1")
	recomputeAll(t, conn, []rollup.Span{{From: dayBase, To: dayBase.Add((dayMinutes - 50) * time.Minute)}})
	checkDays(t, conn, "replay")

	// Late rows, long after their minutes were rolled up: those of one minute of the first whole
	// day (the ledger's rows of the same numbers fall at 23:00 on the second). Only the minutes
	// they touched are recomputed, as their marks would have the loop do (and the minute after,
	// where the DLQ's repeats of its late origins lie: a late first entry changes which counts).
	fillSpan(t, conn, dayBase, dayMinutes, n, 1, 0, lateRows)
	late, lateLedger := dayBase.Add(600*time.Minute), dayBase.Add(3000*time.Minute)
	if late.Day() != dayBase.Day()+1 || lateLedger.Day() != dayBase.Day()+2 {
		t.Fatalf("the late minutes %v and %v are not in the whole days", late, lateLedger)
	}
	recomputeAll(t, conn, []rollup.Span{{From: late, To: late.Add(2 * time.Minute)}, {From: lateLedger, To: lateLedger.Add(5 * time.Minute)}})
	checkDays(t, conn, "late minute")
}
