package clickhouse

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// TableReplayLog is the audit table of executed replays (migration 0007).
const TableReplayLog = "replay_log"

// ReplayLogRow is one partition of one executed replay. Field tags name the columns.
type ReplayLogRow struct {
	ReplayID   string    `ch:"replay_id"`
	ReplayedAt time.Time `ch:"replayed_at"`
	Who        string    `ch:"who"`
	Group      string    `ch:"consumer_group"`
	Spec       string    `ch:"spec"`
	Reason     string    `ch:"reason"`
	Actions    []string  `ch:"actions"`
	EpochFrom  int32     `ch:"epoch_from"` // -1: no epoch change
	EpochTo    int32     `ch:"epoch_to"`
	Topic      string    `ch:"topic"`
	Partition  int32     `ch:"partition"`
	FromOffset int64     `ch:"from_offset"` // -1: no committed offset before
	ToOffset   int64     `ch:"to_offset"`
}

// CheckReplayLog reports an error unless the replay_log table exists (run backflow migrate).
func CheckReplayLog(ctx context.Context, conn driver.Conn) error {
	var n uint64
	if err := conn.QueryRow(ctx, `SELECT count() FROM system.tables WHERE database = currentDatabase() AND name = ?`, TableReplayLog).Scan(&n); err != nil {
		return fmt.Errorf("clickhouse: look for %s: %w", TableReplayLog, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: table %s is missing (run backflow migrate)", ErrClickHouseFatal, TableReplayLog)
	}
	return nil
}

// InsertReplayLog writes the rows of one replay in one batch.
func InsertReplayLog(ctx context.Context, conn driver.Conn, rows []ReplayLogRow) error {
	if len(rows) == 0 {
		return nil
	}
	b, err := conn.PrepareBatch(ctx, insertSQL(TableReplayLog, ReplayLogRow{}))
	if err != nil {
		return fmt.Errorf("clickhouse: insert %s: %w", TableReplayLog, err)
	}
	for i := range rows {
		if rows[i].Actions == nil {
			rows[i].Actions = []string{}
		}
		if err := b.AppendStruct(&rows[i]); err != nil {
			b.Abort()
			return fmt.Errorf("clickhouse: insert %s: row %d: %w", TableReplayLog, i, err)
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("clickhouse: insert %s: %w", TableReplayLog, err)
	}
	return nil
}
