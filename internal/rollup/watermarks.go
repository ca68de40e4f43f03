package rollup

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// ReadWatermarks reads the watermark of each source table: the newest minute rolled up (by
// Recompute, from the rollup loop or a backfill), by table name. A table no Recompute has
// reached is missing.
func ReadWatermarks(ctx context.Context, conn driver.Conn) (map[string]time.Time, error) {
	rows, err := conn.Query(ctx, "SELECT source, max(minute) FROM "+Watermarks+" GROUP BY source")
	if err != nil {
		return nil, fmt.Errorf("rollup: read %s: %w", Watermarks, err)
	}
	defer rows.Close()
	out := map[string]time.Time{}
	for rows.Next() {
		var src string
		var m time.Time
		if err := rows.Scan(&src, &m); err != nil {
			return nil, fmt.Errorf("rollup: read %s: %w", Watermarks, err)
		}
		out[src] = m.UTC()
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("rollup: read %s: %w", Watermarks, err)
	}
	return out, nil
}
