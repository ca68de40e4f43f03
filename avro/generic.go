package avro

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/hamba/avro/v2"
)

// GenericDecoder decodes framed values of any record schema into map[string]any: what a
// declared stream reads, whose shape is its subject's schema rather than a Go type. Each value
// is read with its writer schema (fetched by id, once) resolved to a reader schema the caller
// chooses per writer (Decode's reader), so that older records take the defaults of fields a
// newer schema added. Errors are *DecodeError, classified as Decoder's are. Safe for concurrent
// use.
type GenericDecoder struct {
	reg Registry
	cfg DecoderConfig

	writers *writerSchemas // id → writer schema

	mu       sync.RWMutex
	resolved map[[2]string]avro.Schema
}

// NewGenericDecoder returns a GenericDecoder over reg.
func NewGenericDecoder(reg Registry, cfg DecoderConfig) (*GenericDecoder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if reg == nil {
		return nil, errors.New("avro: new generic decoder: registry is required")
	}
	cfg = cfg.withDefaults()
	return &GenericDecoder{reg: reg, cfg: cfg, writers: newWriterSchemas(reg, cfg.UnknownIDTTL, nil),
		resolved: map[[2]string]avro.Schema{}}, nil
}

// Frame checks a value's size and frame and returns its writer schema id and body.
func (d *GenericDecoder) Frame(b []byte) (int, []byte, error) {
	if len(b) > d.cfg.MaxRecordBytes {
		return 0, nil, &DecodeError{Kind: ErrOversized, Err: fmt.Errorf("%d bytes, limit %d", len(b), d.cfg.MaxRecordBytes)}
	}
	return Unframe(b)
}

// Writer returns the writer schema registered under id. An id the registry does not know is
// ErrUnknownSchemaID (remembered for UnknownIDTTL); one it could not be asked about is
// ErrRegistryUnavailable (IsRetryable).
func (d *GenericDecoder) Writer(ctx context.Context, id int) (avro.Schema, error) {
	return d.writers.get(ctx, id)
}

// Decode decodes body, written with writer, as reader (the same schema, or a newer one the
// writer resolves to) into a map. A body that does not decode is ErrCorrupt; a writer that
// does not resolve to reader ErrIncompatibleSchema.
func (d *GenericDecoder) Decode(id int, body []byte, writer, reader avro.Schema) (map[string]any, error) {
	schema := writer
	if reader != nil && reader.Fingerprint() != writer.Fingerprint() {
		key := [2]string{string(fp(reader)), string(fp(writer))}
		d.mu.RLock()
		r, ok := d.resolved[key]
		d.mu.RUnlock()
		if !ok {
			var err error
			if r, err = avro.NewSchemaCompatibility().Resolve(reader, writer); err != nil {
				return nil, &DecodeError{Kind: ErrIncompatibleSchema, SchemaID: id, Err: err}
			}
			d.mu.Lock()
			d.resolved[key] = r
			d.mu.Unlock()
		}
		schema = r
	}
	rd := avro.NewReader(nil, 0)
	rd.Reset(body)
	var v any
	rd.ReadVal(schema, &v)
	if rd.Error != nil {
		err := rd.Error
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("body ends early: %w", io.ErrUnexpectedEOF)
		}
		return nil, &DecodeError{Kind: ErrCorrupt, SchemaID: id, Err: err}
	}
	rd.Peek()
	if rd.Error == nil {
		return nil, &DecodeError{Kind: ErrCorrupt, SchemaID: id, Err: errors.New("bytes left over after the record")}
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &DecodeError{Kind: ErrIncompatibleSchema, SchemaID: id, Err: fmt.Errorf("the schema is a %s, not a record", writer.Type())}
	}
	return m, nil
}

func fp(s avro.Schema) []byte {
	f := s.Fingerprint()
	return f[:]
}
