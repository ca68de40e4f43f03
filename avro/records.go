package avro

import (
	"fmt"
	"time"
)

// Topics the producers write, with the Go type each decodes into.
const (
	TopicInferenceResult = "model-inference-result" // InferenceResult
	TopicGatewayLog      = "gateway-log"            // GatewayLog
)

// InferenceResult is one model inference (schema dev.backflow.inference.InferenceResult,
// current version 2; version-1 records decode into it with Region "", CachedTokens 0 and
// FinishReason nil).
type InferenceResult struct {
	RequestID        string    `avro:"requestId"`
	Model            string    `avro:"model"`
	ModelVersion     string    `avro:"modelVersion"`
	EventTime        time.Time `avro:"eventTime"`
	LatencyMs        int32     `avro:"latencyMs"`
	PromptTokens     int32     `avro:"promptTokens"`
	CompletionTokens int32     `avro:"completionTokens"`
	Labels           []Label   `avro:"labels"`
	RiskScore        float32   `avro:"riskScore"`
	Embedding        []float32 `avro:"embedding"` // nil: absent
	OutputText       string    `avro:"outputText"`
	Status           string    `avro:"status"` // OK, ERROR, TIMEOUT, FILTERED or UNKNOWN
	Error            *string   `avro:"error"`
	Region           string    `avro:"region"`
	CachedTokens     int32     `avro:"cachedTokens"`
	FinishReason     *string   `avro:"finishReason"`
}

// Inference statuses. StatusUnknown is the reader schema's default: a status a newer writer
// added (and this version does not know) decodes as it, never as StatusOK.
const (
	StatusOK       = "OK"
	StatusError    = "ERROR"
	StatusTimeout  = "TIMEOUT"
	StatusFiltered = "FILTERED"
	StatusUnknown  = "UNKNOWN"
)

// Label is a classifier label with its score.
type Label struct {
	Name  string  `avro:"name"`
	Score float32 `avro:"score"`
}

// GatewayLog is one entry of the gateway's log (schema dev.backflow.gateway.GatewayLog).
// Every request is logged twice: Phase "REQUEST" and Phase "RESPONSE".
type GatewayLog struct {
	RequestID        string    `avro:"requestId"`
	Phase            string    `avro:"phase"` // REQUEST or RESPONSE (UNKNOWN: a newer writer's phase, invalid)
	EventTime        time.Time `avro:"eventTime"`
	TenantID         string    `avro:"tenantId"`
	UserID           string    `avro:"userId"`
	Route            string    `avro:"route"`
	Model            string    `avro:"model"`
	PromptText       string    `avro:"promptText"`
	ResponseText     string    `avro:"responseText"`
	StatusCode       int32     `avro:"statusCode"`
	LatencyMs        int32     `avro:"latencyMs"`
	PromptTokens     int32     `avro:"promptTokens"`
	CompletionTokens int32     `avro:"completionTokens"`
}

// Gateway phases. PhaseUnknown is the reader schema's default: a phase a newer writer added
// decodes as it, and Validate rejects it.
const (
	PhaseRequest  = "REQUEST"
	PhaseResponse = "RESPONSE"
	PhaseUnknown  = "UNKNOWN"
)

// EnrichedRecord is what ingest emits for every valid, non-duplicate source record
// (schema dev.backflow.enriched.EnrichedRecord). Exactly one of Inference and Gateway is set.
type EnrichedRecord struct {
	RequestID       string           `avro:"requestId"`
	SourceTopic     string           `avro:"sourceTopic"`
	SourcePartition int32            `avro:"sourcePartition"`
	SourceOffset    int64            `avro:"sourceOffset"`
	SchemaID        int32            `avro:"schemaId"`
	Epoch           int32            `avro:"epoch"`
	IngestTime      time.Time        `avro:"ingestTime"`
	Inference       *InferenceResult `avro:"inference"`
	Gateway         *GatewayLog      `avro:"gateway"`
	Moderation      Moderation       `avro:"moderation"`
}

// Moderation is the sensitive-word service's verdict over a record's text.
type Moderation struct {
	Status     string   `avro:"status"`  // CHECKED, UNAVAILABLE, SKIPPED (UNKNOWN: read, never written)
	Verdict    string   `avro:"verdict"` // ALLOW, REVIEW, BLOCK (UNKNOWN: read, never written)
	RiskScore  float32  `avro:"riskScore"`
	Categories []string `avro:"categories"`
	Hits       []Hit    `avro:"hits"`
}

// Moderation statuses and verdicts. Only ingest writes them; ModerationUnknown and
// VerdictUnknown are the reader schema's defaults, what a sink reads for a symbol a newer ingest
// added. Neither is ever written.
const (
	ModerationChecked     = "CHECKED"
	ModerationUnavailable = "UNAVAILABLE"
	ModerationSkipped     = "SKIPPED"
	ModerationUnknown     = "UNKNOWN"

	VerdictAllow   = "ALLOW"
	VerdictReview  = "REVIEW"
	VerdictBlock   = "BLOCK"
	VerdictUnknown = "UNKNOWN"
)

// Hit is one dictionary match, with rune offsets into the text.
type Hit struct {
	Word     string `avro:"word"`
	Category string `avro:"category"`
	Start    int32  `avro:"start"`
	End      int32  `avro:"end"`
}

// Event times outside [MinEventTime, now+MaxClockSkew] are absurd: a producer bug, not data.
var (
	MinEventTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	MaxClockSkew = 24 * time.Hour
)

// Validator is implemented by records that check their own invariants after decoding.
// A failure is reported as ErrInvalid and sends the record to the DLQ.
type Validator interface {
	Validate(now time.Time) error
}

// Validate checks what the pipeline relies on: a requestId and a plausible event time.
func (r *InferenceResult) Validate(now time.Time) error {
	if r.RequestID == "" {
		return fmt.Errorf("requestId is empty")
	}
	if err := checkEventTime(r.EventTime, now); err != nil {
		return err
	}
	if r.LatencyMs < 0 || r.PromptTokens < 0 || r.CompletionTokens < 0 {
		return fmt.Errorf("negative latency or token count (latencyMs=%d promptTokens=%d completionTokens=%d)", r.LatencyMs, r.PromptTokens, r.CompletionTokens)
	}
	return nil
}

// Validate checks what the pipeline relies on: a requestId, a known phase and a plausible
// event time.
func (g *GatewayLog) Validate(now time.Time) error {
	if g.RequestID == "" {
		return fmt.Errorf("requestId is empty")
	}
	if g.Phase == PhaseUnknown {
		return fmt.Errorf("phase %s: the writer's schema has a phase this version does not know (only %s and %s)", g.Phase, PhaseRequest, PhaseResponse)
	}
	if g.Phase != PhaseRequest && g.Phase != PhaseResponse {
		return fmt.Errorf("phase %q is neither %s nor %s", g.Phase, PhaseRequest, PhaseResponse)
	}
	return checkEventTime(g.EventTime, now)
}

func checkEventTime(t, now time.Time) error {
	if t.Before(MinEventTime) || t.After(now.Add(MaxClockSkew)) {
		return fmt.Errorf("eventTime %s is outside [%s, now+%s]", t.UTC().Format(time.RFC3339), MinEventTime.Format("2006-01-02"), MaxClockSkew)
	}
	return nil
}
