package avro

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/backflowhq/backflow/internal/dlq"
)

var fixedNow = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func newRegistry(t *testing.T) (*srfake.Registry, *sr.Client) {
	t.Helper()
	fake := srfake.New()
	t.Cleanup(fake.Close)
	cl, err := NewRegistryClient(RegistryConn{URL: fake.URL(), Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return fake, cl
}

func sampleInference() InferenceResult {
	reason := "stop"
	return InferenceResult{
		RequestID: "req-1", Model: "chat-large", ModelVersion: "2026-10", EventTime: fixedNow.Add(-time.Minute).Truncate(time.Millisecond),
		LatencyMs: 420, PromptTokens: 31, CompletionTokens: 97,
		Labels:    []Label{{Name: "toxicity", Score: 0.125}, {Name: "pii", Score: 0.5}},
		RiskScore: 0.25, Embedding: []float32{0.5, -1, 2}, OutputText: "hello", Status: "OK",
		Region: "eu-west", CachedTokens: 12, FinishReason: &reason,
	}
}

func inferenceCodec(t *testing.T, cl Registry, writer any) (*Encoder[InferenceResult], *Decoder[InferenceResult]) {
	t.Helper()
	schema := InferenceResultV2
	if writer != nil {
		schema = InferenceResultV1
	}
	enc, err := NewEncoder[InferenceResult](cl, schema, TopicName.Subject(TopicInferenceResult, schema))
	if err != nil {
		t.Fatal(err)
	}
	dec, err := NewDecoder[InferenceResult](cl, InferenceResultSchema, DecoderConfig{Now: func() time.Time { return fixedNow }})
	if err != nil {
		t.Fatal(err)
	}
	return enc, dec
}

func TestRoundTripCurrentVersion(t *testing.T) {
	_, cl := newRegistry(t)
	enc, dec := inferenceCodec(t, cl, nil)
	ctx := context.Background()
	in := sampleInference()
	b, err := enc.Encode(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if b[0] != 0 {
		t.Fatalf("magic byte %d", b[0])
	}
	out, id, err := dec.Decode(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	wantID, _ := enc.ID(ctx)
	if id != wantID || id == 0 {
		t.Fatalf("decoded schema id %d, want %d", id, wantID)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip changed the record:\n in %+v\nout %+v", in, out)
	}
}

// TestEvolutionV1IntoCurrentType: a topic carries v1 and v2 records; both decode into
// InferenceResult, v1 records with v2's defaults for the added fields.
func TestEvolutionV1IntoCurrentType(t *testing.T) {
	_, cl := newRegistry(t)
	encV1, dec := inferenceCodec(t, cl, "v1")
	encV2, _ := inferenceCodec(t, cl, nil)
	ctx := context.Background()
	in := sampleInference()

	b1, err := encV1.Encode(ctx, in)
	if err != nil {
		t.Fatalf("encode v1: %v", err)
	}
	b2, err := encV2.Encode(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	id1, _ := encV1.ID(ctx)
	id2, _ := encV2.ID(ctx)
	if id1 == id2 {
		t.Fatalf("v1 and v2 registered with the same id %d", id1)
	}

	got1, gotID1, err := dec.Decode(ctx, b1)
	if err != nil {
		t.Fatalf("decode v1: %v", err)
	}
	want1 := in
	want1.Region, want1.CachedTokens, want1.FinishReason = "", 0, nil // not in v1: defaults
	if gotID1 != id1 || !reflect.DeepEqual(got1, want1) {
		t.Fatalf("v1 decoded as %+v (id %d), want %+v (id %d)", got1, gotID1, want1, id1)
	}
	got2, _, err := dec.Decode(ctx, b2)
	if err != nil || !reflect.DeepEqual(got2, in) {
		t.Fatalf("v2 decoded as %+v, %v", got2, err)
	}
}

func TestGatewayAndEnrichedRoundTrip(t *testing.T) {
	_, cl := newRegistry(t)
	ctx := context.Background()
	gw := GatewayLog{RequestID: "req-9", Phase: PhaseResponse, EventTime: fixedNow.Truncate(time.Millisecond), TenantID: "t1", UserID: "u1",
		Route: "/v1/chat", Model: "m", ResponseText: "ok", StatusCode: 200, LatencyMs: 12, PromptTokens: 3, CompletionTokens: 4}
	genc, _ := NewEncoder[GatewayLog](cl, GatewayLogSchema, TopicName.Subject(TopicGatewayLog, GatewayLogSchema))
	gdec, _ := NewDecoder[GatewayLog](cl, GatewayLogSchema, DecoderConfig{Now: func() time.Time { return fixedNow }})
	b, err := genc.Encode(ctx, gw)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := gdec.Decode(ctx, b)
	if err != nil || got != gw {
		t.Fatalf("gateway round trip: %+v, %v", got, err)
	}

	inf := sampleInference()
	en := EnrichedRecord{RequestID: "req-1", SourceTopic: TopicInferenceResult, SourcePartition: 2, SourceOffset: 77, SchemaID: 3, Epoch: 1,
		IngestTime: fixedNow.Truncate(time.Millisecond), Inference: &inf,
		Moderation: Moderation{Status: "CHECKED", Verdict: "REVIEW", RiskScore: 0.5, Categories: []string{"demo"},
			Hits: []Hit{{Word: "alpha", Category: "demo", Start: 3, End: 8}}}}
	eenc, _ := NewEncoder[EnrichedRecord](cl, EnrichedSchema, TopicName.Subject("backflow.enriched", EnrichedSchema))
	edec, _ := NewDecoder[EnrichedRecord](cl, EnrichedSchema, DecoderConfig{})
	codec := &GokaCodec[EnrichedRecord]{Enc: eenc, Dec: edec}
	b, err = codec.Encode(&en)
	if err != nil {
		t.Fatal(err)
	}
	v, err := codec.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if out := v.(*EnrichedRecord); !reflect.DeepEqual(*out, en) {
		t.Fatalf("enriched round trip:\n in %+v\nout %+v", en, *out)
	}
	if _, err := codec.Encode("not a record"); err == nil {
		t.Fatal("encoding a string succeeded")
	}
	// The registered enriched schema is self-contained: the registry parsed it without references.
	reg, err := cl.SchemaByID(ctx, mustID(t, eenc))
	if err != nil || !strings.Contains(reg.Schema, "InferenceResult") || !strings.Contains(reg.Schema, "GatewayLog") {
		t.Fatalf("registered enriched schema lacks inlined types: %v %.200s", err, reg.Schema)
	}
}

func mustID[T any](t *testing.T, e *Encoder[T]) int {
	id, err := e.ID(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestDecodeErrorClasses(t *testing.T) {
	fake, cl := newRegistry(t)
	enc, dec := inferenceCodec(t, cl, nil)
	ctx := context.Background()
	good, err := enc.Encode(ctx, sampleInference())
	if err != nil {
		t.Fatal(err)
	}
	id := mustID(t, enc)
	gwEnc, _ := NewEncoder[GatewayLog](cl, GatewayLogSchema, "gateway-log-value")
	gwBytes, err := gwEnc.Encode(ctx, GatewayLog{RequestID: "g", Phase: PhaseRequest, EventTime: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	with := func(mut func(*InferenceResult)) []byte {
		r := sampleInference()
		mut(&r)
		b, err := enc.Encode(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	frame := func(id int, body ...byte) []byte { return append(AppendFrame(nil, id), body...) }
	_ = fake

	tests := []struct {
		name      string
		in        []byte
		wantKind  error
		wantClass string
		retryable bool
	}{
		{"empty", nil, ErrNotFramed, ClassNotFramed, false},
		{"shorter than header", []byte{0, 0, 1}, ErrNotFramed, ClassNotFramed, false},
		{"bad magic byte", append([]byte{1}, good[1:]...), ErrNotFramed, ClassNotFramed, false},
		{"unknown schema id", frame(987654, good[HeaderSize:]...), ErrUnknownSchemaID, ClassUnknownSchema, false},
		{"truncated body", good[:len(good)-7], ErrCorrupt, ClassCorrupt, false},
		{"header only", good[:HeaderSize], ErrCorrupt, ClassCorrupt, false},
		{"garbage body", frame(id, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff), ErrCorrupt, ClassCorrupt, false},
		{"trailing bytes", append(append([]byte{}, good...), 0, 0), ErrCorrupt, ClassCorrupt, false},
		{"empty requestId", with(func(r *InferenceResult) { r.RequestID = "" }), ErrInvalid, ClassInvalid, false},
		{"event time 1970", with(func(r *InferenceResult) { r.EventTime = time.UnixMilli(0) }), ErrInvalid, ClassInvalid, false},
		{"event time year 3000", with(func(r *InferenceResult) { r.EventTime = time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC) }), ErrInvalid, ClassInvalid, false},
		{"negative tokens", with(func(r *InferenceResult) { r.PromptTokens = -1 }), ErrInvalid, ClassInvalid, false},
		{"oversized", frame(id, make([]byte, DefaultMaxRecordBytes)...), ErrOversized, ClassOversized, false},
		{"other record type", gwBytes, ErrIncompatibleSchema, ClassIncompatibleSchema, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := dec.Decode(ctx, tt.in)
			if !errors.Is(err, tt.wantKind) {
				t.Fatalf("err = %v, want %v", err, tt.wantKind)
			}
			var de *DecodeError
			if !errors.As(err, &de) || de.ErrorClass() != tt.wantClass {
				t.Fatalf("class of %v is not %s", err, tt.wantClass)
			}
			if IsRetryable(err) != tt.retryable {
				t.Fatalf("IsRetryable(%v) = %v", err, !tt.retryable)
			}
		})
	}
}

// TestRegistryOutagesAreRetryable: a registry that errors must never make a record look bad.
func TestRegistryOutagesAreRetryable(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
	}{
		{"server error", http.StatusInternalServerError, `{"error_code":50001,"message":"store down"}`},
		{"rate limited", http.StatusTooManyRequests, `{"error_code":42901,"message":"slow down"}`},
		{"unauthorized", http.StatusUnauthorized, `{"error_code":40101,"message":"bad credentials"}`},
		{"forbidden", http.StatusForbidden, `{"error_code":40301,"message":"no"}`},
		{"404 without schema-not-found code (wrong URL)", http.StatusNotFound, `<html>not found</html>`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake, cl := newRegistry(t)
			enc, dec := inferenceCodec(t, cl, nil)
			b, err := enc.Encode(context.Background(), sampleInference())
			if err != nil {
				t.Fatal(err)
			}
			fake.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
				w.WriteHeader(tt.status)
				w.Write([]byte(tt.body))
				return true
			})
			_, _, err = dec.Decode(context.Background(), b)
			if !errors.Is(err, ErrRegistryUnavailable) || !IsRetryable(err) {
				t.Fatalf("err = %v, want retryable ErrRegistryUnavailable", err)
			}
			// Once the registry is back, the same bytes decode: nothing about the record was cached as bad.
			fake.ClearInterceptors()
			if _, _, err := dec.Decode(context.Background(), b); err != nil {
				t.Fatalf("after recovery: %v", err)
			}
		})
	}
	t.Run("unreachable", func(t *testing.T) {
		cl, _ := NewRegistryClient(RegistryConn{URL: "http://127.0.0.1:1", Timeout: time.Second})
		dec, _ := NewDecoder[InferenceResult](cl, InferenceResultSchema, DecoderConfig{})
		_, _, err := dec.Decode(context.Background(), AppendFrame(nil, 1))
		if !IsRetryable(err) {
			t.Fatalf("err = %v, want retryable", err)
		}
	})
}

// TestSchemaFetchedOnceConcurrently: 64 goroutines decoding records of one new id cost one
// registry request, and later decodes none.
func TestSchemaFetchedOnceConcurrently(t *testing.T) {
	fake, cl := newRegistry(t)
	enc, dec := inferenceCodec(t, cl, nil)
	b, err := enc.Encode(context.Background(), sampleInference())
	if err != nil {
		t.Fatal(err)
	}
	var fetches atomic.Int32
	fake.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		if strings.HasPrefix(r.URL.Path, "/schemas/ids/") {
			fetches.Add(1)
			time.Sleep(50 * time.Millisecond) // keep the first fetch in flight while others arrive
		}
		return false
	})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := dec.Decode(context.Background(), b); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if _, _, err := dec.Decode(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	if n := fetches.Load(); n != 1 {
		t.Fatalf("%d schema fetches, want 1", n)
	}
}

// TestUnknownIDRemembered: records with an id the registry does not know cost one request
// while the answer is remembered, another once it expired, and one each when remembering is off;
// every one of them is ErrUnknownSchemaID.
func TestUnknownIDRemembered(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ttl     time.Duration
		records int
		fetches int32
	}{{"default", 0, 20, 1}, {"off", -1, 20, 20}, {"expired", 10 * time.Millisecond, 2, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			fake, cl := newRegistry(t)
			var fetches atomic.Int32
			fake.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
				if strings.HasPrefix(r.URL.Path, "/schemas/ids/") {
					fetches.Add(1)
				}
				return false
			})
			dec, err := NewDecoder[InferenceResult](cl, InferenceResultSchema, DecoderConfig{UnknownIDTTL: tc.ttl})
			if err != nil {
				t.Fatal(err)
			}
			bad := append(AppendFrame(nil, 987654), 2, 'x')
			for i := range tc.records {
				if tc.name == "expired" && i > 0 {
					time.Sleep(30 * time.Millisecond)
				}
				if _, id, err := dec.Decode(context.Background(), bad); !errors.Is(err, ErrUnknownSchemaID) || IsRetryable(err) || id != 987654 {
					t.Fatalf("record %d: id %d, err %v; want 987654 and ErrUnknownSchemaID", i, id, err)
				}
			}
			if n := fetches.Load(); n != tc.fetches {
				t.Fatalf("%d schema fetches for %d records, want %d", n, tc.records, tc.fetches)
			}
		})
	}
}

func TestSubjectStrategies(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"topic", "gateway-log-value"},
		{"TopicNameStrategy", "gateway-log-value"},
		{"record", "dev.backflow.gateway.GatewayLog"},
		{"topic-record", "gateway-log-dev.backflow.gateway.GatewayLog"},
	}
	for _, tt := range tests {
		s, err := ParseSubjectStrategy(tt.in)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Subject(TopicGatewayLog, GatewayLogSchema); got != tt.want {
			t.Errorf("%s: subject %q, want %q", tt.in, got, tt.want)
		}
	}
	if _, err := ParseSubjectStrategy("bogus"); err == nil {
		t.Error("bogus strategy accepted")
	}
}

func TestEncoderRetriesRegistrationAfterOutage(t *testing.T) {
	fake, cl := newRegistry(t)
	enc, _ := inferenceCodec(t, cl, nil)
	fake.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		w.WriteHeader(http.StatusServiceUnavailable)
		return true
	})
	if _, err := enc.Encode(context.Background(), sampleInference()); !IsRetryable(err) {
		t.Fatalf("err = %v, want retryable", err)
	}
	fake.ClearInterceptors()
	if _, err := enc.Encode(context.Background(), sampleInference()); err != nil {
		t.Fatalf("after recovery: %v", err)
	}
}

// TestEncoderLosesRegistrationRace (regression): two producers registering the same new schema
// at once made Apicurio answer the slower one 409 "artifact already exists". The encoder took
// that as a rejection, so ingest could never emit the record and its partition stopped
// committing. The loser now looks its schema up and uses the winner's id.
func TestEncoderLosesRegistrationRace(t *testing.T) {
	fake, cl := newRegistry(t)
	subject := TopicName.Subject(TopicInferenceResult, InferenceResultV2)
	winner, err := cl.RegisterSchema(context.Background(), subject, sr.Schema{Schema: InferenceResultV2.String(), Type: sr.TypeAvro}, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	var conflicts atomic.Int32
	fake.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodPost && r.URL.Path == "/subjects/"+subject+"/versions" {
			conflicts.Add(1)
			w.WriteHeader(http.StatusConflict)
			w.Write([]byte(`{"error_code":0,"message":"An artifact with ID '` + subject + `' in group 'null' already exists."}`))
			return true
		}
		return false
	})
	enc, dec := inferenceCodec(t, cl, nil)
	b, err := enc.Encode(context.Background(), sampleInference())
	if err != nil {
		t.Fatalf("encode after a lost registration race: %v", err)
	}
	if id := int(binary.BigEndian.Uint32(b[1:5])); id != winner || conflicts.Load() != 1 {
		t.Fatalf("framed with id %d after %d conflicts, want the winner's id %d after 1", id, conflicts.Load(), winner)
	}
	if got, _, err := dec.Decode(context.Background(), b); err != nil || got.RequestID != sampleInference().RequestID {
		t.Fatalf("decode: %+v, %v", got, err)
	}
}

// TestEncoderFalseAlreadyExistsIsRetried (regression): Apicurio on H2 answered a lone first
// registration 409 "already exists" (a unique-index clash with another registration under
// load) while the subject held nothing, and a lookup said 404. The encoder took it as a
// refusal and ingest stopped (fault suite #2). It is retryable now, and asking again succeeds.
func TestEncoderFalseAlreadyExistsIsRetried(t *testing.T) {
	fake, cl := newRegistry(t)
	subject := TopicName.Subject(TopicInferenceResult, InferenceResultV2)
	var conflicts atomic.Int32
	fake.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodPost && r.URL.Path == "/subjects/"+subject+"/versions" && conflicts.Add(1) == 1 {
			w.WriteHeader(http.StatusConflict)
			w.Write([]byte(`{"error_code":0,"message":"An artifact with ID '` + subject + `' in group 'null' already exists."}`))
			return true
		}
		return false
	})
	enc, dec := inferenceCodec(t, cl, nil)
	if _, err := enc.Encode(context.Background(), sampleInference()); !IsRetryable(err) {
		t.Fatalf("err = %v, want retryable", err)
	}
	b, err := enc.Encode(context.Background(), sampleInference())
	if err != nil {
		t.Fatalf("second encode: %v", err)
	}
	if conflicts.Load() != 2 {
		t.Fatalf("%d registrations, want 2", conflicts.Load())
	}
	if got, _, err := dec.Decode(context.Background(), b); err != nil || got.RequestID != sampleInference().RequestID {
		t.Fatalf("decode: %+v, %v", got, err)
	}
}

// TestEncoderRejectedSchemaIsPermanent: a 409 for a schema the subject does not hold is the
// registry refusing it (incompatible); that is not retryable.
func TestEncoderRejectedSchemaIsPermanent(t *testing.T) {
	fake, cl := newRegistry(t)
	fake.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/versions") {
			w.WriteHeader(http.StatusConflict)
			w.Write([]byte(`{"error_code":409,"message":"incompatible"}`))
			return true
		}
		return false
	})
	enc, _ := inferenceCodec(t, cl, nil)
	_, err := enc.Encode(context.Background(), sampleInference())
	if err == nil || IsRetryable(err) {
		t.Fatalf("err = %v, want a permanent error", err)
	}
}

// TestDecodeErrorsCarryTheirDLQClass: a decode error reaches the DLQ with the class of its
// kind, and every class it can carry is registered for `backflow dlq --class`.
func TestDecodeErrorsCarryTheirDLQClass(t *testing.T) {
	for kind, want := range map[error]string{ErrUnknownSchemaID: ClassUnknownSchema, ErrOversized: ClassOversized} {
		err := fmt.Errorf("decode: %w", &DecodeError{Kind: kind, SchemaID: 9})
		if got := dlq.ClassOf(err); got != want {
			t.Errorf("ClassOf(%v) = %q, want %q", kind, got, want)
		}
		if !dlq.KnownClass(want) {
			t.Errorf("class %s is not registered", want)
		}
	}
}
