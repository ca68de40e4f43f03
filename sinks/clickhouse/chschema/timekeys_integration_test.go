package chschema_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
	"github.com/backflowhq/backflow/test/testenv"
)

// TestLastHourReadsItsOwnRows: on the time-keyed layout (0016) a query over the last hour of
// inference_results, through FINAL as the views read it, reads that hour's rows and at most a
// granule or so on either side, not the day's: at most twice the hour's rows, by
// system.query_log's read_rows. Six hours of 20,000 requests an hour, each written twice (a
// replay), so FINAL has something to collapse.
func TestLastHourReadsItsOwnRows(t *testing.T) {
	_, conn := testDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := chschema.Migrate(ctx, conn); err != nil {
		t.Fatal(err)
	}
	const perHour = 20000
	end := time.Now().UTC().Truncate(time.Hour)
	for ver := 1; ver <= 2; ver++ {
		if err := conn.Exec(ctx, fmt.Sprintf(`INSERT INTO inference_results (source_topic, request_id, model, event_time, version)
SELECT 'inf', toString(number), 'm', toDateTime(%d) + intDiv(number * 3600, %d), %d FROM numbers(%d)`, end.Add(-6*time.Hour).Unix(), perHour, ver, 6*perHour)); err != nil {
			t.Fatal(err)
		}
	}
	tag := testenv.ID("lasthour")
	q := fmt.Sprintf("SELECT count() FROM inference_results FINAL WHERE event_time >= toDateTime(%d) AND event_time < toDateTime(%d) AND '%s' != ''",
		end.Add(-time.Hour).Unix(), end.Unix(), tag)
	var n uint64
	if err := conn.QueryRow(ch.Context(ctx, ch.WithSettings(ch.Settings{"log_queries": 1})), q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != perHour {
		t.Fatalf("the last hour holds %d requests, want %d", n, perHour)
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
	t.Logf("the last hour (%d requests, each written twice: %d rows) read %d rows of %d", perHour, 2*perHour, read, 12*perHour)
	if read > 2*2*perHour {
		t.Fatalf("the last hour read %d rows, more than twice its %d", read, 2*perHour)
	}
}
