package chschema

// The rebuild's log, RebuildsTable: the plan and progress of each rebuild (one row per planned
// chunk, one per copied chunk), what a run resumes from, and where a rebuild stands as
// RebuildStatus reports it.

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// RebuildsTable records each rebuild's plan and progress, one row per chunk.
const RebuildsTable = "backflow_rebuilds"

// RebuildState is where a rebuild stands.
type RebuildState struct {
	Table string
	// Done: the table has the new key (rebuilt, or created with it).
	Done bool
	// Missing: the table does not exist yet (migrate --dry-run on a new database).
	Missing bool
	// Rows is the table's row count; Chunks and Copied the planned chunks and those copied,
	// CopiedRows their rows. Zero before a plan is recorded.
	Rows, CopiedRows uint64
	Chunks, Copied   int
}

func (s RebuildState) String() string {
	switch {
	case s.Missing:
		return fmt.Sprintf("%s: not created yet, nothing to copy", s.Table)
	case s.Done:
		return fmt.Sprintf("%s: rebuilt", s.Table)
	case s.Chunks == 0:
		return fmt.Sprintf("%s: %d rows to rebuild, not started", s.Table, s.Rows)
	default:
		return fmt.Sprintf("%s: %d of %d chunks copied (%d of %d rows)", s.Table, s.Copied, s.Chunks, s.CopiedRows, s.Rows)
	}
}

type rebuildRow struct {
	Version  uint32    `ch:"version"`
	Table    string    `ch:"table_name"`
	Kind     string    `ch:"kind"` // "plan" (one row per chunk), "copied" (one per copied chunk), "swapped"
	Chunk    uint32    `ch:"chunk"`
	Where    string    `ch:"predicate"`
	Rows     uint64    `ch:"rows"`
	Total    uint64    `ch:"source_rows"`
	RecordAt time.Time `ch:"recorded_at"`
}

// state reads the rebuild's plan and progress.
func (t rebuildTarget) state(ctx context.Context, rb Rebuild) (plan []chunk, copied map[uint32]bool, total uint64, err error) {
	rows, err := t.conn.Query(ctx, "SELECT kind, chunk, predicate, rows, source_rows FROM "+t.q(RebuildsTable)+
		" WHERE version = ? AND table_name = ? ORDER BY chunk", rb.Version, rb.Table)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("read %s: %w", RebuildsTable, err)
	}
	defer rows.Close()
	copied = map[uint32]bool{}
	seen := map[uint32]bool{}
	for rows.Next() {
		var kind, where string
		var n uint32
		var r, tot uint64
		if err := rows.Scan(&kind, &n, &where, &r, &tot); err != nil {
			return nil, nil, 0, err
		}
		switch kind {
		case "plan":
			if !seen[n] { // a plan recorded twice (two runs at once) counts once
				seen[n] = true
				plan = append(plan, chunk{N: n, Where: where, Rows: r})
				total = tot
			}
		case "copied":
			copied[n] = true
		}
	}
	return plan, copied, total, rows.Err()
}

// RebuildStatus says where rb stands on conn (one server) without changing anything.
func RebuildStatus(ctx context.Context, conn driver.Conn, rb Rebuild) (RebuildState, error) {
	return rebuildTarget{conn: conn}.status(ctx, rb)
}

// RebuildStatusOn says where rb stands on the database c names, through conn (c.Addr's
// server), in cluster mode too (migrate --dry-run).
func RebuildStatusOn(ctx context.Context, c Conn, conn driver.Conn, rb Rebuild) (RebuildState, error) {
	return (&target{c: c, seed: conn}).rebuild().status(ctx, rb)
}

func (t rebuildTarget) status(ctx context.Context, rb Rebuild) (RebuildState, error) {
	st := RebuildState{Table: rb.Table}
	ti, err := t.info(ctx, t.local(rb.Table))
	if err != nil {
		return st, err
	}
	if !ti.exists {
		// An earlier pending migration creates it (a new database): nothing to copy.
		st.Missing = true
		return st, nil
	}
	if sameKey(ti.sortingKey, rb.OrderBy) {
		st.Done = true
		return st, nil
	}
	if ti, err = t.info(ctx, rb.Table); err != nil {
		return st, err
	}
	st.Rows = ti.rows
	if err := t.ensureLog(ctx); err != nil {
		return st, err
	}
	plan, copied, _, err := t.state(ctx, rb)
	if err != nil {
		return st, err
	}
	st.Chunks = len(plan)
	for _, c := range plan {
		if copied[c.N] {
			st.Copied++
			st.CopiedRows += c.Rows
		}
	}
	return st, nil
}

func (t rebuildTarget) ensureLog(ctx context.Context) error {
	stmt := "CREATE TABLE IF NOT EXISTS " + t.q(RebuildsTable) + ` (
    version     UInt32,
    table_name  String,
    kind        String,
    chunk       UInt32,
    predicate   String,
    rows        UInt64,
    source_rows UInt64,
    recorded_at DateTime
) ENGINE = MergeTree
ORDER BY (version, table_name, kind, chunk)`
	if err := t.conn.Exec(ctx, stmt); err != nil {
		return fmt.Errorf("create %s: %w", RebuildsTable, err)
	}
	return nil
}

func (t rebuildTarget) record(ctx context.Context, rb Rebuild, plan []chunk, total uint64) error {
	rows := make([]rebuildRow, len(plan))
	now := time.Now()
	for i, c := range plan {
		rows[i] = rebuildRow{Version: rb.Version, Table: rb.Table, Kind: "plan", Chunk: c.N, Where: c.Where, Rows: c.Rows, Total: total, RecordAt: now}
	}
	if err := InsertRows(ctx, t.conn, RebuildsTable, rows); err != nil {
		return fmt.Errorf("rebuild %s: record the plan: %w", rb.Table, err)
	}
	return nil
}

// forget deletes rb's plan and progress from the log and waits until the deletion shows: a
// run that read the old plan before it did would skip chunks of a copy that no longer has them.
func (t rebuildTarget) forget(ctx context.Context, rb Rebuild) error {
	where := "version = " + strconv.Itoa(int(rb.Version)) + " AND table_name = " + sqlString(rb.Table)
	if err := t.deleteWhere(ctx, t.q(RebuildsTable), RebuildsTable, where); err != nil {
		return fmt.Errorf("forget the rebuild's plan: %w", err)
	}
	return nil
}
