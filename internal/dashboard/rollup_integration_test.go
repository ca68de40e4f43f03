package dashboard_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/backflowhq/backflow/internal/dashboard"
	"github.com/backflowhq/backflow/internal/rollup"
	"github.com/backflowhq/backflow/test/dashdata"
	"github.com/backflowhq/backflow/test/pipelinetest"
)

// The ranges the panels are compared over, as the page and Grafana ask for them.
var compared = []time.Duration{30 * time.Minute, 6 * time.Hour, 7 * 24 * time.Hour, 30 * 24 * time.Hour, 365 * 24 * time.Hour}

// TestPanelsOverRollupsEqualTheViews: every panel that reads a rollup gives the rows its SQL of
// before gave over the per-minute views (dashdata.ViewSQL), for the last 30 minutes, 6 hours, 7
// days, 30 days and a year, on 31 days of synthetic traffic whose last 12 minutes are not
// rolled up yet: each range reads days (from 7 days up: the tables, bars and stats; the series
// over a year, by the day), hours, minutes and raw rows, its edges inside a minute; and
// again after a replay rewrote the last 6 hours with other values. Each range's buckets are the
// page's (1 minute to a day), so the time series read the hour table only from 7 days up, and
// the day table only over the year.
func TestPanelsOverRollupsEqualTheViews(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	conn := pipelinetest.Migrated(t, ctx, "it_panels_")
	end := time.Now().UTC().Truncate(time.Minute).Add(37 * time.Second)
	// 10,000 requests over 31 days and 5,000 more in the last 6 hours: no model has more than
	// 8,192 latencies in any answer, so the quantiles merge without sampling and are exact.
	for _, s := range []dashdata.Spec{
		{Requests: 10000, From: end.Add(-31 * 24 * time.Hour), To: end.Add(-6 * time.Hour)},
		{Requests: 5000, First: 10000, From: end.Add(-6 * time.Hour), To: end},
	} {
		if err := dashdata.Fill(ctx, conn, s); err != nil {
			t.Fatal(err)
		}
	}
	watermark := end.Add(-12 * time.Minute)
	for _, src := range rollup.Sources() {
		if err := rollup.Backfill(ctx, conn, src, end.Add(-32*24*time.Hour), watermark); err != nil {
			t.Fatal(err)
		}
	}

	compare(t, conn, end, "backfilled")

	// A replay in a new epoch rewrites the last 6 hours' requests with other models, tenants,
	// verdicts and dead letters; the minutes it touched below the watermark are rolled up again,
	// as the rollup loop does. Combinations vanish from minutes: the rollups keep them at zero.
	if err := dashdata.Fill(ctx, conn, dashdata.Spec{Requests: 5000, First: 10000, From: end.Add(-6 * time.Hour), To: end, Epoch: 1}); err != nil {
		t.Fatal(err)
	}
	for _, src := range rollup.Sources() {
		if err := rollup.Backfill(ctx, conn, src, end.Add(-6*time.Hour-5*time.Minute), watermark); err != nil {
			t.Fatal(err)
		}
	}
	var zero uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM "+rollup.Model.MinuteTable()+" FINAL WHERE requests = 0").Scan(&zero); err != nil || zero == 0 {
		t.Fatalf("%d (model, minute) rows at zero after the replay (%v): the test does not see a combination vanish", zero, err)
	}
	compare(t, conn, end, "replayed")
}

// compare runs every panel that reads a rollup, and its SQL over the views, over each of the
// compared ranges ending at end, and fails the test unless they give the same rows.
func compare(t *testing.T, conn driver.Conn, end time.Time, stage string) {
	t.Helper()
	ctx := context.Background()
	compares, nonEmpty := 0, 0
	for _, d := range compared {
		rg, err := dashboard.LastRange(end, d)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range dashboard.Panels {
			if p.Rollup == "" {
				continue
			}
			ref := p
			ref.SQL = dashdata.ViewSQL[p.ID]
			if ref.SQL == "" {
				t.Fatalf("panel %s has no SQL over the views to compare with", p.ID)
			}
			before := time.Now().Unix()
			got, err := dashboard.RunPanel(ctx, conn, p, rg, 100000)
			if err != nil {
				t.Fatal(err)
			}
			want, err := dashboard.RunPanel(ctx, conn, ref, rg, 100000)
			if err != nil {
				t.Fatal(err)
			}
			after := time.Now().Unix()
			if p.ID == "freshness" {
				// event_lag_s and flush_age_s count from now(): check each against its time, then
				// compare the rest.
				for _, res := range []*dashboard.Result{&got, &want} {
					for _, r := range res.Rows {
						for _, c := range [][2]int{{2, 3}, {4, 5}} {
							if at := r[c[0]].(int64) + r[c[1]].(int64); at < before || at > after {
								t.Errorf("freshness %v: %s + %s is %d, not a time of the query (%d to %d)", r, p.Columns[c[0]], p.Columns[c[1]], at, before, after)
							}
							r[c[1]] = nil
						}
					}
				}
			}
			compares++
			if len(want.Rows) > 0 {
				nonEmpty++
			}
			if !reflect.DeepEqual(got.Columns, want.Columns) || !reflect.DeepEqual(got.Rows, want.Rows) {
				t.Errorf("%s: %s over the last %v (by %v): %d rows through the rollup, %d over the views\ncolumns %v, want %v\nrollup: %v\nviews:  %v",
					stage, p.ID, d, rg.Interval, len(got.Rows), len(want.Rows), got.Columns, want.Columns, first(got.Rows), first(want.Rows))
				continue
			}
			t.Logf("%s: %-24s last %-9v by %-6v %4d rows equal (%d ms through the rollup, %d ms over the views)", stage, p.ID, d, rg.Interval, len(got.Rows), got.TookMs, want.TookMs)
		}
	}
	if compares < len(compared)*13 || nonEmpty != compares {
		t.Fatalf("%s: %d comparisons, %d with rows: want every panel with a rollup over each range, each with rows", stage, compares, nonEmpty)
	}
}

func first(rows [][]any) string {
	if len(rows) > 6 {
		return fmt.Sprint(rows[:6]) + "..."
	}
	return fmt.Sprint(rows)
}
