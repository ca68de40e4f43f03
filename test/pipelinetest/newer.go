package pipelinetest

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	hamba "github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/avro"
)

// NewerWriter is schema's canonical form as a newer producer would write it: the enum called
// enum (its full name) with one more symbol, symbol, that this version does not know.
func NewerWriter(schema hamba.Schema, enum, symbol string) (string, error) {
	re := regexp.MustCompile(`("name":"` + regexp.QuoteMeta(enum) + `","type":"enum","symbols":\[[^\]]*)\]`)
	text := schema.String()
	if !re.MatchString(text) {
		return "", fmt.Errorf("no enum %s in %.80s…", enum, text)
	}
	return re.ReplaceAllString(text, `${1},"`+symbol+`"]`), nil
}

// NewerStatuses returns a RunWith producer that writes n inference results of model with
// status, a symbol the reader's InferenceStatus lacks, in the newer writer schema of
// NewerWriter, keyed by the request ids it also returns, with event times in the minute before now.
func NewerStatuses(n int, model, status string) (func(ctx context.Context, d *Data) error, []string) {
	ids := newerIDs("status", status, n)
	return func(ctx context.Context, d *Data) error {
		at := time.Now().UTC().Add(-time.Minute).Truncate(time.Millisecond)
		var recs []avro.InferenceResult
		for i, id := range ids {
			recs = append(recs, avro.InferenceResult{RequestID: id, Model: model, ModelVersion: "v3", EventTime: at.Add(time.Duration(i) * time.Millisecond),
				LatencyMs: 100, PromptTokens: 10, CompletionTokens: 20, Labels: []avro.Label{}, OutputText: "cancelled by the client", Status: status})
		}
		return produceNewer(ctx, d, d.Ingest.InferenceTopic, avro.InferenceResultSchema, "dev.backflow.inference.InferenceStatus", status, recs,
			func(r avro.InferenceResult) string { return r.RequestID })
	}, ids
}

// NewerPhases returns a RunWith producer that writes, for each of n request ids it also
// returns, one gateway RESPONSE and one record of phase, a symbol the reader's Phase lacks,
// both in the newer writer schema of NewerWriter, for tenant and model.
func NewerPhases(n int, tenant, model, phase string) (func(ctx context.Context, d *Data) error, []string) {
	ids := newerIDs("phase", phase, n)
	return func(ctx context.Context, d *Data) error {
		at := time.Now().UTC().Add(-time.Minute).Truncate(time.Millisecond)
		var recs []avro.GatewayLog
		for i, id := range ids {
			for _, ph := range []string{avro.PhaseResponse, phase} {
				recs = append(recs, avro.GatewayLog{RequestID: id, Phase: ph, EventTime: at.Add(time.Duration(i) * time.Millisecond), TenantID: tenant,
					UserID: "user-newer", Route: "/v1/chat/completions", Model: model, StatusCode: 200, LatencyMs: 100})
			}
		}
		return produceNewer(ctx, d, d.Ingest.GatewayTopic, avro.GatewayLogSchema, "dev.backflow.gateway.Phase", phase, recs,
			func(r avro.GatewayLog) string { return r.RequestID })
	}, ids
}

func newerIDs(kind, symbol string, n int) []string {
	var ids []string
	for i := range n {
		ids = append(ids, fmt.Sprintf("newer-%s-%s-%03d", kind, strings.ToLower(symbol), i))
	}
	return ids
}

// produceNewer writes recs to topic, keyed by key, in schema's newer writer form with symbol
// added to enum, registered under the topic's subject.
func produceNewer[T any](ctx context.Context, d *Data, topic string, schema hamba.Schema, enum, symbol string, recs []T, key func(T) string) error {
	text, err := NewerWriter(schema, enum, symbol)
	if err != nil {
		return err
	}
	enc, err := avro.NewTextEncoder[T](d.Registry, text, avro.TopicName.Subject(topic, nil))
	if err != nil {
		return fmt.Errorf("newer writer schema of %s: %w", topic, err)
	}
	cl, err := d.Kafka.NewClient(kgo.DefaultProduceTopic(topic))
	if err != nil {
		return err
	}
	defer cl.Close()
	var out []*kgo.Record
	for _, r := range recs {
		b, err := enc.Encode(ctx, r)
		if err != nil {
			return fmt.Errorf("encode %s: %w", key(r), err)
		}
		out = append(out, &kgo.Record{Key: []byte(key(r)), Value: b})
	}
	if err := cl.ProduceSync(ctx, out...).FirstErr(); err != nil {
		return fmt.Errorf("produce %d records with %s %s to %s: %w", len(out), enum, symbol, topic, err)
	}
	return nil
}
