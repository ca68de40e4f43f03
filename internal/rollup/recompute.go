package rollup

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Conn is the part of a ClickHouse connection Recompute uses (clickhouse-go's driver.Conn).
type Conn interface {
	Exec(ctx context.Context, query string, args ...any) error
	QueryRow(ctx context.Context, query string, args ...any) driver.Row
}

// Syncer is a Conn that can wait until every replica of a table holds what was written to any
// of them (a cluster's replicated tables behind Distributed ones). Recompute syncs each table
// before it reads from it what was just written: a read through a Distributed table asks one
// replica of each shard, which may lag.
type Syncer interface {
	SyncReplicas(ctx context.Context, table string) error
}

func syncReplicas(ctx context.Context, conn Conn, tables ...string) error {
	s, ok := conn.(Syncer)
	if !ok {
		return nil
	}
	for _, t := range tables {
		if err := s.SyncReplicas(ctx, t); err != nil {
			return err
		}
	}
	return nil
}

// Recompute rolls up again the minutes in spans of source (one of Sources) in every rollup
// that reads it, then the hours those minutes fall in (from the minute rows), then the UTC days
// (from the hour rows), and moves source's watermark up to the
// newest of the minutes. It reads the source through FINAL, so the rows it writes are what the
// deduplicated views hold now, however often those minutes were written, replayed or
// redelivered; running it again changes nothing.
//
// Two Recomputes of the same minutes must not run at once: the one that read first could
// write last; nor two Recomputes of minutes of one UTC day, which both write the day. The sink's
// rollup loop gives each day to one owner (docs/dashboards.md).
// now stamps the versions: each write's version is above both now (in milliseconds) and every
// version its rows had, so a later Recompute wins even if clocks disagree.
func Recompute(ctx context.Context, conn Conn, source string, spans []Span, now time.Time) error {
	return recompute(ctx, conn, source, spans, now, true)
}

// RecomputeMinutesAndHours is Recompute without the days: for a migration that runs before the
// day tables exist (0017's backfill on a database that predates 0018, which then builds the
// days from the hours with BuildDays).
func RecomputeMinutesAndHours(ctx context.Context, conn Conn, source string, spans []Span, now time.Time) error {
	return recompute(ctx, conn, source, spans, now, false)
}

func recompute(ctx context.Context, conn Conn, source string, spans []Span, now time.Time, withDays bool) error {
	if len(spans) == 0 {
		return nil
	}
	rollups := ReadBy(source)
	if len(rollups) == 0 {
		return fmt.Errorf("rollup: no rollup reads %q", source)
	}
	hrs, dys := hours(spans), days(spans)
	reads := []string{source}
	if source == DLQEntries {
		reads = append(reads, DLQFirst)
	}
	if err := syncReplicas(ctx, conn, reads...); err != nil {
		return err
	}
	for _, r := range rollups {
		if err := syncReplicas(ctx, conn, r.MinuteTable()); err != nil {
			return err
		}
		v, err := nextVersion(ctx, conn, r.MinuteTable(), "minute", spans, now)
		if err != nil {
			return err
		}
		for _, p := range r.Parts {
			if p.Source != source {
				continue
			}
			if err := conn.Exec(ctx, r.MinuteSQL(p, spans, v)); err != nil {
				return fmt.Errorf("rollup %s: minutes of %s: %w", r.Name, source, err)
			}
		}
		if err := syncReplicas(ctx, conn, r.MinuteTable(), r.HourTable()); err != nil {
			return err
		}
		v, err = nextVersion(ctx, conn, r.HourTable(), "hour", hrs, now)
		if err != nil {
			return err
		}
		if err := conn.Exec(ctx, r.HourSQL(hrs, v)); err != nil {
			return fmt.Errorf("rollup %s: hours: %w", r.Name, err)
		}
		if !withDays {
			continue
		}
		if err := rollDays(ctx, conn, r, dys, now); err != nil {
			return err
		}
	}
	last := spans[len(spans)-1].To.Add(-time.Minute)
	if err := conn.Exec(ctx, WatermarkSQL(source, last)); err != nil {
		return fmt.Errorf("rollup: watermark of %s: %w", source, err)
	}
	return nil
}

func nextVersion(ctx context.Context, conn Conn, table, timeCol string, spans []Span, now time.Time) (uint64, error) {
	var prev uint64
	if err := conn.QueryRow(ctx, VersionSQL(table, timeCol, spans)).Scan(&prev); err != nil {
		return 0, fmt.Errorf("rollup: version of %s: %w", table, err)
	}
	return max(prev+1, uint64(now.UnixMilli())), nil
}

// rollDays writes the day rows of r for the whole UTC days in dys from its hour rows.
func rollDays(ctx context.Context, conn Conn, r Rollup, dys []Span, now time.Time) error {
	if err := syncReplicas(ctx, conn, r.HourTable(), r.DayTable()); err != nil {
		return err
	}
	v, err := nextVersion(ctx, conn, r.DayTable(), "day", dys, now)
	if err != nil {
		return err
	}
	if err := conn.Exec(ctx, r.DaySQL(dys, v)); err != nil {
		return fmt.Errorf("rollup %s: days: %w", r.Name, err)
	}
	return nil
}

// BuildDays writes the day rows of every rollup from the hour rows it already holds, 31 UTC days
// at a time: the day level of rollups built before it existed. Running it again changes
// nothing. Like Recompute, it must not run beside the rollup loop (Backfill).
func BuildDays(ctx context.Context, conn Conn, progress func(string)) error {
	for _, r := range All {
		if err := syncReplicas(ctx, conn, r.HourTable()); err != nil {
			return err
		}
		var n uint64
		var oldest, newest time.Time
		q := "SELECT count(), min(hour), max(hour) FROM " + r.HourTable()
		if err := conn.QueryRow(ctx, q).Scan(&n, &oldest, &newest); err != nil {
			return fmt.Errorf("rollup %s: hours held: %w", r.Name, err)
		}
		if n == 0 {
			continue
		}
		first, last := oldest.UTC().Truncate(24*time.Hour), newest.UTC().Truncate(24*time.Hour)
		end := last.Add(24 * time.Hour)
		for from := first; from.Before(end); from = from.Add(31 * 24 * time.Hour) {
			to := from.Add(31 * 24 * time.Hour)
			if to.After(end) {
				to = end
			}
			if err := rollDays(ctx, conn, r, []Span{{From: from, To: to}}, time.Now()); err != nil {
				return err
			}
		}
		if progress != nil {
			progress(fmt.Sprintf("%s: day rows built from %s to %s", r.DayTable(), first.Format(time.DateOnly), last.Format(time.DateOnly)))
		}
	}
	return nil
}
