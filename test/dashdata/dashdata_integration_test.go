package dashdata_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/backflowhq/backflow/test/dashdata"
	"github.com/backflowhq/backflow/test/pipelinetest"
)

func scalar(t *testing.T, conn driver.Conn, q string) float64 {
	t.Helper()
	var v float64
	if err := conn.QueryRow(context.Background(), "SELECT toFloat64(("+q+"))").Scan(&v); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return v
}

// TestFill: the rows are the requests asked for, once each through FINAL, with loadgen's
// populations and shares, in the time range asked for; a moderation hit row for every text
// with a REVIEW or BLOCK verdict; the same Spec writes the same rows again, and in a new epoch
// other values that win.
func TestFill(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	conn := pipelinetest.Migrated(t, ctx, "it_dashdata_")
	to := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	spec := dashdata.Spec{Requests: 60000, First: 1000, From: to.Add(-30 * 24 * time.Hour), To: to, Chunk: 25000}
	var progress []uint64
	spec.Progress = func(done uint64) { progress = append(progress, done) }
	if err := dashdata.Fill(ctx, conn, spec); err != nil {
		t.Fatal(err)
	}
	if len(progress) != 3 || progress[2] != 60000 {
		t.Fatalf("progress %v, want 3 chunks up to 60000", progress)
	}
	type want struct {
		q      string
		lo, hi float64
	}
	for _, w := range []want{
		{"SELECT count() FROM v_inference_results", 60000, 60000},
		{"SELECT uniqExact(request_id) FROM inference_results", 60000, 60000},
		{"SELECT count() FROM v_gateway_logs", 120000, 120000},
		{"SELECT countIf(phase = 'RESPONSE') FROM v_gateway_logs", 60000, 60000},
		{"SELECT count() / 60000 - 1 FROM inference_results", 0.015, 0.025}, // redelivered copies
		{"SELECT uniqExact(model) FROM v_inference_results", 12, 12},
		{"SELECT countIf(model = 'model-00') / count() FROM v_inference_results", 0.36, 0.42}, // Zipf 1.2 over 12: 0.39
		{"SELECT uniqExact(tenant_id) FROM v_gateway_logs", 45, 50},
		{"SELECT uniqExact(user_id) FROM v_gateway_logs", 150, 200},
		{"SELECT countIf(status != 'OK') / count() FROM v_inference_results", 0.025, 0.035},
		{"SELECT quantileExact(0.5)(latency_ms) FROM v_inference_results", 380, 420},
		{"SELECT countIf(verdict IN ('REVIEW', 'BLOCK')) / count() FROM v_inference_results", 0.045, 0.055},
		{"SELECT count() FROM v_dlq_entries", 1600, 2000},
		{"SELECT uniqExact(class) FROM v_dlq_entries", 5, 5},
		{"SELECT min(event_time) >= toDateTime(" + itoa(spec.From.Unix()) + ") FROM v_gateway_logs", 1, 1},
		{"SELECT max(event_time) < toDateTime(" + itoa(to.Unix()+60) + ") FROM v_inference_results", 1, 1},
		{"SELECT uniqExact(toDate(event_time)) FROM v_inference_results", 30, 31},
		{"SELECT count() FROM sink_ledger WHERE group = '" + dashdata.LedgerGroup + "'", 600, 600},
		{"SELECT count() FROM sink_ledger WHERE group = '" + dashdata.MirrorGroup + "'", 6, 6},
		{"SELECT toUInt32(max(max_event_time)) FROM sink_ledger", float64(to.Unix()), float64(to.Unix())},
		{"SELECT count() FROM replay_log", 180, 180},
	} {
		if got := scalar(t, conn, w.q); got < w.lo || got > w.hi {
			t.Errorf("%s: %v, want %v to %v", w.q, got, w.lo, w.hi)
		}
	}
	// Every flagged text has its hit row, and every hit row is a flagged text's.
	flagged := scalar(t, conn, "SELECT (SELECT countIf(verdict IN ('REVIEW', 'BLOCK')) FROM v_inference_results) + (SELECT countIf(verdict IN ('REVIEW', 'BLOCK')) FROM v_gateway_logs)")
	if hits := scalar(t, conn, "SELECT count() FROM v_moderation_hits"); hits != flagged || hits < 3000 {
		t.Errorf("%v moderation hit rows, %v flagged texts", hits, flagged)
	}
	// The same Spec again: the same keys, so FINAL still holds each request once.
	spec.Progress = nil
	if err := dashdata.Fill(ctx, conn, spec); err != nil {
		t.Fatal(err)
	}
	if got := scalar(t, conn, "SELECT count() FROM v_inference_results"); got != 60000 {
		t.Errorf("after the same fill again, %v inference results, want 60000", got)
	}
	if got := scalar(t, conn, "SELECT uniqExact(request_id, latency_ms, model) FROM inference_results"); got != 60000 {
		t.Errorf("after the same fill again, %v distinct (request, latency, model), want 60000: the rows differ", got)
	}
	// In a new epoch: the same requests with other values, which win.
	spec.Epoch = 1
	if err := dashdata.Fill(ctx, conn, spec); err != nil {
		t.Fatal(err)
	}
	for _, w := range []want{
		{"SELECT count() FROM v_inference_results", 60000, 60000},
		{"SELECT countIf(epoch = 1 AND version >= bitShiftLeft(toUInt64(1), 40)) FROM v_inference_results", 60000, 60000},
		{"SELECT count() FROM v_gateway_logs", 120000, 120000},
		{"SELECT uniqExact(request_id, model) / 60000 FROM inference_results", 1.77, 1.82}, // 1 + P(another model) = 2 - sum(p²) = 1.79
		{"SELECT countIf(model = 'model-00') / count() FROM v_inference_results", 0.36, 0.42},
	} {
		if got := scalar(t, conn, w.q); got < w.lo || got > w.hi {
			t.Errorf("epoch 1: %s: %v, want %v to %v", w.q, got, w.lo, w.hi)
		}
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
