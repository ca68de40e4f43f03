package rollup_test

import (
	"strings"
	"testing"
	"time"

	"github.com/backflowhq/backflow/internal/rollup"
	"github.com/backflowhq/backflow/test/rollupcheck"
)

// TestBetweenIsRangeWithBounds: Range is Between with the Grafana macros as its bounds, so a
// panel of a range and a panel of explicit bounds read the same rows; AllTime reads every
// minute from the beginning of DateTime to 2096, with whole days and hours.
func TestBetweenIsRangeWithBounds(t *testing.T) {
	from, to := base.Add(7*time.Minute), base.Add(3*time.Hour)
	for _, r := range rollup.All {
		for _, hoursOK := range []string{"1", "300 % 3600 = 0"} {
			got := r.Between(hoursOK, hoursOK, dt(from), dt(to))
			if want := rollupcheck.Expand(r.Range(hoursOK, hoursOK), from, to, 300); got != want {
				t.Errorf("%s, hours %q:\nBetween %s\nRange   %s", r.Name, hoursOK, got, want)
			}
			if strings.Contains(got, "$__") {
				t.Errorf("%s: Between leaves a macro: %s", r.Name, got)
			}
		}
		if got, want := r.AllTime(), r.Between("1", "1", rollup.Beginning, rollup.End); got != want {
			t.Errorf("%s: AllTime %s, want %s", r.Name, got, want)
		}
	}
}

func dt(t time.Time) string { return rollupcheck.Expand("$__fromTime", t, t, 60) }
