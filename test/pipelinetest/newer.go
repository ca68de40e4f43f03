package pipelinetest

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/avro"
)

// statusSymbols finds the InferenceStatus symbol list in a schema's canonical form.
var statusSymbols = regexp.MustCompile(`("name":"dev\.backflow\.inference\.InferenceStatus","type":"enum","symbols":\[[^\]]*)\]`)

// NewerStatusWriter is the current inference result schema as a newer producer would write
// it: InferenceStatus with one more symbol, status, that this version does not know.
func NewerStatusWriter(status string) (string, error) {
	text := avro.InferenceResultSchema.String()
	if !statusSymbols.MatchString(text) {
		return "", fmt.Errorf("no InferenceStatus symbols in %.80s…", text)
	}
	return statusSymbols.ReplaceAllString(text, `${1},"`+status+`"]`), nil
}

// NewerStatuses returns a RunWith producer that writes n inference results of model with
// status, in the newer writer schema of NewerStatusWriter, keyed by the request ids it also
// returns, with event times in the minute before now.
func NewerStatuses(n int, model, status string) (func(ctx context.Context, d *Data) error, []string) {
	var ids []string
	for i := range n {
		ids = append(ids, fmt.Sprintf("newer-%s-%03d", strings.ToLower(status), i))
	}
	return func(ctx context.Context, d *Data) error {
		text, err := NewerStatusWriter(status)
		if err != nil {
			return err
		}
		enc, err := avro.NewTextEncoder[avro.InferenceResult](d.Registry, text, avro.TopicName.Subject(d.Ingest.InferenceTopic, nil))
		if err != nil {
			return fmt.Errorf("newer writer schema: %w", err)
		}
		cl, err := d.Kafka.NewClient(kgo.DefaultProduceTopic(d.Ingest.InferenceTopic))
		if err != nil {
			return err
		}
		defer cl.Close()
		at := time.Now().UTC().Add(-time.Minute).Truncate(time.Millisecond)
		var recs []*kgo.Record
		for i, id := range ids {
			b, err := enc.Encode(ctx, avro.InferenceResult{RequestID: id, Model: model, ModelVersion: "v3", EventTime: at.Add(time.Duration(i) * time.Millisecond),
				LatencyMs: 100, PromptTokens: 10, CompletionTokens: 20, Labels: []avro.Label{}, OutputText: "cancelled by the client", Status: status})
			if err != nil {
				return fmt.Errorf("encode %s: %w", id, err)
			}
			recs = append(recs, &kgo.Record{Key: []byte(id), Value: b})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return fmt.Errorf("produce %d records with status %s: %w", len(recs), status, err)
		}
		return nil
	}, ids
}
