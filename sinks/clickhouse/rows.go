package clickhouse

import (
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"github.com/backflowhq/backflow/avro"
)

// Version orders the rows written for one key so that ReplacingMergeTree keeps the right one:
//
//		version = uint64(epoch) << 40 | uint64(sourceOffset)
//
//	  - A re-write of the same source record (redelivery, a retried insert) has the same epoch and
//	    offset, so the same version: the copies are identical and collapse to one.
//	  - A replayed record is processed in a newer epoch, so its version is higher whatever its
//	    offset: the replay's row wins.
//	  - Within one epoch the record at the higher source offset wins. Ingest emits only one
//	    record per key and epoch, so this only decides between two runs of the same epoch.
//
// Source offsets must stay below 2^40 (about 10^12 records per partition); epochs below 2^24.
// Out-of-range values are clamped rather than wrapped, so a version never goes backwards.
func Version(epoch int32, sourceOffset int64) uint64 {
	e := uint64(max(epoch, 0))
	if e > maxEpoch {
		e = maxEpoch
	}
	o := uint64(max(sourceOffset, 0))
	if o > maxOffset {
		o = maxOffset
	}
	return e<<40 | o
}

const (
	maxOffset = 1<<40 - 1
	maxEpoch  = 1<<24 - 1
)

// InferenceRow is a row of inference_results. Field tags name the columns; the INSERT names
// them too (18.16 needs named columns).
type InferenceRow struct {
	SourceTopic      string    `ch:"source_topic"`
	RequestID        string    `ch:"request_id"`
	Model            string    `ch:"model"`
	ModelVersion     string    `ch:"model_version"`
	EventTime        time.Time `ch:"event_time"`
	LatencyMs        uint32    `ch:"latency_ms"`
	PromptTokens     uint32    `ch:"prompt_tokens"`
	CompletionTokens uint32    `ch:"completion_tokens"`
	CachedTokens     uint32    `ch:"cached_tokens"`
	RiskScore        float32   `ch:"risk_score"`
	Labels           []string  `ch:"labels"`
	LabelScores      []float32 `ch:"label_scores"`
	Status           string    `ch:"status"`
	Error            *string   `ch:"error"`
	Region           string    `ch:"region"`
	FinishReason     *string   `ch:"finish_reason"`
	EmbeddingDim     uint16    `ch:"embedding_dim"`
	OutputChars      uint32    `ch:"output_chars"`
	ModerationStatus string    `ch:"moderation_status"`
	Verdict          string    `ch:"verdict"`
	ModerationRisk   float32   `ch:"moderation_risk"`
	Categories       []string  `ch:"categories"`
	HitCount         uint16    `ch:"hit_count"`
	SchemaID         int32     `ch:"schema_id"`
	Epoch            int32     `ch:"epoch"`
	SourcePartition  int32     `ch:"source_partition"`
	SourceOffset     int64     `ch:"source_offset"`
	IngestTime       time.Time `ch:"ingest_time"`
	Version          uint64    `ch:"version"`
	EventTimeMs      int64     `ch:"event_time_ms"`  // EventTime in Unix ms (18.16 has no DateTime64)
	LandedTimeMs     int64     `ch:"landed_time_ms"` // when the sink sent the INSERT, Unix ms; set by the sink
}

// GatewayRow is a row of gateway_logs.
type GatewayRow struct {
	SourceTopic      string    `ch:"source_topic"`
	RequestID        string    `ch:"request_id"`
	Phase            string    `ch:"phase"`
	EventTime        time.Time `ch:"event_time"`
	TenantID         string    `ch:"tenant_id"`
	UserID           string    `ch:"user_id"`
	Route            string    `ch:"route"`
	Model            string    `ch:"model"`
	StatusCode       uint16    `ch:"status_code"`
	LatencyMs        uint32    `ch:"latency_ms"`
	PromptTokens     uint32    `ch:"prompt_tokens"`
	CompletionTokens uint32    `ch:"completion_tokens"`
	PromptChars      uint32    `ch:"prompt_chars"`
	ResponseChars    uint32    `ch:"response_chars"`
	ModerationStatus string    `ch:"moderation_status"`
	Verdict          string    `ch:"verdict"`
	ModerationRisk   float32   `ch:"moderation_risk"`
	Categories       []string  `ch:"categories"`
	HitCount         uint16    `ch:"hit_count"`
	SchemaID         int32     `ch:"schema_id"`
	Epoch            int32     `ch:"epoch"`
	SourcePartition  int32     `ch:"source_partition"`
	SourceOffset     int64     `ch:"source_offset"`
	IngestTime       time.Time `ch:"ingest_time"`
	Version          uint64    `ch:"version"`
	EventTimeMs      int64     `ch:"event_time_ms"`  // EventTime in Unix ms (18.16 has no DateTime64)
	LandedTimeMs     int64     `ch:"landed_time_ms"` // when the sink sent the INSERT, Unix ms; set by the sink
}

// HitRow is a row of moderation_hits. Phase is "" for inference results.
type HitRow struct {
	SourceTopic     string    `ch:"source_topic"`
	RequestID       string    `ch:"request_id"`
	Phase           string    `ch:"phase"`
	Start           uint32    `ch:"start"`
	End             uint32    `ch:"end"`
	Word            string    `ch:"word"`
	Category        string    `ch:"category"`
	EventTime       time.Time `ch:"event_time"`
	Epoch           int32     `ch:"epoch"`
	SourcePartition int32     `ch:"source_partition"`
	SourceOffset    int64     `ch:"source_offset"`
	Version         uint64    `ch:"version"`
}

// LedgerRow is a row of sink_ledger.
type LedgerRow struct {
	BatchID   string    `ch:"batch_id"`
	Group     string    `ch:"group"`
	Topic     string    `ch:"topic"`
	Partition int32     `ch:"partition"`
	MinOffset int64     `ch:"min_offset"`
	MaxOffset int64     `ch:"max_offset"`
	Rows      uint32    `ch:"rows"`
	HitRows   uint32    `ch:"hit_rows"`
	Epoch     int32     `ch:"epoch"`
	FlushedAt time.Time `ch:"flushed_at"`
	// MaxEventTime is the newest event time among the rows this flush landed for the
	// partition (the Unix epoch when it landed none); the dashboards' freshness reads it.
	MaxEventTime time.Time `ch:"max_event_time"`
}

// Rows is what one enriched record becomes: exactly one of Inference and Gateway, and its hits.
type Rows struct {
	Inference *InferenceRow
	Gateway   *GatewayRow
	Hits      []HitRow
}

// EventTime is the event time of the record's row (zero when it has none).
func (r Rows) EventTime() time.Time {
	switch {
	case r.Inference != nil:
		return r.Inference.EventTime
	case r.Gateway != nil:
		return r.Gateway.EventTime
	}
	return time.Time{}
}

// MapRecord turns an enriched record into its rows. It fails only when the record has neither
// or both of its source parts, which ingest never emits.
func MapRecord(e *avro.EnrichedRecord) (Rows, error) {
	if (e.Inference == nil) == (e.Gateway == nil) {
		return Rows{}, fmt.Errorf("enriched record %s (%s/%d/%d) must hold exactly one of inference and gateway",
			e.RequestID, e.SourceTopic, e.SourcePartition, e.SourceOffset)
	}
	ver := Version(e.Epoch, e.SourceOffset)
	mod := e.Moderation
	categories := nonNil(mod.Categories)
	var out Rows
	var phase string
	var eventTime time.Time
	if in := e.Inference; in != nil {
		eventTime = in.EventTime.UTC()
		labels := make([]string, len(in.Labels))
		scores := make([]float32, len(in.Labels))
		for i, l := range in.Labels {
			labels[i], scores[i] = l.Name, l.Score
		}
		out.Inference = &InferenceRow{
			SourceTopic: e.SourceTopic, RequestID: e.RequestID,
			Model: in.Model, ModelVersion: in.ModelVersion, EventTime: eventTime,
			LatencyMs: u32(int64(in.LatencyMs)), PromptTokens: u32(int64(in.PromptTokens)),
			CompletionTokens: u32(int64(in.CompletionTokens)), CachedTokens: u32(int64(in.CachedTokens)),
			RiskScore: in.RiskScore, Labels: labels, LabelScores: scores,
			Status: in.Status, Error: in.Error, Region: in.Region, FinishReason: in.FinishReason,
			EmbeddingDim: u16(len(in.Embedding)), OutputChars: u32(int64(utf8.RuneCountInString(in.OutputText))),
			ModerationStatus: mod.Status, Verdict: mod.Verdict, ModerationRisk: mod.RiskScore,
			Categories: categories, HitCount: u16(len(mod.Hits)),
			SchemaID: e.SchemaID, Epoch: e.Epoch, SourcePartition: e.SourcePartition, SourceOffset: e.SourceOffset,
			IngestTime: e.IngestTime.UTC(), Version: ver, EventTimeMs: in.EventTime.UnixMilli(),
		}
	} else {
		g := e.Gateway
		phase, eventTime = g.Phase, g.EventTime.UTC()
		out.Gateway = &GatewayRow{
			SourceTopic: e.SourceTopic, RequestID: e.RequestID, Phase: g.Phase, EventTime: eventTime,
			TenantID: g.TenantID, UserID: g.UserID, Route: g.Route, Model: g.Model,
			StatusCode: u16(int(g.StatusCode)), LatencyMs: u32(int64(g.LatencyMs)),
			PromptTokens: u32(int64(g.PromptTokens)), CompletionTokens: u32(int64(g.CompletionTokens)),
			PromptChars:      u32(int64(utf8.RuneCountInString(g.PromptText))),
			ResponseChars:    u32(int64(utf8.RuneCountInString(g.ResponseText))),
			ModerationStatus: mod.Status, Verdict: mod.Verdict, ModerationRisk: mod.RiskScore,
			Categories: categories, HitCount: u16(len(mod.Hits)),
			SchemaID: e.SchemaID, Epoch: e.Epoch, SourcePartition: e.SourcePartition, SourceOffset: e.SourceOffset,
			IngestTime: e.IngestTime.UTC(), Version: ver, EventTimeMs: g.EventTime.UnixMilli(),
		}
	}
	for _, h := range mod.Hits {
		out.Hits = append(out.Hits, HitRow{
			SourceTopic: e.SourceTopic, RequestID: e.RequestID, Phase: phase,
			Start: u32(int64(h.Start)), End: u32(int64(h.End)), Word: h.Word, Category: h.Category,
			EventTime: eventTime, Epoch: e.Epoch, SourcePartition: e.SourcePartition, SourceOffset: e.SourceOffset,
			Version: ver,
		})
	}
	return out, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func u32(v int64) uint32 { return uint32(min(max(v, 0), math.MaxUint32)) }
func u16(v int) uint16   { return uint16(min(max(v, 0), math.MaxUint16)) }

// Table names the migrations create.
const (
	TableInference  = "inference_results"
	TableGateway    = "gateway_logs"
	TableHits       = "moderation_hits"
	TableLedger     = "sink_ledger"
	ViewInference   = "v_inference_results"
	ViewGateway     = "v_gateway_logs"
	ViewModerations = "v_moderation_hits"
)
