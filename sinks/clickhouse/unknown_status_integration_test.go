package clickhouse_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/backflowhq/backflow/test/pipelinetest"
	"github.com/backflowhq/backflow/tools/loadgen"
)

// TestNewerStatusLandsAsUnknown: a producer writes inference results with a newer schema whose
// InferenceStatus adds CANCELLED. Through ingest and the sink on the real stack they land in
// inference_results with status 'UNKNOWN', not 'OK', none is dead-lettered, and v_model_minute
// counts them as unknown, neither as requests that succeeded nor as errors.
func TestNewerStatusLandsAsUnknown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const n, model = 7, "model-cancel"
	produce, ids := pipelinetest.NewerStatuses(n, model, "CANCELLED")
	d := pipelinetest.RunWith(t, ctx, loadgen.Config{Requests: 50, Seed: 27}, produce)

	var rows, unknown, ok, cancelled uint64
	if err := d.Conn.QueryRow(ctx, `SELECT count(), countIf(status = 'UNKNOWN'), countIf(status = 'OK'), countIf(status = 'CANCELLED')
		FROM v_inference_results WHERE has(?, request_id)`, ids).Scan(&rows, &unknown, &ok, &cancelled); err != nil {
		t.Fatal(err)
	}
	if rows != n || unknown != n || ok != 0 || cancelled != 0 {
		t.Fatalf("newer-status records: %d rows, %d UNKNOWN, %d OK, %d CANCELLED; want %d rows, all UNKNOWN", rows, unknown, ok, cancelled, n)
	}
	var offsets uint64
	if err := d.Conn.QueryRow(ctx, `SELECT uniqExact(source_partition, source_offset) FROM v_inference_results WHERE has(?, request_id) AND source_topic = ?`,
		ids, d.Ingest.InferenceTopic).Scan(&offsets); err != nil || offsets != n {
		t.Fatalf("newer-status records at %d distinct source offsets of %s (%v), want %d", offsets, d.Ingest.InferenceTopic, err, n)
	}
	var dead uint64
	if err := d.Conn.QueryRow(ctx, `SELECT count() FROM v_dlq_entries WHERE has(?, record_key)`, ids).Scan(&dead); err != nil {
		t.Fatal(err)
	}
	if dead != 0 {
		t.Fatalf("%d newer-status records dead-lettered, want 0: a newer status is not bad input", dead)
	}
	var requests, errs, unk uint64
	if err := d.Conn.QueryRow(ctx, `SELECT sum(requests), sum(errors), sum(unknown) FROM v_model_minute WHERE model = ?`, model).Scan(&requests, &errs, &unk); err != nil {
		t.Fatal(err)
	}
	if requests != n || errs != 0 || unk != n {
		t.Fatalf("v_model_minute for %s: %d requests, %d errors, %d unknown; want %d, 0, %d", model, requests, errs, unk, n, n)
	}
}

// TestNewerPhaseIsDeadLetteredAlone: a newer gateway writes a phase this version does not know.
// Each such record goes to the DLQ once, as invalid, with its origin; the same writer's
// RESPONSE records land in gateway_logs.
func TestNewerPhaseIsDeadLetteredAlone(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const n = 4
	produce, ids := pipelinetest.NewerPhases(n, "tenant-newer", "model-newer", "RETRY")
	d := pipelinetest.RunWith(t, ctx, loadgen.Config{Requests: 50, Seed: 27}, produce)

	var responses, other uint64
	if err := d.Conn.QueryRow(ctx, `SELECT countIf(phase = 'RESPONSE'), countIf(phase != 'RESPONSE') FROM v_gateway_logs WHERE has(?, request_id)`, ids).Scan(&responses, &other); err != nil {
		t.Fatal(err)
	}
	if responses != n || other != 0 {
		t.Fatalf("gateway_logs holds %d RESPONSE and %d other rows of the newer writer, want %d and 0", responses, other, n)
	}
	rows, err := d.Conn.Query(ctx, `SELECT record_key, stage, class, origin_topic, message FROM v_dlq_entries WHERE has(?, record_key) ORDER BY record_key`, ids)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		var key, stage, class, topic, msg string
		if err := rows.Scan(&key, &stage, &class, &topic, &msg); err != nil {
			t.Fatal(err)
		}
		if stage != "ingest" || class != "invalid" || topic != d.Ingest.GatewayTopic || !strings.Contains(msg, "phase UNKNOWN") {
			t.Fatalf("DLQ entry of %s: stage %s, class %s, origin %s, message %q; want ingest, invalid, %s, naming phase UNKNOWN", key, stage, class, topic, msg, d.Ingest.GatewayTopic)
		}
		keys = append(keys, key)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keys, ids) {
		t.Fatalf("DLQ entries for %v, want one for each of %v", keys, ids)
	}
}
