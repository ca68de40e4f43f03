package avro

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/backflowhq/backflow/internal/dlq"
)

// Sentinels for every way a value can fail to decode. A *DecodeError wraps exactly one of
// them (test with errors.Is) together with the cause. All but ErrRegistryUnavailable are
// properties of the record itself: the record goes to the DLQ. ErrRegistryUnavailable is an
// outage: retry with backoff, never DLQ (IsRetryable).
var (
	// ErrNotFramed: shorter than the 5-byte Confluent header, or the magic byte is not 0.
	ErrNotFramed = errors.New("avro: not in the Confluent wire format")
	// ErrUnknownSchemaID: the registry answered 404 with error code 40403 for the id.
	ErrUnknownSchemaID = errors.New("avro: unknown schema id")
	// ErrRegistryUnavailable: the registry could not be asked (network, timeout, 5xx, 429,
	// 401/403, or a 404 that is not "schema not found", i.e. a wrong URL).
	ErrRegistryUnavailable = errors.New("avro: schema registry unavailable")
	// ErrIncompatibleSchema: the writer schema cannot be parsed or resolved to the reader schema.
	ErrIncompatibleSchema = errors.New("avro: writer schema incompatible with reader schema")
	// ErrCorrupt: the Avro body is truncated, malformed, or has bytes left over.
	ErrCorrupt = errors.New("avro: corrupt or truncated body")
	// ErrInvalid: the record decoded but breaks an invariant (empty requestId, absurd time).
	ErrInvalid = errors.New("avro: invalid record")
	// ErrOversized: the value is larger than the configured maximum.
	ErrOversized = errors.New("avro: record too large")
)

// Error classes, as written to the DLQ's backflow.error.class header.
const (
	ClassNotFramed           = "not_framed"
	ClassUnknownSchema       = "unknown_schema"
	ClassRegistryUnavailable = "registry_unavailable"
	ClassIncompatibleSchema  = "incompatible_schema"
	ClassCorrupt             = "corrupt"
	ClassInvalid             = "invalid"
	ClassOversized           = "oversized"
)

func init() {
	for name, doc := range map[string]string{
		ClassNotFramed:          "not in the Confluent wire format: a bad magic byte, or too short",
		ClassUnknownSchema:      "the registry has no schema with the record's id",
		ClassIncompatibleSchema: "the writer schema cannot be resolved to the reader schema",
		ClassCorrupt:            "the body (Avro, Protobuf with its message indexes, or JSON text) does not decode with its writer schema (truncated or garbage)",
		ClassInvalid:            "decoded, but a required field is missing or out of range (requestId, timestamps), or a JSON value its schema rejects",
		ClassOversized:          "larger than the record size limit",
	} {
		dlq.RegisterClass(name, doc)
	}
}

var classes = map[error]string{
	ErrNotFramed:           ClassNotFramed,
	ErrUnknownSchemaID:     ClassUnknownSchema,
	ErrRegistryUnavailable: ClassRegistryUnavailable,
	ErrIncompatibleSchema:  ClassIncompatibleSchema,
	ErrCorrupt:             ClassCorrupt,
	ErrInvalid:             ClassInvalid,
	ErrOversized:           ClassOversized,
}

// DecodeError says why a value did not decode.
type DecodeError struct {
	Kind     error // one of the Err* sentinels above
	SchemaID int   // the framed schema id, 0 when not read
	Err      error // the cause, may be nil
}

func (e *DecodeError) Error() string {
	msg := e.Kind.Error()
	if e.SchemaID != 0 {
		msg += fmt.Sprintf(" (schema id %d)", e.SchemaID)
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the sentinel and the cause, so errors.Is works for both.
func (e *DecodeError) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

// ErrorClass names the kind for the DLQ (see the Class* constants).
func (e *DecodeError) ErrorClass() string { return classes[e.Kind] }

// IsRetryable reports whether err is an outage to wait out (registry unavailable, or the
// context ending) rather than a property of the record. Retryable errors never go to the DLQ.
func IsRetryable(err error) bool {
	return errors.Is(err, ErrRegistryUnavailable) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// classifyRegistryErr turns an error of the registry client into ErrUnknownSchemaID (the
// schema really does not exist: the record is bad) or ErrRegistryUnavailable (anything else:
// the record may be fine and must wait). The split is deliberately narrow on the permanent
// side: only Confluent's "schema not found" code 40403 is permanent. A bare 404 means a wrong
// URL or path, and sending every record to the DLQ for a typo would lose the stream.
func classifyRegistryErr(id int, err error) error {
	var re *sr.ResponseError
	if errors.As(err, &re) {
		switch {
		case re.StatusCode == http.StatusNotFound && re.ErrorCode == 40403:
			return &DecodeError{Kind: ErrUnknownSchemaID, SchemaID: id, Err: err}
		case re.StatusCode == http.StatusUnauthorized || re.StatusCode == http.StatusForbidden:
			// Credentials are wrong or rotated: an operator fixes them; records must wait.
			return &DecodeError{Kind: ErrRegistryUnavailable, SchemaID: id, Err: fmt.Errorf("registry refused our credentials (HTTP %d): %w", re.StatusCode, err)}
		}
	}
	// Network errors, timeouts, 5xx, 429, and unexpected answers.
	return &DecodeError{Kind: ErrRegistryUnavailable, SchemaID: id, Err: err}
}
