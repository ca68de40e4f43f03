package avro

import (
	"context"
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

// newerWriter returns text with the symbol list of the enum called name replaced by symbols: a
// newer producer's schema that knows a symbol this version's reader schema does not.
func newerWriter(t *testing.T, text, name, symbols string) string {
	t.Helper()
	re := regexp.MustCompile(`("name":\s*"` + name + `",\s*(?:"type":\s*"enum",\s*)?"symbols":\s*)\[[^\]]*\]`)
	if !re.MatchString(text) {
		t.Fatalf("schema has no enum %s", name)
	}
	return re.ReplaceAllString(text, "${1}"+symbols)
}

// TestNewerInferenceStatusReadsAsUnknown: a v3 producer adds CANCELLED to InferenceStatus. Its
// records decode with status UNKNOWN, not OK, and its known statuses keep their meaning.
func TestNewerInferenceStatusReadsAsUnknown(t *testing.T) {
	_, cl := newRegistry(t)
	ctx := context.Background()
	v3 := newerWriter(t, inferenceResultV2Text, "InferenceStatus", `["OK", "ERROR", "TIMEOUT", "FILTERED", "UNKNOWN", "CANCELLED"]`)
	enc, err := NewTextEncoder[InferenceResult](cl, v3, TopicName.Subject(TopicInferenceResult, nil))
	if err != nil {
		t.Fatal(err)
	}
	_, dec := inferenceCodec(t, cl, nil)

	for _, tc := range []struct{ written, want string }{
		{"CANCELLED", StatusUnknown},
		{StatusOK, StatusOK},
		{StatusTimeout, StatusTimeout},
	} {
		in := sampleInference()
		in.Status = tc.written
		b, err := enc.Encode(ctx, in)
		if err != nil {
			t.Fatalf("encode %s with the v3 schema: %v", tc.written, err)
		}
		out, id, err := dec.Decode(ctx, b)
		if err != nil {
			t.Fatalf("decode %s: %v", tc.written, err)
		}
		wantID, _ := enc.ID(ctx)
		want := in
		want.Status = tc.want
		if id != wantID || !reflect.DeepEqual(out, want) {
			t.Fatalf("written %s, decoded status %q (id %d), want %q (id %d)\n got %+v\nwant %+v", tc.written, out.Status, id, tc.want, wantID, out, want)
		}
	}
}

// TestNewerInferenceStatusFromOldV2Writer: a producer built on the v2 schema as it was before
// UNKNOWN existed adds CANCELLED after FILTERED (ordinal 4, where this reader has UNKNOWN).
// Resolution is by name, so it still reads as UNKNOWN.
func TestNewerInferenceStatusFromOldV2Writer(t *testing.T) {
	_, cl := newRegistry(t)
	ctx := context.Background()
	v3 := strings.Replace(newerWriter(t, inferenceResultV2Text, "InferenceStatus", `["OK", "ERROR", "TIMEOUT", "FILTERED", "CANCELLED"]`),
		`"default": "UNKNOWN"`, `"default": "OK"`, 1)
	enc, err := NewTextEncoder[InferenceResult](cl, v3, TopicName.Subject(TopicInferenceResult, nil))
	if err != nil {
		t.Fatal(err)
	}
	_, dec := inferenceCodec(t, cl, nil)
	in := sampleInference()
	in.Status = "CANCELLED"
	b, err := enc.Encode(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := dec.Decode(ctx, b)
	if err != nil || out.Status != StatusUnknown {
		t.Fatalf("decoded status %q, %v; want %q", out.Status, err, StatusUnknown)
	}
}

// TestNewerGatewayPhaseIsInvalidAlone: a newer gateway adds a phase. Its records of that phase
// decode as UNKNOWN and fail validation (a DLQ entry of class invalid); its REQUEST and
// RESPONSE records still decode, where without a default every record of that writer schema
// would be incompatible.
func TestNewerGatewayPhaseIsInvalidAlone(t *testing.T) {
	_, cl := newRegistry(t)
	ctx := context.Background()
	newer := newerWriter(t, gatewayLogText, "Phase", `["REQUEST", "RESPONSE", "UNKNOWN", "RETRY"]`)
	enc, err := NewTextEncoder[GatewayLog](cl, newer, TopicName.Subject(TopicGatewayLog, nil))
	if err != nil {
		t.Fatal(err)
	}
	dec, err := NewDecoder[GatewayLog](cl, GatewayLogSchema, DecoderConfig{Now: func() time.Time { return fixedNow }})
	if err != nil {
		t.Fatal(err)
	}
	g := GatewayLog{RequestID: "req-1", Phase: "RETRY", EventTime: fixedNow.Add(-time.Minute).Truncate(time.Millisecond), TenantID: "t1", UserID: "u1", Route: "/v1/chat", Model: "chat-large"}
	b, err := enc.Encode(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = dec.Decode(ctx, b)
	var de *DecodeError
	if !errors.As(err, &de) || !errors.Is(err, ErrInvalid) || de.ErrorClass() != "invalid" || !strings.Contains(err.Error(), "phase UNKNOWN") {
		t.Fatalf("phase RETRY decoded with error %v, want class invalid naming phase UNKNOWN", err)
	}
	g.Phase = PhaseResponse
	b, err = enc.Encode(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := dec.Decode(ctx, b)
	if err != nil || !reflect.DeepEqual(out, g) {
		t.Fatalf("phase RESPONSE from the newer writer decoded as %+v, %v; want %+v", out, err, g)
	}
}

// TestNewerModerationSymbolsReadAsUnknown: a newer ingest adds a moderation status and a
// verdict. An older sink reads both as UNKNOWN, not as SKIPPED and ALLOW.
func TestNewerModerationSymbolsReadAsUnknown(t *testing.T) {
	_, cl := newRegistry(t)
	ctx := context.Background()
	newer := newerWriter(t, EnrichedSchema.String(), "dev.backflow.enriched.ModerationStatus", `["CHECKED","UNAVAILABLE","SKIPPED","UNKNOWN","PARTIAL"]`)
	newer = newerWriter(t, newer, "dev.backflow.enriched.Verdict", `["ALLOW","REVIEW","BLOCK","UNKNOWN","QUARANTINE"]`)
	enc, err := NewTextEncoder[EnrichedRecord](cl, newer, "enriched-value")
	if err != nil {
		t.Fatal(err)
	}
	dec, err := NewDecoder[EnrichedRecord](cl, EnrichedSchema, DecoderConfig{Now: func() time.Time { return fixedNow }})
	if err != nil {
		t.Fatal(err)
	}
	inf := sampleInference()
	in := EnrichedRecord{RequestID: "req-1", SourceTopic: TopicInferenceResult, SourceOffset: 7, IngestTime: fixedNow.Truncate(time.Millisecond), Inference: &inf,
		Moderation: Moderation{Status: "PARTIAL", Verdict: "QUARANTINE", RiskScore: 0.5, Categories: []string{"x"}, Hits: []Hit{}}}
	b, err := enc.Encode(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := dec.Decode(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if out.Moderation.Status != ModerationUnknown || out.Moderation.Verdict != VerdictUnknown || out.Moderation.RiskScore != 0.5 || out.SourceOffset != 7 {
		t.Fatalf("decoded moderation %+v (offset %d), want status %s, verdict %s, risk 0.5 at offset 7", out.Moderation, out.SourceOffset, ModerationUnknown, VerdictUnknown)
	}
}
