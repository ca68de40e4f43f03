package loadgen

import (
	"fmt"
	"strings"

	"github.com/backflowhq/backflow/avro"
)

// PoisonKind is one way loadgen makes a bad record on purpose.
type PoisonKind string

// The poison kinds, each with the decode error class the pipeline must assign it.
const (
	PoisonBadMagic         PoisonKind = "bad_magic"          // first byte not 0          → not_framed
	PoisonShort            PoisonKind = "short"              // fewer than 5 bytes         → not_framed
	PoisonUnknownSchema    PoisonKind = "unknown_schema"     // id the registry never gave → unknown_schema
	PoisonTruncated        PoisonKind = "truncated"          // valid record cut short     → corrupt
	PoisonGarbage          PoisonKind = "garbage"            // valid header, junk body    → corrupt
	PoisonMissingRequestID PoisonKind = "missing_request_id" // requestId ""               → invalid
	PoisonAbsurdTimestamp  PoisonKind = "absurd_timestamp"   // event time in 1970         → invalid
	PoisonOversized        PoisonKind = "oversized"          // above MaxRecordBytes       → oversized
	PoisonRejected         PoisonKind = "rejected"           // JSON its schema rejects    → invalid (JSON Schema streams)
)

// AllPoisonKinds lists every kind of the built-in streams, in the order they rotate
// (PoisonRejected is a JSON Schema stream's only).
var AllPoisonKinds = []PoisonKind{PoisonBadMagic, PoisonShort, PoisonUnknownSchema, PoisonTruncated,
	PoisonGarbage, PoisonMissingRequestID, PoisonAbsurdTimestamp, PoisonOversized}

var poisonClass = map[PoisonKind]string{
	PoisonBadMagic:         avro.ClassNotFramed,
	PoisonShort:            avro.ClassNotFramed,
	PoisonUnknownSchema:    avro.ClassUnknownSchema,
	PoisonTruncated:        avro.ClassCorrupt,
	PoisonGarbage:          avro.ClassCorrupt,
	PoisonMissingRequestID: avro.ClassInvalid,
	PoisonAbsurdTimestamp:  avro.ClassInvalid,
	PoisonOversized:        avro.ClassOversized,
	PoisonRejected:         avro.ClassInvalid,
}

// Class returns the decode error class the pipeline must give this kind of poison.
func (k PoisonKind) Class() string { return poisonClass[k] }

// ParsePoisonKinds reads a comma-separated list ("all" or empty: every kind).
func ParsePoisonKinds(s string) ([]PoisonKind, error) {
	if s == "" || s == "all" {
		return AllPoisonKinds, nil
	}
	var out []PoisonKind
	for _, p := range strings.Split(s, ",") {
		k := PoisonKind(strings.TrimSpace(p))
		if _, ok := poisonClass[k]; !ok {
			return nil, fmt.Errorf("loadgen: poison kind %q is unknown (known: %v)", k, AllPoisonKinds)
		}
		out = append(out, k)
	}
	return out, nil
}

// UnknownSchemaID is the id poison of kind unknown_schema carries. Registries hand out ids
// from 1 upwards, so this one is never given.
const UnknownSchemaID = 2_000_000_000
