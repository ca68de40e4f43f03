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

// Recompute rolls up again the minutes in spans of source (one of Sources) in every rollup
// that reads it, then the hours those minutes fall in, and moves source's watermark up to the
// newest of the minutes. It reads the source through FINAL, so the rows it writes are what the
// deduplicated views hold now, however often those minutes were written, replayed or
// redelivered; running it again changes nothing.
//
// Two Recomputes of the same minutes must not run at once: the one that read first could
// write last. The sink's rollup loop gives each hour to one owner (docs/dashboards.md).
// now stamps the versions: each write's version is above both now (in milliseconds) and every
// version its rows had, so a later Recompute wins even if clocks disagree.
func Recompute(ctx context.Context, conn Conn, source string, spans []Span, now time.Time) error {
	if len(spans) == 0 {
		return nil
	}
	rollups := ReadBy(source)
	if len(rollups) == 0 {
		return fmt.Errorf("rollup: no rollup reads %q", source)
	}
	hrs := hours(spans)
	for _, r := range rollups {
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
		v, err = nextVersion(ctx, conn, r.HourTable(), "hour", hrs, now)
		if err != nil {
			return err
		}
		if err := conn.Exec(ctx, r.HourSQL(hrs, v)); err != nil {
			return fmt.Errorf("rollup %s: hours: %w", r.Name, err)
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
