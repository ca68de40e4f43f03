package rollup_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/backflowhq/backflow/internal/rollup"
	"github.com/backflowhq/backflow/test/testenv"
)

// TestDLQLookupReadsItsRange: the DLQ rollup's lookup of each entry's first (dlq_first) reads the
// origins of the range, not the table. dlq_first holds 300,000 origins dead-lettered weeks ago
// (origin offsets from 1,000 up, partitions 0-2), and the last hour 200 recent ones, three of
// them from origin partition 3, whose offsets run low (5-7), and an entry without an origin. The
// dead letters of the last hour, read as a panel reads them with nothing rolled up yet (raw rows
// through the lookup), are the 204 the view counts, and the query reads, by system.query_log's
// read_rows, under 100,000 rows: a lookup bounded by the lowest origin offset of the range read
// every origin from offset 5 on, the whole table.
func TestDLQLookupReadsItsRange(t *testing.T) {
	conn := migrated(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	now := time.Now().UTC().Truncate(time.Minute)
	old := now.Add(-21 * 24 * time.Hour)
	const oldOrigins = 300000
	exec(t, conn,
		// Weeks ago: an origin a second, dead-lettered a second later.
		fmt.Sprintf(`INSERT INTO dlq_entries (dlq_topic, dlq_partition, dlq_offset, origin_topic, origin_partition, origin_offset, origin_time, stage, class, message, error_time, record_key, value_bytes, version)
SELECT 'dlq', 0, toInt64(number), 'inf', toInt32(number %% 3), toInt64(1000 + intDiv(number, 3)), toDateTime(%d) + number, 'ingest', 'bad_magic', 'm', toDateTime(%d) + number + 1, '', 10, toUInt64(number)
FROM numbers(%d)`, old.Unix(), old.Unix(), oldOrigins),
		// The last hour: 200 origins of partitions 0-2, 3 of partition 3 (low offsets), one orphan.
		fmt.Sprintf(`INSERT INTO dlq_entries (dlq_topic, dlq_partition, dlq_offset, origin_topic, origin_partition, origin_offset, origin_time, stage, class, message, error_time, record_key, value_bytes, version)
SELECT 'dlq', 1, toInt64(number), if(number = 203, '', 'inf'), toInt32(if(number >= 200, 3, number %% 3)), if(number >= 200, toInt64(number) - 195, toInt64(number) + 500000),
    toDateTime(%d) + number * 10, 'ingest', 'truncated', 'm', toDateTime(%d) + number * 10 + 2, '', 10, toUInt64(number)
FROM numbers(204)`, now.Add(-50*time.Minute).Unix(), now.Add(-50*time.Minute).Unix()),
		rollup.DLQFirstSQL())

	from, to := now.Add(-time.Hour), now
	tag := testenv.ID("dlqlookup")
	q := fmt.Sprintf("SELECT toUInt64(sum(entries)) FROM %s WHERE '%s' != ''", rollup.DLQ.Between("1", "1", dt(from), dt(to)), tag)
	var got, want uint64
	if err := conn.QueryRow(ch.Context(ctx, ch.WithSettings(ch.Settings{"log_queries": 1})), q).Scan(&got); err != nil {
		t.Fatalf("%v\n%s", err, q)
	}
	if err := conn.QueryRow(ctx, fmt.Sprintf("SELECT count() FROM v_dlq_entries WHERE toStartOfMinute(error_time) >= %s AND toStartOfMinute(error_time) <= %s", dt(from), dt(to))).Scan(&want); err != nil {
		t.Fatal(err)
	}
	if got != 204 || want != 204 {
		t.Fatalf("the last hour's dead letters: %d through the lookup, %d in the view, want 204", got, want)
	}
	// The query log is written every few seconds: wait for the query's row.
	var read uint64
	for {
		err := conn.QueryRow(ctx, "SELECT read_rows FROM system.query_log WHERE type = 2 AND query LIKE ? AND query NOT LIKE '%query_log%' ORDER BY event_time DESC LIMIT 1",
			"%"+tag+"%").Scan(&read)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the query never reached system.query_log: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("the last hour's 204 dead letters read %d rows, with %d old origins in dlq_first", read, oldOrigins)
	if read >= 100000 {
		t.Fatalf("the last hour's dead letters read %d rows: the lookup read old origins (%d in dlq_first)", read, oldOrigins)
	}
}
