package ingest

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/moderation"
	"github.com/backflowhq/backflow/test/testenv"
)

// BenchmarkRecordPath measures ingest's per-record work without I/O: decode a framed v1
// inference result into the current type (schema cached), apply the dedupe rule, and build
// the moderation item, in batches of 100.
func BenchmarkRecordPath(b *testing.B) {
	reg, _ := testenv.FakeRegistry(b)
	enc, _ := avro.NewEncoder[avro.InferenceResult](reg, avro.InferenceResultV1, "model-inference-result-value")
	dec, _ := avro.NewDecoder[avro.InferenceResult](reg, avro.InferenceResultSchema, avro.DecoderConfig{})
	now := time.Now()
	value, err := enc.Encode(context.Background(), avro.InferenceResult{RequestID: "req-0000000001", Model: "model-03", ModelVersion: "v2",
		EventTime: now, LatencyMs: 420, PromptTokens: 180, CompletionTokens: 140,
		Labels:    []avro.Label{{Name: "toxicity", Score: 0.1}, {Name: "pii", Score: 0.05}},
		RiskScore: 0.2, Embedding: make([]float32, 16), Status: "OK",
		OutputText: "please summarize the following report about quarterly sales and explain how to configure a cluster"})
	if err != nil {
		b.Fatal(err)
	}
	if _, _, err := dec.Decode(context.Background(), value); err != nil { // warm the schema cache
		b.Fatal(err)
	}
	var st *State
	items := make([]moderation.Item, 0, 100)
	b.SetBytes(int64(len(value)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		v, _, err := dec.Decode(context.Background(), value)
		if err != nil {
			b.Fatal(err)
		}
		d, next := Decide(st, "model-inference-result", Origin{"model-inference-result", 0, int64(i)}, 0, now, 7*24*time.Hour)
		if d == DecideClaim {
			st = nil // each record is a new key
			_ = next
		}
		items = append(items, moderation.Item{ID: strconv.Itoa(len(items)), Text: v.OutputText})
		if len(items) == cap(items) {
			items = items[:0]
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
