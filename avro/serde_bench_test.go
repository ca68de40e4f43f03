package avro

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr/srfake"
)

// benchRecords are the records of one loadgen-like request and what ingest makes of one.
func benchRecords() (InferenceResult, GatewayLog, EnrichedRecord) {
	inf := sampleInference()
	inf.OutputText = "please summarize the following report about quarterly sales and explain how to configure a cluster"
	inf.Embedding = make([]float32, 16)
	gw := GatewayLog{RequestID: "req-1", Phase: PhaseResponse, EventTime: fixedNow.Add(-time.Minute), TenantID: "tenant-007",
		UserID: "user-00042", Route: "/v1/chat/completions", Model: "model-03", ResponseText: inf.OutputText, StatusCode: 200,
		LatencyMs: 431, PromptTokens: 180, CompletionTokens: 140}
	en := EnrichedRecord{RequestID: "req-1", SourceTopic: TopicGatewayLog, SourcePartition: 2, SourceOffset: 123456, SchemaID: 3,
		IngestTime: fixedNow, Gateway: &gw, Moderation: Moderation{Status: "CHECKED", Verdict: "REVIEW", RiskScore: 0.5,
			Categories: []string{"demo-fraud"}, Hits: []Hit{{Word: "bluefin", Category: "demo-fraud", Start: 10, End: 17}}}}
	return inf, gw, en
}

// BenchmarkDecode is the decode every stage does per record: a Confluent-framed body, its
// writer schema cached, resolved into the current Go type and validated.
func BenchmarkDecode(b *testing.B) {
	fake := srfake.New()
	defer fake.Close()
	reg, err := NewRegistryClient(RegistryConn{URL: fake.URL()})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	inf, gw, en := benchRecords()
	now := DecoderConfig{Now: func() time.Time { return fixedNow }}
	v1, _ := NewEncoder[InferenceResult](reg, InferenceResultV1, "inf-value")
	v2, _ := NewEncoder[InferenceResult](reg, InferenceResultV2, "inf-value")
	ge, _ := NewEncoder[GatewayLog](reg, GatewayLogSchema, "gw-value")
	ee, _ := NewEncoder[EnrichedRecord](reg, EnrichedSchema, "en-value")
	mustEnc := func(v []byte, err error) []byte {
		if err != nil {
			b.Fatal(err)
		}
		return v
	}
	infV1, infV2 := mustEnc(v1.Encode(ctx, inf)), mustEnc(v2.Encode(ctx, inf))
	gwB, enB := mustEnc(ge.Encode(ctx, gw)), mustEnc(ee.Encode(ctx, en))
	infDec, _ := NewDecoder[InferenceResult](reg, InferenceResultSchema, now)
	gwDec, _ := NewDecoder[GatewayLog](reg, GatewayLogSchema, now)
	enDec, _ := NewDecoder[EnrichedRecord](reg, EnrichedSchema, now)
	run := func(name string, value []byte, dec func([]byte) error) {
		b.Run(name, func(b *testing.B) {
			if err := dec(value); err != nil { // warm the schema cache
				b.Fatal(err)
			}
			b.SetBytes(int64(len(value)))
			b.ReportAllocs()
			for b.Loop() {
				if err := dec(value); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	run("inference-v1-to-v2", infV1, func(v []byte) error { _, _, err := infDec.Decode(ctx, v); return err })
	run("inference-v2", infV2, func(v []byte) error { _, _, err := infDec.Decode(ctx, v); return err })
	run("gateway", gwB, func(v []byte) error { _, _, err := gwDec.Decode(ctx, v); return err })
	run("enriched", enB, func(v []byte) error { _, _, err := enDec.Decode(ctx, v); return err })
}

// BenchmarkEncodeEnriched is ingest's encode of every record it emits.
func BenchmarkEncodeEnriched(b *testing.B) {
	fake := srfake.New()
	defer fake.Close()
	reg, err := NewRegistryClient(RegistryConn{URL: fake.URL()})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	_, _, en := benchRecords()
	enc, _ := NewEncoder[EnrichedRecord](reg, EnrichedSchema, "en-value")
	buf, err := enc.AppendEncode(ctx, nil, en)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if buf, err = enc.AppendEncode(ctx, buf[:0], en); err != nil {
			b.Fatal(err)
		}
	}
}
