// Package rollupcheck holds the dashboards' rollups to the views they mirror: Equal reads each
// rollup for a time range as a panel does (internal/rollup's Range: hours, minutes and the
// rows past the watermark) and compares, bucket by bucket and key by key, each measure with
// what its per-minute view over the deduplicated tables gives. The rollups' own tests and the
// end-to-end tests (a replay, a killed sink, late events, a migration) use it.
package rollupcheck

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/backflowhq/backflow/internal/rollup"
)

// Window is one range to compare over, with its bucket width in seconds.
type Window struct {
	Name     string
	From, To time.Time
	Interval int64
}

// Windows are ranges over [from, to) that read hours, minutes and raw rows, with edges inside
// a minute, by buckets from a minute to a week.
func Windows(from, to time.Time) []Window {
	d := to.Sub(from)
	return []Window{
		{"all, hourly", from.Add(-time.Hour), to.Add(time.Hour), 3600},
		{"edges inside minutes, 5 min", from.Add(7*time.Minute + 10*time.Second), to.Add(-d/4 + 59*time.Second), 300},
		{"whole hours with edges, as a table", from.Add(21*time.Minute + 30*time.Second), to.Add(-2 * time.Minute), 7 * 24 * 3600},
		{"the last half hour, per minute", to.Add(-30 * time.Minute), to, 60},
		{"per 2 hours", from.Add(-30 * time.Minute), to, 7200},
	}
}

// Equal fails t unless every rollup read through Range (days where the window's buckets are
// whole days) over each window gives what its view
// gives; it returns how many (rollup, window) comparisons had rows. stage names the check.
func Equal(t testing.TB, conn driver.Conn, stage string, windows []Window) int {
	t.Helper()
	nonEmpty := 0
	for _, r := range rollup.All {
		ms := ViewMeasures(t, conn, r)
		for _, w := range windows {
			hoursOK, daysOK := fmt.Sprintf("%d %% 3600 = 0", w.Interval), fmt.Sprintf("%d %% 86400 = 0", w.Interval)
			got := Answer(t, conn, r, ms, expand(r.Range(hoursOK, daysOK), w), w.Interval)
			view := fmt.Sprintf("(SELECT * FROM v_%s_minute WHERE minute >= $__fromTime AND minute <= $__toTime)", r.Name)
			want := Answer(t, conn, r, ms, expand(view, w), w.Interval)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s: rollup %s, %s: %d rows from the rollup, %d from the view\nrollup: %v\nview:   %v", stage, r.Name, w.Name, len(got), len(want), Head(got), Head(want))
			}
			if len(want) > 0 {
				nonEmpty++
			}
		}
	}
	return nonEmpty
}

// ViewMeasures lists the measures of r that its per-minute view also has.
func ViewMeasures(t testing.TB, conn driver.Conn, r rollup.Rollup) []rollup.Measure {
	t.Helper()
	rows, err := conn.Query(context.Background(), "SELECT name FROM system.columns WHERE database = currentDatabase() AND table = 'v_"+r.Name+"_minute'")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	has := map[string]bool{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		has[n] = true
	}
	var out []rollup.Measure
	for _, m := range r.Measures {
		if has[m.Name] {
			out = append(out, m)
		}
	}
	if len(out) < 2 {
		t.Fatalf("v_%s_minute shares %d measures with the rollup", r.Name, len(out))
	}
	return out
}

// Answer is what a panel would draw from src (a per-minute source with column minute): per
// bucket of iv seconds and combination of dimensions, each measure's final value, as text. A
// combination whose sums are all zero (a key a re-aggregation no longer found) is left out,
// as a view has no row for it.
func Answer(t testing.TB, conn driver.Conn, r rollup.Rollup, ms []rollup.Measure, src string, iv int64) []string {
	t.Helper()
	dims := make([]string, len(r.Dims))
	for i, d := range r.Dims {
		dims[i] = d.Name
	}
	sel := []string{fmt.Sprintf("toDateTime(intDiv(toUInt32(minute), %d) * %d) AS bucket", iv, iv)}
	sel = append(sel, dims...)
	for _, m := range ms {
		switch m.Merge {
		case rollup.Sum:
			sel = append(sel, "toString(sum("+m.Name+"))")
		case rollup.Max:
			sel = append(sel, "toString(max("+m.Name+"))")
		case rollup.Quantiles:
			sel = append(sel, "toString(quantilesMerge(0.5, 0.95, 0.99)("+m.Name+"))")
		}
	}
	q := fmt.Sprintf("SELECT %s FROM %s GROUP BY bucket, %s ORDER BY bucket, %s", strings.Join(sel, ", "), src, strings.Join(dims, ", "), strings.Join(dims, ", "))
	rows, err := conn.Query(context.Background(), q)
	if err != nil {
		t.Fatalf("%v\n%s", err, q)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var b time.Time
		vals := make([]string, len(dims)+len(ms))
		dest := []any{&b}
		for i := range vals {
			dest = append(dest, &vals[i])
		}
		if err := rows.Scan(dest...); err != nil {
			t.Fatal(err)
		}
		zero := true
		for i, m := range ms {
			if m.Merge == rollup.Sum && vals[len(dims)+i] != "0" {
				zero = false
			}
		}
		if zero {
			continue
		}
		out = append(out, b.UTC().Format("01-02 15:04")+" "+strings.Join(vals, " "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func expand(sql string, w Window) string { return Expand(sql, w.From, w.To, w.Interval) }

// Expand fills in the Grafana macros of sql for the range [from, to] by buckets of iv seconds,
// as the plugin does.
func Expand(sql string, from, to time.Time, iv int64) string {
	return strings.NewReplacer("$__fromTime", fmt.Sprintf("toDateTime(%d)", from.Unix()), "$__toTime", fmt.Sprintf("toDateTime(%d)", to.Unix()),
		"$__interval_s", strconv.FormatInt(iv, 10)).Replace(sql)
}

func Head(s []string) []string { return s[:min(len(s), 8)] }
