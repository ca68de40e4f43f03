package clickhouse

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
)

func TestVersion(t *testing.T) {
	tests := []struct {
		name   string
		epoch  int32
		offset int64
		want   uint64
	}{
		{"zero", 0, 0, 0},
		{"offset only", 0, 12345, 12345},
		{"epoch 1", 1, 0, 1 << 40},
		{"epoch and offset", 3, 77, 3<<40 | 77},
		{"largest offset", 0, 1<<40 - 1, 1<<40 - 1},
		{"offset clamped", 0, 1 << 41, 1<<40 - 1},
		{"negative offset", 2, -5, 2 << 40},
		{"negative epoch", -1, 9, 9},
		{"epoch clamped", 1 << 30, 1, (1<<24-1)<<40 | 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Version(tt.epoch, tt.offset); got != tt.want {
				t.Fatalf("Version(%d, %d) = %d, want %d", tt.epoch, tt.offset, got, tt.want)
			}
		})
	}
	// The rule's two promises: the same record converges, and a newer epoch wins whatever its offset.
	if Version(4, 1000) != Version(4, 1000) {
		t.Fatal("same record, different versions")
	}
	if Version(5, 0) <= Version(4, 1<<40-1) {
		t.Fatal("a replay (newer epoch, low offset) does not beat the older epoch's highest offset")
	}
}

func enriched() avro.EnrichedRecord {
	return avro.EnrichedRecord{RequestID: "req-1", SourcePartition: 2, SourceOffset: 99, SchemaID: 7, Epoch: 1,
		IngestTime: time.Date(2026, 11, 2, 3, 4, 5, 0, time.FixedZone("x", 3600)),
		Moderation: avro.Moderation{Status: "CHECKED", Verdict: "REVIEW", RiskScore: 0.5, Categories: []string{"violence"},
			Hits: []avro.Hit{{Word: "kill", Category: "violence", Start: 3, End: 7}, {Word: "gun", Category: "violence", Start: 10, End: 13}}}}
}

func TestMapInference(t *testing.T) {
	e := enriched()
	e.SourceTopic = avro.TopicInferenceResult
	errMsg, finish := "boom", "length"
	et := time.Date(2026, 11, 1, 12, 0, 0, 123e6, time.UTC)
	e.Inference = &avro.InferenceResult{RequestID: "req-1", Model: "chat-large", ModelVersion: "v3", EventTime: et,
		LatencyMs: 250, PromptTokens: 10, CompletionTokens: 20, CachedTokens: 4, RiskScore: 0.25,
		Labels:    []avro.Label{{Name: "toxicity", Score: 0.1}, {Name: "pii", Score: 0.9}},
		Embedding: make([]float32, 384), OutputText: "héllo wörld", Status: "ERROR", Error: &errMsg, Region: "eu-west-1", FinishReason: &finish}
	rows, err := MapRecord(&e)
	if err != nil {
		t.Fatal(err)
	}
	if rows.Gateway != nil || rows.Inference == nil {
		t.Fatalf("rows %+v, want one inference row", rows)
	}
	want := InferenceRow{SourceTopic: avro.TopicInferenceResult, RequestID: "req-1", Model: "chat-large", ModelVersion: "v3",
		EventTime: et, LatencyMs: 250, PromptTokens: 10, CompletionTokens: 20, CachedTokens: 4, RiskScore: 0.25,
		Labels: []string{"toxicity", "pii"}, LabelScores: []float32{0.1, 0.9}, Status: "ERROR", Error: &errMsg, Region: "eu-west-1",
		FinishReason: &finish, EmbeddingDim: 384, OutputChars: 11, ModerationStatus: "CHECKED", Verdict: "REVIEW", ModerationRisk: 0.5,
		Categories: []string{"violence"}, HitCount: 2, SchemaID: 7, Epoch: 1, SourcePartition: 2, SourceOffset: 99,
		IngestTime: time.Date(2026, 11, 2, 2, 4, 5, 0, time.UTC), Version: 1<<40 | 99, EventTimeMs: 1793534400123}
	if !reflect.DeepEqual(*rows.Inference, want) {
		t.Fatalf("inference row\n got %+v\nwant %+v", *rows.Inference, want)
	}
	if len(rows.Hits) != 2 || rows.Hits[1] != (HitRow{SourceTopic: avro.TopicInferenceResult, RequestID: "req-1", Phase: "", Start: 10, End: 13,
		Word: "gun", Category: "violence", EventTime: et, Epoch: 1, SourcePartition: 2, SourceOffset: 99, Version: 1<<40 | 99}) {
		t.Fatalf("hits %+v", rows.Hits)
	}
}

func TestMapGatewayPhases(t *testing.T) {
	et := time.Date(2026, 11, 1, 12, 0, 0, 7e6, time.UTC)
	for _, tt := range []struct {
		phase                      string
		g                          avro.GatewayLog
		promptChars, responseChars uint32
		status                     uint16
	}{
		{avro.PhaseRequest, avro.GatewayLog{PromptText: "how do I ünïcode"}, 16, 0, 0},
		{avro.PhaseResponse, avro.GatewayLog{ResponseText: "like this", StatusCode: 200, LatencyMs: 812, PromptTokens: 5, CompletionTokens: 9}, 0, 9, 200},
	} {
		t.Run(tt.phase, func(t *testing.T) {
			e := enriched()
			e.SourceTopic = avro.TopicGatewayLog
			e.Moderation = avro.Moderation{Status: "SKIPPED", Verdict: "ALLOW"} // nil categories, no hits
			g := tt.g
			g.RequestID, g.Phase, g.EventTime, g.TenantID, g.UserID, g.Route, g.Model = "req-1", tt.phase, et, "t1", "u1", "/v1/chat", "m"
			e.Gateway = &g
			rows, err := MapRecord(&e)
			if err != nil {
				t.Fatal(err)
			}
			r := rows.Gateway
			if rows.Inference != nil || r == nil || len(rows.Hits) != 0 {
				t.Fatalf("rows %+v, want one gateway row and no hits", rows)
			}
			if r.Phase != tt.phase || r.PromptChars != tt.promptChars || r.ResponseChars != tt.responseChars || r.StatusCode != tt.status ||
				r.LatencyMs != uint32(g.LatencyMs) || r.PromptTokens != uint32(g.PromptTokens) || r.CompletionTokens != uint32(g.CompletionTokens) ||
				r.TenantID != "t1" || r.UserID != "u1" || r.Route != "/v1/chat" || r.Model != "m" || !r.EventTime.Equal(et) ||
				r.Version != 1<<40|99 || r.EventTimeMs != 1793534400007 || r.LandedTimeMs != 0 || r.HitCount != 0 || r.Categories == nil || len(r.Categories) != 0 || r.ModerationStatus != "SKIPPED" {
				t.Fatalf("gateway row %+v", *r)
			}
		})
	}
}

func TestMapRecordNeedsExactlyOneSource(t *testing.T) {
	e := enriched()
	if _, err := MapRecord(&e); err == nil {
		t.Fatal("a record with neither inference nor gateway mapped")
	}
	e.Inference, e.Gateway = &avro.InferenceResult{}, &avro.GatewayLog{}
	if _, err := MapRecord(&e); err == nil {
		t.Fatal("a record with both inference and gateway mapped")
	}
}

func TestInsertSQLNamesEveryColumn(t *testing.T) {
	got := chschema.InsertSQL(TableLedger, LedgerRow{})
	want := "INSERT INTO sink_ledger (batch_id, group, topic, partition, min_offset, max_offset, rows, hit_rows, epoch, flushed_at, max_event_time) VALUES"
	if got != want {
		t.Fatalf("%s\nwant %s", got, want)
	}
	for _, row := range []any{InferenceRow{}, GatewayRow{}, HitRow{}} {
		sql := chschema.InsertSQL("t", row)
		if n := reflect.TypeOf(row).NumField(); strings.Count(sql, ",")+1 != n || strings.Contains(sql, "()") || strings.Contains(sql, ", ,") {
			t.Fatalf("%T: %s does not name its %d columns", row, sql, n)
		}
	}
}
