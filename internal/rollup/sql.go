package rollup

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Span is a run of whole minutes: [From, To), both on a minute boundary.
type Span struct{ From, To time.Time }

// Spans merges minutes (any order, repeats allowed; each truncated to its minute) into the
// fewest spans, in time order.
func Spans(minutes []time.Time) []Span {
	ms := make([]int64, 0, len(minutes))
	for _, m := range minutes {
		ms = append(ms, m.Unix()-m.Unix()%60)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i] < ms[j] })
	var out []Span
	for _, m := range ms {
		if n := len(out); n > 0 && out[n-1].To.Unix() >= m {
			if end := m + 60; end > out[n-1].To.Unix() {
				out[n-1].To = time.Unix(end, 0).UTC()
			}
			continue
		}
		out = append(out, Span{time.Unix(m, 0).UTC(), time.Unix(m+60, 0).UTC()})
	}
	return out
}

// hours returns the spans widened to whole hours (UTC), merged.
func hours(spans []Span) []Span { return widen(spans, 3600) }

// days returns the spans widened to whole UTC days, merged.
func days(spans []Span) []Span { return widen(spans, 86400) }

// widen returns the spans widened to whole units of unit seconds (from the Unix epoch, so
// whole UTC hours and days), merged.
func widen(spans []Span, unit int64) []Span {
	var out []Span
	for _, s := range spans {
		from := s.From.Unix() - s.From.Unix()%unit
		to := s.To.Unix()
		if r := to % unit; r != 0 {
			to += unit - r
		}
		if n := len(out); n > 0 && out[n-1].To.Unix() >= from {
			if to > out[n-1].To.Unix() {
				out[n-1].To = time.Unix(to, 0).UTC()
			}
			continue
		}
		out = append(out, Span{time.Unix(from, 0).UTC(), time.Unix(to, 0).UTC()})
	}
	return out
}

func dt(t time.Time) string { return fmt.Sprintf("toDateTime(%d)", t.Unix()) }

// within is the condition that expr (a DateTime) falls in one of spans.
func within(expr string, spans []Span) string {
	if len(spans) == 0 {
		return "0"
	}
	parts := make([]string, len(spans))
	for i, s := range spans {
		parts[i] = fmt.Sprintf("(%s >= %s AND %s < %s)", expr, dt(s.From), expr, dt(s.To))
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return "(" + strings.Join(parts, " OR ") + ")"
}

// minuteOf is the source's minute expression: the leading key of the time-keyed tables, so a
// condition on it reads only those minutes' granules.
func (p Part) minuteOf() string { return "toStartOfMinute(" + p.Time + ")" }

// aggregate is the SELECT of the part's rows whose minute satisfies cond (a condition on the
// part's minute expression, which it is given as its argument), grouped by minute and the
// rollup's dimensions: the rows a rollup stores, as they are now.
func (r Rollup) aggregate(p Part, cond func(minute string) string) string {
	return r.aggregateWith(p, cond, cond)
}

// aggregateWith is aggregate with the rows bounded by cond in its WHERE and by inner where the
// part's Where says $rows (inside its subqueries, which see none of the branch's WITH aliases).
func (r Rollup) aggregateWith(p Part, cond, inner func(minute string) string) string {
	var b strings.Builder
	b.WriteString("SELECT toDateTime(" + p.minuteOf() + ") AS minute")
	for i, d := range r.Dims {
		b.WriteString(", " + alias(p.Dims[i], d.Name))
	}
	for i, m := range r.Measures {
		b.WriteString(", " + alias(p.Measures[i], m.Name))
	}
	b.WriteString(" FROM " + p.Source)
	if p.Final {
		b.WriteString(" FINAL")
	}
	b.WriteString(" WHERE " + cond(p.minuteOf()))
	if p.Where != "" {
		b.WriteString(" AND " + strings.ReplaceAll(p.Where, "$rows", inner(p.minuteOf())))
	}
	b.WriteString(" GROUP BY minute")
	for _, d := range r.Dims {
		b.WriteString(", " + d.Name)
	}
	return b.String()
}

func alias(expr, name string) string {
	if expr == name {
		return expr
	}
	return expr + " AS " + name
}

// replace is the INSERT that writes, at version, the rows of table (keyed by timeCol and the
// dimensions) that fresh holds, and a zero row for every key the table holds in cond's range
// and scope that fresh no longer has, so that each key's newest row is fresh's value or zero.
func (r Rollup) replace(table, timeCol, fresh, cond, scope string, version uint64) string {
	dims := r.dimNames()
	var b strings.Builder
	cols := append(append([]string{timeCol}, dims...), r.measureNames()...)
	b.WriteString(fmt.Sprintf("INSERT INTO %s (%s, version) SELECT %s", table, strings.Join(cols, ", "), strings.Join(append([]string{timeCol}, dims...), ", ")))
	for _, m := range r.Measures {
		b.WriteString(", " + m.merge(m.Name))
	}
	b.WriteString(fmt.Sprintf(", toUInt64(%d) FROM (%s UNION ALL SELECT %s", version, fresh, strings.Join(append([]string{timeCol}, dims...), ", ")))
	for _, m := range r.Measures {
		b.WriteString(", " + m.zero() + " AS " + m.Name)
	}
	b.WriteString(" FROM " + table + " FINAL WHERE " + cond)
	if scope != "" {
		b.WriteString(" AND " + scope)
	}
	b.WriteString(" GROUP BY " + strings.Join(append([]string{timeCol}, dims...), ", "))
	b.WriteString(") GROUP BY " + strings.Join(append([]string{timeCol}, dims...), ", "))
	return b.String()
}

// MinuteSQL is the INSERT that rolls up part's rows of the minutes in spans into the rollup's
// minute table at version.
func (r Rollup) MinuteSQL(p Part, spans []Span, version uint64) string {
	fresh := r.aggregate(p, func(minute string) string { return within(minute, spans) })
	return r.replace(r.MinuteTable(), "minute", fresh, within("minute", spans), p.Scope, version)
}

// HourSQL is the INSERT that rolls the minute rows of the hours in spans (whole UTC hours)
// up into the rollup's hour table at version.
func (r Rollup) HourSQL(spans []Span, version uint64) string {
	cols := append(append([]string{"toDateTime(intDiv(toUInt32(minute), 3600) * 3600) AS hour"}, r.dimNames()...), r.measureNames()...)
	fresh := fmt.Sprintf("SELECT %s FROM %s FINAL WHERE %s", strings.Join(cols, ", "), r.MinuteTable(), within("minute", spans))
	return r.replace(r.HourTable(), "hour", fresh, within("hour", spans), "", version)
}

// DaySQL is the INSERT that rolls the hour rows of the days in spans (whole UTC days) up into
// the rollup's day table at version: a day is merged from its 24 hours, as an hour is from its
// 60 minutes, with the same merges (sums, maxima, quantile states).
func (r Rollup) DaySQL(spans []Span, version uint64) string {
	cols := append(append([]string{"toDateTime(intDiv(toUInt32(hour), 86400) * 86400) AS day"}, r.dimNames()...), r.measureNames()...)
	fresh := fmt.Sprintf("SELECT %s FROM %s FINAL WHERE %s", strings.Join(cols, ", "), r.HourTable(), within("hour", spans))
	return r.replace(r.DayTable(), "day", fresh, within("day", spans), "", version)
}

// VersionSQL asks for the newest version of table's rows in spans (of its time column).
func VersionSQL(table, timeCol string, spans []Span) string {
	return fmt.Sprintf("SELECT toUInt64(max(version)) FROM %s WHERE %s", table, within(timeCol, spans))
}

// WatermarkSQL records that source's minutes up to minute have been rolled up.
func WatermarkSQL(source string, minute time.Time) string {
	return fmt.Sprintf("INSERT INTO %s (source, minute, version) SELECT '%s', %s, toUInt64(%d)", Watermarks, source, dt(minute), minute.Unix())
}

// watermark is the scalar subquery of the minute from which the rollup is read from raw rows:
// the oldest of its sources' watermarks (a source without one: the rollup has nothing, and
// every minute is read from raw rows). Never before 1970-01-02, so that arithmetic on it stays
// in DateTime's range.
func (r Rollup) watermark() string {
	srcs := r.Sources()
	quoted := make([]string, len(srcs))
	for i, s := range srcs {
		quoted[i] = "'" + s + "'"
	}
	return fmt.Sprintf("greatest(toDateTime(86400), (SELECT if(count() = %d, min(m), toDateTime(0)) FROM (SELECT source, max(minute) AS m FROM %s WHERE source IN (%s) GROUP BY source)))",
		len(srcs), Watermarks, strings.Join(quoted, ", "))
}

// Range is a subquery of the rollup's rows for a panel's time range, with the Grafana macros
// $__fromTime and $__toTime: one row per bucket and combination of dimensions, with columns
// minute (the bucket's start), the dimensions and the measures (stored form: merge the
// quantile states), covering exactly the minutes m with $__fromTime <= m <= $__toTime, as
// WHERE $__timeFilter(minute) over a per-minute view does. It reads the coarsest level that
// keeps that exact:
//   - the day table for the whole UTC days in the range, when hoursOK and daysOK (SQL
//     conditions, e.g. "$__interval_s % 86400 = 0" for a time series: no day row may straddle
//     two buckets) both hold;
//   - the hour table for the whole hours in the range outside those days, when hoursOK holds;
//   - the minute table for the rest, below the watermark;
//   - the source tables, through FINAL, from the watermark on: the minutes not rolled up yet.
func (r Rollup) Range(hoursOK, daysOK string) string {
	return r.Between(hoursOK, daysOK, "$__fromTime", "$__toTime")
}

// Between is Range with the bounds given as SQL expressions of type DateTime, from and to,
// in place of the macros: the minutes m with from <= m <= to.
func (r Rollup) Between(hoursOK, daysOK, from, to string) string {
	// Each branch binds the watermark once (WITH ... AS _watermark) and its bounds use the alias:
	// spelled out, the bounds nest it 27 times, and ClickHouse runs a scalar subquery once for
	// each time it is written.
	full := r.watermark()
	with := "WITH " + full + " AS _watermark "
	w := "_watermark"
	// Every bound is a DateTime; [h1, h2) are the whole hours and [d1, d2) the whole days read
	// from the coarser tables, h1 <= d1 <= d2 <= h2, all of them at most last + 1.
	last := fmt.Sprintf("least(%s, %s - 1)", to, w)                                                       // the last minute read from rollups
	h1 := fmt.Sprintf("if(%s, %s, %s + 1)", hoursOK, ceil(from, 3600), last)                              // first whole hour
	h2 := fmt.Sprintf("greatest(%s, %s)", h1, floor(last+" + 60", 3600))                                  // end of the whole hours
	d1 := fmt.Sprintf("if((%s) AND (%s), least(%s, %s), %s)", hoursOK, daysOK, ceil(from, 86400), h2, h2) // first whole day
	d2 := fmt.Sprintf("greatest(%s, %s)", d1, floor(last+" + 60", 86400))                                 // end of the whole days
	cols := strings.Join(append(r.dimNames(), r.measureNames()...), ", ")
	branches := []string{
		fmt.Sprintf(with+"SELECT day AS minute, %s FROM %s FINAL WHERE (%s) AND (%s) AND day >= %s AND day < %s", cols, r.DayTable(), hoursOK, daysOK, d1, d2),
		fmt.Sprintf(with+"SELECT hour AS minute, %s FROM %s FINAL WHERE (%s) AND ((hour >= %s AND hour < %s) OR (hour >= %s AND hour < %s))", cols, r.HourTable(), hoursOK, h1, d1, d2, h2),
		fmt.Sprintf(with+"SELECT minute, %s FROM %s FINAL WHERE minute >= %s AND minute < least(%s, %s + 1)", cols, r.MinuteTable(), from, h1, last),
		fmt.Sprintf(with+"SELECT minute, %s FROM %s FINAL WHERE minute >= %s AND minute <= %s", cols, r.MinuteTable(), h2, last),
	}
	raw := func(w string) func(minute string) string {
		return func(minute string) string {
			return fmt.Sprintf("%s >= greatest(%s, %s) AND %s <= %s", minute, from, w, minute, to)
		}
	}
	for _, p := range r.Parts {
		branches = append(branches, with+r.aggregateWith(p, raw(w), raw(full)))
	}
	return "(" + strings.Join(branches, " UNION ALL ") + ")"
}

// ceil is the first multiple of unit seconds at or after t (a DateTime expression); floor the
// last at or before it.
func ceil(t string, unit int) string {
	return fmt.Sprintf("toDateTime(intDiv(toUInt32(%s) + %d, %d) * %d)", t, unit-1, unit, unit)
}

func floor(t string, unit int) string {
	return fmt.Sprintf("toDateTime(intDiv(toUInt32(%s), %d) * %d)", t, unit, unit)
}

// Beginning and End are the bounds of AllTime: the first second DateTime holds, and one far
// enough ahead (2096) to be after any row, yet inside the range every release handles.
const (
	Beginning = "toDateTime(0)"
	End       = "toDateTime(4000000000)"
)

// AllTime is the rollup's rows of every minute (Between Beginning and End, whole days from the
// day table and whole hours from the hour table): what a panel of "now", not of a range, reads,
// e.g. the newest event time landed per sink group.
func (r Rollup) AllTime() string { return r.Between("1", "1", Beginning, End) }

// DLQFirstSQL adds every entry of dlq_entries to dlq_first (FINAL keeps each origin's first):
// the entries mirrored before dlq_first existed. Running it again changes nothing.
func DLQFirstSQL() string {
	return "INSERT INTO " + DLQFirst + " (origin_time, origin_topic, origin_partition, origin_offset, stage, orphan, dlq_topic, dlq_partition, dlq_offset, version)" +
		" SELECT " + DLQFirstTime + ", origin_topic, origin_partition, origin_offset, toString(stage), " + DLQOrphan + ", dlq_topic, dlq_partition, dlq_offset," +
		" toUInt64(18446744073709551615) - (bitShiftLeft(toUInt64(dlq_partition), 40) + toUInt64(dlq_offset)) FROM " + DLQEntries
}
