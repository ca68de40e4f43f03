package chschema

import (
	"context"
	"errors"
	"fmt"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// TableReplayLog is the audit table of executed replays (migration 0007).
const TableReplayLog = "replay_log"

// ErrMissingTable is what CheckTable reports when a table backflow needs is not there: no retry
// and no DLQ can fix it (the sink's IsFatal says so), running backflow migrate does.
var ErrMissingTable = errors.New("clickhouse: fatal")

// CheckTable reports an error unless table exists in the connection's database (run backflow
// migrate); a missing table wraps ErrMissingTable.
func CheckTable(ctx context.Context, conn driver.Conn, table string) error {
	ok, err := TableExists(ctx, conn, table)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: table %s is missing (run backflow migrate)", ErrMissingTable, table)
	}
	return nil
}

// TableExists reports whether table exists in the connection's database.
func TableExists(ctx context.Context, conn driver.Conn, table string) (bool, error) {
	var n uint64
	if err := conn.QueryRow(ctx, `SELECT count() FROM system.tables WHERE database = currentDatabase() AND name = ?`, table).Scan(&n); err != nil {
		return false, fmt.Errorf("clickhouse: look for %s: %w", table, err)
	}
	return n > 0, nil
}
