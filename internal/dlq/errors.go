package dlq

import "errors"

var (
	// ErrMissingHeader: a record lacks one of the DLQ headers Decode needs; the error names it.
	ErrMissingHeader = errors.New("dlq: missing header")
	// ErrBadHeader: a DLQ header is present but its value does not parse, or it appears twice.
	ErrBadHeader = errors.New("dlq: bad header")
	// ErrInvalidEntry: an Entry cannot be written or re-driven as it is (no origin topic, a
	// negative partition or offset, no DLQ position for a re-drive).
	ErrInvalidEntry = errors.New("dlq: invalid entry")
	// ErrTooLarge: even with the value cut to nothing, the key and headers do not fit
	// Config.MaxMessageBytes. The entry is not written.
	ErrTooLarge = errors.New("dlq: record too large even without its value")
	// ErrTruncated: the entry's value was cut to fit the DLQ (backflow.error.truncated), so
	// re-driving it would produce a corrupt record. Re-produce it from its origin offset.
	ErrTruncated = errors.New("dlq: value was truncated in the DLQ")
	// ErrUnsafeClient: the client given to NewWriter could lose or duplicate DLQ records
	// (acks other than all, idempotent writes disabled, cancellation of in-flight records
	// allowed) or cannot produce records of MaxMessageBytes.
	ErrUnsafeClient = errors.New("dlq: unsafe producer client")
	// ErrNoTopic: the topic to read does not exist.
	ErrNoTopic = errors.New("dlq: topic does not exist")
)
