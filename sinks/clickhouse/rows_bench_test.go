package clickhouse

import (
	"testing"
	"time"

	"github.com/backflowhq/backflow/avro"
)

// benchEnriched is a loadgen-like mix: a REQUEST, an inference result and a RESPONSE of one
// request, one of them with a hit.
func benchEnriched() []avro.EnrichedRecord {
	et := time.Date(2026, 11, 29, 12, 0, 0, 123e6, time.UTC)
	text := "please summarize the following report about quarterly sales and explain how to configure a cluster"
	mod := avro.Moderation{Status: "CHECKED", Verdict: "ALLOW", Categories: []string{}}
	hit := avro.Moderation{Status: "CHECKED", Verdict: "REVIEW", RiskScore: 0.5, Categories: []string{"demo-fraud"},
		Hits: []avro.Hit{{Word: "bluefin", Category: "demo-fraud", Start: 10, End: 17}}}
	finish := "stop"
	gw := avro.GatewayLog{RequestID: "req-1", Phase: avro.PhaseRequest, EventTime: et, TenantID: "tenant-007", UserID: "user-00042",
		Route: "/v1/chat/completions", Model: "model-03", PromptText: text}
	resp := gw
	resp.Phase, resp.PromptText, resp.ResponseText, resp.StatusCode, resp.LatencyMs = avro.PhaseResponse, "", text, 200, 431
	inf := avro.InferenceResult{RequestID: "req-1", Model: "model-03", ModelVersion: "v1", EventTime: et, LatencyMs: 420,
		PromptTokens: 180, CompletionTokens: 140, Labels: []avro.Label{{Name: "toxicity", Score: 0.1}, {Name: "pii", Score: 0.05}},
		RiskScore: 0.2, Embedding: make([]float32, 16), OutputText: text, Status: "OK", Region: "eu-west", FinishReason: &finish}
	base := avro.EnrichedRecord{RequestID: "req-1", SourcePartition: 1, SourceOffset: 1000, SchemaID: 3, IngestTime: et}
	a, c, d := base, base, base
	a.SourceTopic, a.Gateway, a.Moderation = avro.TopicGatewayLog, &gw, mod
	c.SourceTopic, c.Inference, c.Moderation = avro.TopicInferenceResult, &inf, hit
	d.SourceTopic, d.Gateway, d.Moderation = avro.TopicGatewayLog, &resp, mod
	return []avro.EnrichedRecord{a, c, d}
}

// BenchmarkBatchBuild is the sink's batch build per record: map an enriched record to its
// rows and gather them into the per-table slices a flush inserts (10,000 records a batch).
func BenchmarkBatchBuild(b *testing.B) {
	recs := benchEnriched()
	const batch = DefaultBatchRows
	inf := make([]InferenceRow, 0, batch)
	gw := make([]GatewayRow, 0, batch)
	var hits []HitRow
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		rows, err := MapRecord(&recs[i%len(recs)])
		if err != nil {
			b.Fatal(err)
		}
		if rows.Inference != nil {
			inf = append(inf, *rows.Inference)
		}
		if rows.Gateway != nil {
			gw = append(gw, *rows.Gateway)
		}
		hits = append(hits, rows.Hits...)
		if i++; i%batch == 0 {
			inf, gw, hits = inf[:0], gw[:0], hits[:0]
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
