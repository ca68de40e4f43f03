package avro

import (
	_ "embed"
	"fmt"

	"github.com/hamba/avro/v2"
)

// The schemas backflow reads and writes, kept as documented .avsc files under schemas/.
var (
	//go:embed schemas/inference_result.v1.avsc
	inferenceResultV1Text string
	//go:embed schemas/inference_result.v2.avsc
	inferenceResultV2Text string
	//go:embed schemas/gateway_log.avsc
	gatewayLogText string
	//go:embed schemas/enriched.avsc
	enrichedText string
)

// Parsed schemas. InferenceResultV2 is the current reader schema of model-inference-result:
// records written with V1 decode into the same Go type (InferenceResult) through schema
// resolution. Enriched inlines the current InferenceResult and GatewayLog definitions, so its
// String() is self-contained and can be registered without schema references.
var (
	InferenceResultV1 = mustParse(inferenceResultV1Text)
	InferenceResultV2 = mustParse(inferenceResultV2Text)
	GatewayLogSchema  = mustParse(gatewayLogText)
	EnrichedSchema    = mustParse(enrichedText, inferenceResultV2Text, gatewayLogText)
)

// InferenceResultSchema is the current (reader) schema of model-inference-result.
var InferenceResultSchema = InferenceResultV2

// mustParse parses text after its dependencies, in a cache of its own: V1 and V2 share a full
// name, and hamba's global cache would hand one out for the other.
func mustParse(text string, deps ...string) avro.Schema {
	cache := &avro.SchemaCache{}
	for _, d := range deps {
		if _, err := avro.ParseWithCache(d, "", cache); err != nil {
			panic(fmt.Sprintf("avro: embedded dependency schema: %v", err))
		}
	}
	s, err := avro.ParseWithCache(text, "", cache)
	if err != nil {
		panic(fmt.Sprintf("avro: embedded schema: %v", err))
	}
	return s
}
