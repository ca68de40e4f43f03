package clickhouse_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/backflowhq/backflow/test/pipelinetest"
	"github.com/backflowhq/backflow/test/testenv"
)

// TestBatchInsertSelect inserts 1000 rows over 400 request ids into a ReplacingMergeTree (in a
// database of its own) with one PrepareBatch (columns named, as 18.16 requires) and reads them
// back raw and through FINAL.
func TestBatchInsertSelect(t *testing.T) {
	testenv.Integration(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, conn := pipelinetest.Database(t, ctx, pipelinetest.Plain().ClickHouse, testenv.ID("it_"))

	const table = "smoke"
	ddl := `CREATE TABLE ` + table + ` (
		request_id String, ts DateTime, score Float32, tokens UInt64, labels Array(String), ver UInt64
	) ENGINE = ReplacingMergeTree(ver) PARTITION BY toYYYYMM(ts) ORDER BY request_id`
	if err := conn.Exec(ctx, ddl); err != nil {
		t.Fatalf("create table: %v", err)
	}

	batch, err := conn.PrepareBatch(ctx, "INSERT INTO "+table+" (request_id, ts, score, tokens, labels, ver) VALUES")
	if err != nil {
		t.Fatalf("prepare batch: %v", err)
	}
	ts := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	const rows, ids = 1000, 400
	var wantTokens uint64
	for i := 0; i < rows; i++ {
		tokens := uint64(i)
		if err := batch.Append(fmt.Sprintf("req-%03d", i%ids), ts, float32(i)/rows, tokens, []string{"a", fmt.Sprint(i % 3)}, uint64(i)); err != nil {
			t.Fatalf("append row %d: %v", i, err)
		}
		if i >= rows-ids { // the highest version of each id survives FINAL
			wantTokens += tokens
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatalf("send batch: %v", err)
	}

	var raw, final, distinct, sumTokens uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM "+table).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, "SELECT count(), uniqExact(request_id), sum(tokens) FROM "+table+" FINAL").Scan(&final, &distinct, &sumTokens); err != nil {
		t.Fatal(err)
	}
	if raw != rows || final != ids || distinct != ids || sumTokens != wantTokens {
		t.Fatalf("raw=%d final=%d distinct=%d sum(tokens)=%d, want %d %d %d %d", raw, final, distinct, sumTokens, rows, ids, ids, wantTokens)
	}
	var labels []string
	if err := conn.QueryRow(ctx, "SELECT labels FROM "+table+" FINAL WHERE request_id = ?", "req-007").Scan(&labels); err != nil {
		t.Fatal(err)
	}
	if len(labels) != 2 || labels[0] != "a" || labels[1] != fmt.Sprint(807%3) {
		t.Fatalf("labels of req-007 = %v, want [a %d]", labels, 807%3)
	}
}
