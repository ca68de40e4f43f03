package rollup

import (
	"context"
	"fmt"
	"time"
)

// Backfill rolls up every minute of source (one of Sources) from from to to, by Recompute, one
// UTC day at a time, oldest first: the rollups of the rows a table held before the rollup loop
// ran. from is taken down to its minute and to up to its minute; when it returns, source's
// watermark is at least the last of those minutes. For dlq_entries it first adds every entry
// to dlq_first (DLQFirstSQL), which the DLQ rollup reads. Running it again changes nothing.
// Like Recompute, it must not run on the same minutes as the rollup loop at the same time.
//
// Each day reads that day of the source through FINAL once per rollup that reads it.
func Backfill(ctx context.Context, conn Conn, source string, from, to time.Time) error {
	if len(ReadBy(source)) == 0 {
		return fmt.Errorf("rollup: no rollup reads %q", source)
	}
	from = from.UTC().Truncate(time.Minute)
	if t := to.UTC().Truncate(time.Minute); t.Before(to) {
		to = t.Add(time.Minute)
	} else {
		to = t
	}
	if !from.Before(to) {
		return nil
	}
	if source == DLQEntries {
		if err := conn.Exec(ctx, DLQFirstSQL()); err != nil {
			return fmt.Errorf("rollup: backfill %s: first entries: %w", DLQFirst, err)
		}
	}
	for day := from; day.Before(to); {
		end := day.Truncate(24 * time.Hour).Add(24 * time.Hour)
		if end.After(to) {
			end = to
		}
		if err := Recompute(ctx, conn, source, []Span{{From: day, To: end}}, time.Now()); err != nil {
			return fmt.Errorf("rollup: backfill %s, %s: %w", source, day.Format(time.DateOnly), err)
		}
		day = end
	}
	return nil
}
