package rollup_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/backflowhq/backflow/internal/rollup"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
	"github.com/backflowhq/backflow/test/pipelinetest"
	"github.com/backflowhq/backflow/test/rollupcheck"
	"github.com/backflowhq/backflow/test/testenv"
)

// base is the first minute of the synthetic data: 3 hours and 20 minutes of it.
var base = time.Date(2026, 11, 2, 22, 40, 0, 0, time.UTC)

const dataMinutes = 200

func migrated(t *testing.T) driver.Conn {
	t.Helper()
	testenv.Integration(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, conn := pipelinetest.Database(t, ctx, pipelinetest.Plain().ClickHouse, testenv.ID("it_rollup_"))
	if _, err := chschema.Migrate(ctx, conn); err != nil {
		t.Fatal(err)
	}
	return conn
}

func exec(t *testing.T, conn driver.Conn, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if err := conn.Exec(context.Background(), s); err != nil {
			t.Fatalf("%v\n%s", err, s)
		}
	}
}

// fill writes n synthetic requests per table starting at base (one every 2 s for n = 6000),
// at version ver, with models, statuses, tenants and verdicts picked by salt: a later fill with
// another salt and a higher version rewrites the same keys with other values, as a replay in a
// new epoch does. Only the rows whose number satisfies keep are written. A fifth of the DLQ's
// origins are dead-lettered again a minute later (a replay re-dead-letters its poison).
func fill(t *testing.T, conn driver.Conn, n int, ver uint64, salt int, keep string) {
	t.Helper()
	fillSpan(t, conn, base, dataMinutes, n, ver, salt, keep)
}

// fillSpan is fill over mins minutes from from (n at least one a minute).
func fillSpan(t *testing.T, conn driver.Conn, from time.Time, mins, n int, ver uint64, salt int, keep string) {
	t.Helper()
	at := func(num string, per int) string {
		return fmt.Sprintf("(toDateTime(%d) + intDiv(%s * 60, %d))", from.Unix(), num, per)
	}
	per := n / mins
	lper := max(per/10, 1) // ledger rows a minute
	exec(t, conn,
		fmt.Sprintf(`INSERT INTO inference_results (source_topic, request_id, model, event_time, latency_ms, prompt_tokens, completion_tokens, status, verdict, moderation_status, hit_count, version)
SELECT 'inf', toString(number), concat('m', toString((number + %d) %% 5)), %s, toUInt32((number * 37) %% 2000), toUInt32(number %% 100), toUInt32(number %% 77),
    arrayElement(['OK', 'OK', 'OK', 'ERROR', 'UNKNOWN', 'TIMEOUT'], ((number + %d) %% 6) + 1),
    arrayElement(['ALLOW', 'REVIEW', 'BLOCK', ''], ((number + %d) %% 4) + 1), if(number %% 9 = 0, 'SKIPPED', 'OK'), toUInt16(number %% 3), %d
FROM numbers(%d) WHERE %s`, salt, at("number", per), salt, salt, ver, n, keep),
		fmt.Sprintf(`INSERT INTO gateway_logs (source_topic, request_id, phase, event_time, tenant_id, model, status_code, prompt_tokens, completion_tokens, verdict, moderation_status, hit_count, version)
SELECT 'gw', toString(intDiv(number, 2)), if(number %% 2 = 0, 'REQUEST', 'RESPONSE'), %s, concat('t', toString((number + %d) %% 7)), concat('m', toString(number %% 5)),
    if((number + %d) %% 10 = 0, 503, 200), toUInt32(number %% 100), toUInt32(number %% 55),
    arrayElement(['ALLOW', 'REVIEW', 'BLOCK'], ((number + %d) %% 3) + 1), 'OK', toUInt16((number + %d) %% 2), %d
FROM numbers(%d) WHERE %s`, at("number", per), salt, salt, salt, salt, ver, n, keep),
		fmt.Sprintf(`INSERT INTO moderation_hits (source_topic, request_id, phase, start, end, word, category, event_time, version)
SELECT 'inf', toString(intDiv(number, 2)), arrayElement(['', 'REQUEST', 'RESPONSE'], (number %% 3) + 1), toUInt32(number %% 2), 5, 'w',
    arrayElement(['abuse', 'pii', 'fraud'], ((number + %d) %% 3) + 1), %s, %d
FROM numbers(%d) WHERE %s`, salt, at("intDiv(number, 2) * 2", per), ver, n, keep),
		fmt.Sprintf(`INSERT INTO dlq_entries (dlq_topic, dlq_partition, dlq_offset, origin_topic, origin_partition, origin_offset, origin_time, stage, class, message, error_time, record_key, value_bytes, version)
SELECT 'dlq', 0, toInt64(number + if(r, 1000, 0)), if(o %% 50 = 7 AND NOT r, '', 'inf'), 0, toInt64(o), %s,
    arrayElement(['ingest', 'sink-clickhouse'], (o %% 2) + 1), arrayElement(['bad_magic', 'truncated', 'unknown_schema'], (o %% 3) + 1), 'm',
    %s + if(r, 60, 0), '', toUInt32(o %% 300), toUInt64(number)
FROM (SELECT number, number >= %d AS r, toUInt64(if(number >= %d, toUInt64(number - %d) * 5, number)) AS o FROM numbers(%d)) WHERE %s`,
			at("o", per), at("o", per), n, n, n, n+n/5, keep),
		rollup.DLQFirstSQL(),
		fmt.Sprintf(`INSERT INTO sink_ledger (batch_id, group, topic, partition, min_offset, max_offset, rows, hit_rows, epoch, flushed_at, max_event_time)
SELECT concat('b', toString(intDiv(number, 3))), arrayElement(['sink-a', 'sink-b'], (intDiv(number, 3) %% 2) + 1), 'enriched', toInt32(number %% 3),
    toInt64(number * 10), toInt64(number * 10 + 9), 10, toUInt32(number %% 4), 0, %s, %s
FROM numbers(%d) WHERE %s`, at("intDiv(number, 3) * 3", lper), at("number", lper), mins*lper, keep))
}

// check compares every rollup with its view over windows of the synthetic data.
func check(t *testing.T, conn driver.Conn, stage string) {
	t.Helper()
	ws := rollupcheck.Windows(base, base.Add(dataMinutes*time.Minute))
	if n := rollupcheck.Equal(t, conn, stage, ws); n < len(rollup.All)*len(ws) {
		t.Errorf("%s: %d of %d comparisons had data", stage, n, len(rollup.All)*len(ws))
	}
}

func recomputeAll(t *testing.T, conn driver.Conn, spans []rollup.Span) {
	t.Helper()
	for _, src := range rollup.Sources() {
		if err := rollup.Recompute(context.Background(), conn, src, spans, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
}

func minutes(from, to int) []rollup.Span {
	return []rollup.Span{{From: base.Add(time.Duration(from) * time.Minute), To: base.Add(time.Duration(to) * time.Minute)}}
}

// TestRollupsEqualTheViews: a panel reading the rollups (hours, minutes and the raw rows past
// the watermark) gives the per-minute views' answer, for ranges with and without whole hours,
// edges inside a minute and buckets of a minute to a week; and it still does after keys are
// rewritten with other values (a replay), after late rows arrive in minutes already rolled
// up, and after a recompute runs twice.
func TestRollupsEqualTheViews(t *testing.T) {
	conn := migrated(t)
	const n = 6000                             // 30 per minute
	fill(t, conn, n, 1, 0, "number % 10 != 3") // the rows ending in 3 arrive late, below
	// Everything but the last 40 minutes rolled up: those are read from the tables.
	recomputeAll(t, conn, minutes(0, dataMinutes-40))
	check(t, conn, "first load")

	// A replay in a new epoch rewrites a tenth of the keys with other models, statuses and
	// tenants: combinations appear and vanish. Only the minutes it touched are recomputed.
	fill(t, conn, n, 2, 3, "number % 10 = 1")
	recomputeAll(t, conn, minutes(0, dataMinutes))
	check(t, conn, "replay")

	// Late rows, hours after their minutes were rolled up.
	fill(t, conn, n, 1, 0, "number % 10 = 3")
	recomputeAll(t, conn, minutes(0, 90))
	recomputeAll(t, conn, minutes(90, dataMinutes))
	check(t, conn, "late rows")

	// Again: nothing changes.
	recomputeAll(t, conn, minutes(0, dataMinutes))
	check(t, conn, "recomputed twice")
}
