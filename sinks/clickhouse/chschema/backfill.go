package chschema

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/backflowhq/backflow/internal/rollup"
)

// A migration builds the rollups of the rows already there with a statement of its own, not
// sent to ClickHouse:
//
//	BACKFILL ROLLUPS
//
// For each table a rollup reads, it rolls up every day from the table's oldest row to its
// newest (rollup.Recompute of each UTC day; dlq_entries first fills dlq_first), recording each day done in backflow_rebuilds (kind "backfill"), so
// that a run stopped part way goes on from the first day not recorded. It must not run beside
// the rollup loop (see rollup.Backfill): like a REBUILD, it is for `backflow migrate` with the
// sinks stopped, or for a stage's start-up, before its loops start.

// and the day level of the rollups built before it existed (rollup.BuildDays), from their hours:
//
//	BACKFILL ROLLUP DAYS
//
// and, after dlq_first's key changed, dlq_first from dlq_entries (rollup.DLQFirstSQL) and the
// DLQ rollup of every day of dlq_entries, as BACKFILL ROLLUPS does them:
//
//	BACKFILL DLQ FIRST
var backfillStmt = regexp.MustCompile(`(?is)^BACKFILL\s+(ROLLUPS|ROLLUP\s+DAYS|DLQ\s+FIRST)\s*$`)

// isBackfill reports whether stmt is one of the BACKFILL statements.
func isBackfill(stmt string) bool { return backfillStmt.MatchString(strings.TrimSpace(stmt)) }

// runBackfill runs a BACKFILL statement.
func (t *target) runBackfill(ctx context.Context, stmt string) error {
	what := strings.ToUpper(strings.Join(strings.Fields(backfillStmt.FindStringSubmatch(strings.TrimSpace(stmt))[1]), " "))
	switch what {
	case "ROLLUPS":
		return t.backfill(ctx)
	case "DLQ FIRST":
		// dlq_first from dlq_entries, then the DLQ rollup of every day, each recorded when
		// done (backfillSource): the days 0017 left to it, or rolled up again.
		// The fill runs on every run of the statement: a run stopped part way is run again
		// after the migration's DROP and CREATE, which emptied the table.
		rt := t.rebuild()
		if err := rt.ensureLog(ctx); err != nil {
			return err
		}
		if err := t.fillDLQFirst(ctx); err != nil {
			return fmt.Errorf("backfill %s: %w", rollup.DLQFirst, err)
		}
		if err := t.backfillSource(ctx, rt, rollup.DLQEntries); err != nil {
			return fmt.Errorf("backfill %s and the rollups of %s: %w", rollup.DLQFirst, rollup.DLQEntries, err)
		}
		return nil
	}
	// ROLLUP DAYS: the day rows of every rollup from its hour rows.
	if err := rollup.BuildDays(ctx, syncingConn{t.seed, t.rebuild()}, t.progress); err != nil {
		return fmt.Errorf("backfill rollup days: %w", err)
	}
	return nil
}

func (t *target) backfill(ctx context.Context) error {
	rt := t.rebuild()
	if err := rt.ensureLog(ctx); err != nil {
		return err
	}
	for _, source := range rollup.Sources() {
		if source == rollup.DLQEntries {
			// Before 0019, dlq_first has no origin_time, which the DLQ rollup's lookup reads:
			// 0019 fills it again and rolls up the dead letters (BACKFILL DLQ FIRST).
			if ok, err := t.hasColumn(ctx, rollup.DLQFirst, "origin_time"); err != nil || !ok {
				if err != nil {
					return err
				}
				continue
			}
		}
		if err := t.backfillSource(ctx, rt, source); err != nil {
			return fmt.Errorf("backfill rollups of %s: %w", source, err)
		}
	}
	return nil
}

func (t *target) backfillSource(ctx context.Context, rt rebuildTarget, source string) error {
	col := rollup.TimeColumn(source)
	var n uint64
	var oldest, newest time.Time
	if err := t.seed.QueryRow(ctx, fmt.Sprintf("SELECT count(), min(%s), max(%s) FROM %s", col, col, rt.q(source))).Scan(&n, &oldest, &newest); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	done := map[uint32]bool{}
	rows, err := t.seed.Query(ctx, "SELECT chunk FROM "+rt.q(RebuildsTable)+" WHERE version = ? AND table_name = ? AND kind = 'backfill'", t.version, source)
	if err != nil {
		return err
	}
	for rows.Next() {
		var d uint32
		if err := rows.Scan(&d); err != nil {
			rows.Close()
			return err
		}
		done[d] = true
	}
	rows.Close()
	if source == rollup.DLQEntries && !done[0] {
		if err := t.fillDLQFirst(ctx); err != nil {
			return err
		}
	}
	// Before 0018 the day tables are not there yet: 0018 builds the days from the hours.
	recompute := rollup.Recompute
	if ok, err := TableExists(ctx, t.seed, rollup.Model.DayTable()); err != nil {
		return err
	} else if !ok {
		recompute = rollup.RecomputeMinutesAndHours
	}
	first, last := oldest.UTC().Truncate(24*time.Hour), newest.UTC().Truncate(24*time.Hour)
	total := int(last.Sub(first)/(24*time.Hour)) + 1
	for day := first; !day.After(last); day = day.Add(24 * time.Hour) {
		d := uint32(day.Unix() / 86400) // from 1 on: 0 stands for dlq_first's backfill
		if done[d] {
			continue
		}
		if err := recompute(ctx, syncingConn{t.seed, rt}, source, []rollup.Span{{From: day, To: day.Add(24 * time.Hour)}}, time.Now()); err != nil {
			return err
		}
		if err := InsertRows(ctx, t.seed, RebuildsTable, []rebuildRow{{Version: t.version, Table: source, Kind: "backfill", Chunk: d,
			Where: day.Format(time.DateOnly), RecordAt: time.Now()}}); err != nil {
			return err
		}
		done[d] = true
		t.progress(fmt.Sprintf("%s: rollups of %s built (%d of %d days)", source, day.Format(time.DateOnly), len(done), total))
	}
	return nil
}

// syncingConn is the engine's connection as a rollup.Syncer: in cluster mode a backfill reads
// the minute rows it has just written, so each read waits for every replica (rebuild.go).
type syncingConn struct {
	driver.Conn
	rt rebuildTarget
}

func (c syncingConn) SyncReplicas(ctx context.Context, table string) error {
	return c.rt.syncReplicas(ctx, table)
}

// hasColumn reports whether table (in the connection's database) has column.
func (t *target) hasColumn(ctx context.Context, table, column string) (bool, error) {
	var n uint64
	if err := t.seed.QueryRow(ctx, "SELECT count() FROM system.columns WHERE database = currentDatabase() AND table = ? AND name = ?", table, column).Scan(&n); err != nil {
		return false, fmt.Errorf("look up column %s.%s: %w", table, column, err)
	}
	return n > 0, nil
}

// fillDLQFirst adds every entry of dlq_entries to dlq_first (FINAL keeps each origin's first)
// and records it as chunk 0 of dlq_entries' backfill, which backfillSource then skips.
func (t *target) fillDLQFirst(ctx context.Context) error {
	if err := t.seed.Exec(ctx, rollup.DLQFirstSQL()); err != nil {
		return err
	}
	return InsertRows(ctx, t.seed, RebuildsTable, []rebuildRow{{Version: t.version, Table: rollup.DLQEntries, Kind: "backfill", Where: rollup.DLQFirst, RecordAt: time.Now()}})
}
