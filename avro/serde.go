package avro

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/backflowhq/backflow/internal/conf"
)

// Registry is the part of a schema-registry client the serde uses. *sr.Client implements it.
type Registry interface {
	SchemaByID(ctx context.Context, id int) (sr.Schema, error)
	RegisterSchema(ctx context.Context, subject string, s sr.Schema, id, version int) (int, error)
	LookupSchema(ctx context.Context, subject string, s sr.Schema) (sr.SubjectSchema, error)
	// SchemaByVersion fetches the schemas a Protobuf schema references (by subject and version).
	SchemaByVersion(ctx context.Context, subject string, version int) (sr.SubjectSchema, error)
}

var _ Registry = (*sr.Client)(nil)

// DefaultMaxRecordBytes is the largest value Decoder accepts by default.
const DefaultMaxRecordBytes = 512 << 10

// DecoderConfig tunes a Decoder.
type DecoderConfig struct {
	// MaxRecordBytes rejects larger values with ErrOversized before any other work.
	// Default: DefaultMaxRecordBytes (512 KiB), which its default tag says too.
	MaxRecordBytes int `key:"max_record_bytes" default:"524288" doc:"larger source values go to the DLQ as oversized"`
	// Now is the clock Validate runs against. Default: time.Now.
	Now func() time.Time
	// UnknownIDTTL is how long the registry's "no such schema" answer (40403) for an id is
	// remembered: records with that id fail with ErrUnknownSchemaID without asking again, so a
	// burst of them costs one registry request, not one each. A schema registered under the
	// id later is found once the answer expires. Default: DefaultUnknownIDTTL (10 s);
	// negative: never remembered.
	UnknownIDTTL time.Duration
}

// DefaultUnknownIDTTL is the default of DecoderConfig.UnknownIDTTL.
const DefaultUnknownIDTTL = 10 * time.Second

func (c DecoderConfig) withDefaults() DecoderConfig {
	conf.FillDefaults(&c) // MaxRecordBytes
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.UnknownIDTTL == 0 {
		c.UnknownIDTTL = DefaultUnknownIDTTL
	}
	return c
}

// Validate reports a bad field as a conf.FieldError naming it and its value.
func (c DecoderConfig) Validate() error {
	if c.MaxRecordBytes < 0 {
		return conf.Errorf("MaxRecordBytes", "avro: max record bytes: %d is negative", c.MaxRecordBytes)
	}
	return nil
}

// Decoder turns Confluent-framed Avro values into T. It fetches each writer schema from the
// registry once by id, resolves it against the reader schema, and caches the result, so
// records written with older or newer compatible schemas decode into the same T. An id the
// registry does not know is remembered for UnknownIDTTL. If *T
// implements Validator, every decoded value is validated. A Decoder is safe for concurrent
// use; concurrent first sightings of one id cost a single registry request.
type Decoder[T any] struct {
	reg    Registry
	reader avro.Schema
	cfg    DecoderConfig

	writers *writerSchemas // writer id -> schema resolved against reader
	readers sync.Pool
}

// NewDecoder returns a Decoder into T with reader as the reader schema.
func NewDecoder[T any](reg Registry, reader avro.Schema, cfg DecoderConfig) (*Decoder[T], error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if reg == nil || reader == nil {
		return nil, errors.New("avro: new decoder: registry and reader schema are required")
	}
	d := &Decoder[T]{reg: reg, reader: reader, cfg: cfg.withDefaults()}
	d.writers = newWriterSchemas(reg, d.cfg.UnknownIDTTL, func(id int, writer avro.Schema) (avro.Schema, error) {
		resolved, err := avro.NewSchemaCompatibility().Resolve(reader, writer)
		if err != nil {
			return nil, &DecodeError{Kind: ErrIncompatibleSchema, SchemaID: id, Err: err}
		}
		return resolved, nil
	})
	d.readers.New = func() any { return avro.NewReader(nil, 0) }
	return d, nil
}

// Decode decodes one framed value. It returns the writer schema id with the value. Errors are
// *DecodeError; use IsRetryable to tell an outage (wait) from a bad record (DLQ).
func (d *Decoder[T]) Decode(ctx context.Context, b []byte) (T, int, error) {
	var v T
	if len(b) > d.cfg.MaxRecordBytes {
		return v, 0, &DecodeError{Kind: ErrOversized, Err: fmt.Errorf("%d bytes, limit %d", len(b), d.cfg.MaxRecordBytes)}
	}
	id, body, err := Unframe(b)
	if err != nil {
		return v, 0, err
	}
	schema, err := d.writers.get(ctx, id)
	if err != nil {
		return v, id, err
	}
	if err := d.unmarshal(schema, body, &v); err != nil {
		return v, id, &DecodeError{Kind: ErrCorrupt, SchemaID: id, Err: err}
	}
	if val, ok := any(&v).(Validator); ok {
		if err := val.Validate(d.cfg.Now()); err != nil {
			return v, id, &DecodeError{Kind: ErrInvalid, SchemaID: id, Err: err}
		}
	}
	return v, id, nil
}

// unmarshal decodes body completely: unlike avro.Unmarshal, a body that ends early is an
// error (hamba treats io.EOF as success), and so are bytes left over.
func (d *Decoder[T]) unmarshal(schema avro.Schema, body []byte, v *T) error {
	r := d.readers.Get().(*avro.Reader)
	defer func() {
		r.Reset(nil)
		r.Error = nil
		d.readers.Put(r)
	}()
	r.Reset(body)
	r.Error = nil
	r.ReadVal(schema, v)
	if r.Error != nil {
		if errors.Is(r.Error, io.EOF) {
			return fmt.Errorf("body ends early: %w", io.ErrUnexpectedEOF)
		}
		return r.Error
	}
	r.Peek() // sets r.Error to io.EOF when nothing is left
	if r.Error == nil {
		return errors.New("bytes left over after the record")
	}
	return nil
}

// unknownID is a remembered "no such schema" answer.
type unknownID struct {
	err   error
	until time.Time
}

// SubjectStrategy names the registry subject a producer registers its schema under.
type SubjectStrategy int

const (
	// TopicName: "<topic>-value" (Confluent's default).
	TopicName SubjectStrategy = iota
	// RecordName: the record's full name, e.g. "dev.backflow.gateway.GatewayLog".
	RecordName
	// TopicRecordName: "<topic>-<full name>".
	TopicRecordName
)

// ParseSubjectStrategy accepts "topic", "record" and "topic-record" (and Confluent's class
// names TopicNameStrategy, RecordNameStrategy, TopicRecordNameStrategy).
func ParseSubjectStrategy(s string) (SubjectStrategy, error) {
	switch s {
	case "", "topic", "TopicNameStrategy":
		return TopicName, nil
	case "record", "RecordNameStrategy":
		return RecordName, nil
	case "topic-record", "TopicRecordNameStrategy":
		return TopicRecordName, nil
	}
	return 0, fmt.Errorf("avro: subject strategy: %q, want topic, record or topic-record", s)
}

// Subject returns the subject for a value of schema written to topic.
func (s SubjectStrategy) Subject(topic string, schema avro.Schema) string {
	name := ""
	if n, ok := schema.(avro.NamedSchema); ok {
		name = n.FullName()
	}
	switch s {
	case RecordName:
		return name
	case TopicRecordName:
		return topic + "-" + name
	default:
		return topic + "-value"
	}
}

// Encoder frames values of T written with one schema. It registers the schema under its
// subject on first use (and again after a failed attempt), then reuses the id. Safe for
// concurrent use.
type Encoder[T any] struct {
	reg     Registry
	schema  avro.Schema
	text    string // what is registered: the schema as written, or its canonical form
	subject string

	mu sync.Mutex
	id int
}

// NewEncoder returns an Encoder that writes schema under subject.
func NewEncoder[T any](reg Registry, schema avro.Schema, subject string) (*Encoder[T], error) {
	if reg == nil || schema == nil || subject == "" {
		return nil, errors.New("avro: new encoder: registry, schema and subject are required")
	}
	return &Encoder[T]{reg: reg, schema: schema, text: schema.String(), subject: subject}, nil
}

// NewTextEncoder is NewEncoder for a schema given as written: it registers text itself, with
// its defaults and docs, which the canonical form NewEncoder registers leaves out. A reader
// that follows the subject's evolution (a declared stream adds a field's column only when
// the field has a default) needs them.
func NewTextEncoder[T any](reg Registry, text, subject string) (*Encoder[T], error) {
	schema, err := avro.Parse(text)
	if err != nil {
		return nil, fmt.Errorf("avro: new encoder: %w", err)
	}
	e, err := NewEncoder[T](reg, schema, subject)
	if err != nil {
		return nil, err
	}
	e.text = text
	return e, nil
}

// ID registers the schema if needed and returns its id. Registry errors are classified like
// decode errors: ErrRegistryUnavailable is retryable.
func (e *Encoder[T]) ID(ctx context.Context) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.id != 0 {
		return e.id, nil
	}
	id, err := RegisterSchema(ctx, e.reg, e.subject, sr.Schema{Schema: e.text, Type: sr.TypeAvro})
	if err != nil {
		return 0, err
	}
	e.id = id
	return id, nil
}

// RegisterSchema registers schema (of any type, with its references) under subject and
// returns its id, as Encoder.ID does: a registry that cannot be asked is
// ErrRegistryUnavailable (retryable); a schema the registry rejects an error saying so.
func RegisterSchema(ctx context.Context, reg Registry, subject string, schema sr.Schema) (int, error) {
	id, err := reg.RegisterSchema(ctx, subject, schema, -1, -1)
	if err != nil {
		var re *sr.ResponseError
		if errors.As(err, &re) && re.StatusCode >= 400 && re.StatusCode < 500 && re.StatusCode != 401 && re.StatusCode != 403 && re.StatusCode != 429 {
			// Two producers registering the same new schema at once: some registries (Apicurio)
			// answer the loser 409 "artifact already exists" although the schema is there. If
			// the subject holds our schema, that is success; otherwise the registry rejected
			// it (incompatible or invalid), which no retry can fix.
			if ss, lerr := reg.LookupSchema(ctx, subject, schema); lerr == nil && ss.ID > 0 {
				return ss.ID, nil
			}
			if strings.Contains(re.Message, "already exists") {
				// Apicurio on H2 also answers "already exists" for a registration that lost a
				// table lock to another one (a unique-index clash), and the subject then holds
				// nothing (fault suite #2 caught ingest stopping on it). Nothing was rejected:
				// asking again succeeds, so it is an outage to retry, not a refusal.
				return 0, fmt.Errorf("avro: register schema under %s: the registry says it exists but does not hold it: %w",
					subject, &DecodeError{Kind: ErrRegistryUnavailable, Err: err})
			}
			return 0, fmt.Errorf("avro: register schema under %s: %w", subject, err)
		}
		return 0, fmt.Errorf("avro: register schema under %s: %w", subject, classifyRegistryErr(0, err))
	}
	return id, nil
}

// Subject returns the subject the schema is registered under.
func (e *Encoder[T]) Subject() string { return e.subject }

// Encode returns v framed with the schema id.
func (e *Encoder[T]) Encode(ctx context.Context, v T) ([]byte, error) {
	return e.AppendEncode(ctx, nil, v)
}

// AppendEncode appends v framed with the schema id to dst.
func (e *Encoder[T]) AppendEncode(ctx context.Context, dst []byte, v T) ([]byte, error) {
	id, err := e.ID(ctx)
	if err != nil {
		return nil, err
	}
	w := bodyWriters.Get().(*avro.Writer)
	defer bodyWriters.Put(w)
	w.Reset(nil)
	w.Error = nil
	if w.WriteVal(e.schema, v); w.Error != nil {
		return nil, fmt.Errorf("avro: encode %s: %w", e.subject, w.Error)
	}
	return append(AppendFrame(dst, id), w.Buffer()...), nil
}

// bodyWriters are the writers AppendEncode encodes a body with, before appending it to the
// caller's buffer: avro.Marshal would return each body in a new slice of its own, one
// allocation per record the processors write.
var bodyWriters = sync.Pool{New: func() any { return avro.NewWriter(nil, 512) }}
