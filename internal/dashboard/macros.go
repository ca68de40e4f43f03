package dashboard

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Range is the time range a panel is drawn for, and the width of its time buckets.
type Range struct {
	From, To time.Time
	Interval time.Duration // whole seconds, at least MinInterval
}

// MinInterval is the narrowest bucket: the views roll up per minute.
const MinInterval = time.Minute

// targetPoints is about how many buckets a time series gets across the range.
const targetPoints = 120

// niceIntervals are the bucket widths a range may get, narrowest first. After 3 hours comes a
// day: a range too long for 3-hour buckets (over 15 days) is drawn by the day, so that its
// series read the rollups' day rows. With 6- or 12-hour buckets a series over 30 days would
// merge every hour's quantile states (720 a model, each up to 8,192 latencies: 1.3 s at 10^8
// requests) where the days need 30.
var niceIntervals = []time.Duration{
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 3 * time.Hour, 24 * time.Hour,
}

// NewRange returns the range [from, to] with the narrowest nice interval that gives at most
// about 120 buckets. It fails when to is not after from.
func NewRange(from, to time.Time) (Range, error) {
	if !to.After(from) {
		return Range{}, fmt.Errorf("%w: from %s is not before to %s", ErrBadRange, from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339))
	}
	r := Range{From: from.Truncate(time.Second), To: to.Truncate(time.Second), Interval: niceIntervals[len(niceIntervals)-1]}
	for _, iv := range niceIntervals {
		if to.Sub(from)/iv <= targetPoints {
			r.Interval = iv
			break
		}
	}
	return r, nil
}

// LastRange is NewRange(now - d, now).
func LastRange(now time.Time, d time.Duration) (Range, error) { return NewRange(now.Add(-d), now) }

var (
	timeFilter = regexp.MustCompile(`\$__timeFilter\(\s*([A-Za-z_][A-Za-z0-9_.]*)\s*\)`)
	anyMacro   = regexp.MustCompile(`\$__[A-Za-z_]+`)
)

// Expand replaces the Grafana ClickHouse plugin's macros in sql with r, as the plugin does:
//
//	$__timeFilter(col)  col >= toDateTime(<from>) AND col <= toDateTime(<to>)
//	$__fromTime         toDateTime(<from>)
//	$__toTime           toDateTime(<to>)
//	$__interval_s       the interval in seconds
//
// with Unix seconds for <from> and <to>. Any other macro is an error (ErrUnknownMacro), so a
// panel never sends one to ClickHouse unexpanded. $__timeInterval is refused on purpose: it
// expands to toStartOfInterval, which ClickHouse 18.16 lacks.
func Expand(sql string, r Range) (string, error) {
	from := fmt.Sprintf("toDateTime(%d)", r.From.Unix())
	to := fmt.Sprintf("toDateTime(%d)", r.To.Unix())
	out := timeFilter.ReplaceAllString(sql, "$1 >= "+from+" AND $1 <= "+to)
	out = strings.NewReplacer(
		"$__fromTime", from,
		"$__toTime", to,
		"$__interval_s", strconv.FormatInt(int64(max(r.Interval/time.Second, 1)), 10),
	).Replace(out)
	if m := anyMacro.FindString(out); m != "" {
		return "", fmt.Errorf("%w: %s", ErrUnknownMacro, m)
	}
	return out, nil
}
