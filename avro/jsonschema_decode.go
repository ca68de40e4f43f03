package avro

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/twmb/franz-go/pkg/sr"
)

// JSONDecoder decodes JSON values in the Confluent wire format (magic byte 0, schema id, JSON
// text) into the map[string]any a GenericDecoder gives for the Avro record the schema maps to
// (JSONRecordSchema). Each writer schema is fetched by id once and compiled; a value is
// validated against it, then shaped by the reader (the newest record the table follows): a
// property the value lacks is null (or its type's zero value, for a required one a newer
// schema added). Errors are *DecodeError: JSON that does not parse is ErrCorrupt, a value its
// schema rejects ErrInvalid. Safe for concurrent use.
type JSONDecoder struct {
	cfg     DecoderConfig
	writers *writerSchemas

	mu         sync.RWMutex
	validators map[int]*jsonschema.Schema // writer id → its compiled schema
}

// NewJSONDecoder returns a JSONDecoder over reg.
func NewJSONDecoder(reg Registry, cfg DecoderConfig) (*JSONDecoder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if reg == nil {
		return nil, errors.New("avro: new JSON decoder: registry is required")
	}
	cfg = cfg.withDefaults()
	d := &JSONDecoder{cfg: cfg, validators: map[int]*jsonschema.Schema{}}
	d.writers = newWriterSchemas(reg, cfg.UnknownIDTTL, nil)
	d.writers.parse = func(_ context.Context, id int, got sr.Schema) (avro.Schema, error) {
		v, s, err := CompileJSONSchema(id, got)
		if err != nil {
			return nil, err
		}
		d.mu.Lock()
		d.validators[id] = v
		d.mu.Unlock()
		return s, nil
	}
	return d, nil
}

// CompileJSONSchema compiles a JSON schema for validation and maps it to its Avro record. A
// schema that is not JSON, does not compile or does not map is ErrIncompatibleSchema.
func CompileJSONSchema(id int, got sr.Schema) (*jsonschema.Schema, avro.Schema, error) {
	bad := func(err error) (*jsonschema.Schema, avro.Schema, error) {
		return nil, nil, &DecodeError{Kind: ErrIncompatibleSchema, SchemaID: id, Err: err}
	}
	if got.Type != sr.TypeJSON {
		return bad(fmt.Errorf("schema type %s, want JSON", typeName(got.Type)))
	}
	if len(got.References) > 0 {
		return bad(errors.New("the JSON Schema references other subjects; only references inside it (#/...) are followed"))
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(got.Schema)))
	if err != nil {
		return bad(fmt.Errorf("parse the JSON Schema: %w", err))
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("schema.json", doc); err != nil {
		return bad(err)
	}
	v, err := c.Compile("schema.json")
	if err != nil {
		return bad(fmt.Errorf("compile the JSON Schema: %w", err))
	}
	s, err := JSONRecordSchema(got.Schema)
	if err != nil {
		return bad(err)
	}
	return v, s, nil
}

// Frame checks a value's size and frame and returns its writer schema id and JSON text.
func (d *JSONDecoder) Frame(b []byte) (int, []byte, error) {
	if len(b) > d.cfg.MaxRecordBytes {
		return 0, nil, &DecodeError{Kind: ErrOversized, Err: fmt.Errorf("%d bytes, limit %d", len(b), d.cfg.MaxRecordBytes)}
	}
	return Unframe(b)
}

// Writer is the Avro record of the JSON schema registered under id (errors as
// ProtoDecoder.Writer's).
func (d *JSONDecoder) Writer(ctx context.Context, id int) (avro.Schema, error) {
	return d.writers.get(ctx, id)
}

// Decode parses body, validates it against the schema id (which Writer fetched) and shapes
// it by reader (nil: the writer's shape).
func (d *JSONDecoder) Decode(id int, body []byte, writer, reader avro.Schema) (map[string]any, error) {
	d.mu.RLock()
	v := d.validators[id]
	d.mu.RUnlock()
	if v == nil {
		return nil, &DecodeError{Kind: ErrIncompatibleSchema, SchemaID: id, Err: errors.New("writer schema not fetched")}
	}
	val, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return nil, &DecodeError{Kind: ErrCorrupt, SchemaID: id, Err: fmt.Errorf("not JSON: %w", err)}
	}
	if err := v.Validate(val); err != nil {
		return nil, &DecodeError{Kind: ErrInvalid, SchemaID: id, Err: fmt.Errorf("the schema rejects the value: %w", err)}
	}
	if reader == nil {
		reader = writer
	}
	rec, ok := deref(reader).(*avro.RecordSchema)
	obj, isObj := val.(map[string]any)
	if !ok || !isObj {
		return nil, &DecodeError{Kind: ErrInvalid, SchemaID: id, Err: errors.New("the value is not an object")}
	}
	out, err := jsonRecord(rec, obj)
	if err != nil {
		return nil, &DecodeError{Kind: ErrInvalid, SchemaID: id, Err: err}
	}
	return out, nil
}

func jsonRecord(rec *avro.RecordSchema, obj map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(rec.Fields()))
	for _, f := range rec.Fields() {
		v, ok := obj[f.Name()]
		if !ok {
			out[f.Name()] = fieldZero(f)
			continue
		}
		x, err := jsonValue(f.Type(), v)
		if err != nil {
			return nil, fmt.Errorf("property %s: %w", f.Name(), err)
		}
		out[f.Name()] = x
	}
	return out, nil
}

// jsonValue is a parsed JSON value as s holds it.
func jsonValue(s avro.Schema, v any) (any, error) {
	s = deref(s)
	if u, ok := s.(*avro.UnionSchema); ok {
		if v == nil {
			return nil, nil
		}
		for _, x := range u.Types() {
			if x.Type() != avro.Null {
				val, err := jsonValue(x, v)
				return branched(x, val), err
			}
		}
	}
	switch t := s.(type) {
	case *avro.RecordSchema:
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%T where an object belongs", v)
		}
		return jsonRecord(t, obj)
	case *avro.ArraySchema:
		list, _ := v.([]any)
		out := make([]any, len(list))
		for i, e := range list {
			x, err := jsonValue(t.Items(), e)
			if err != nil {
				return nil, err
			}
			out[i] = x
		}
		return out, nil
	case *avro.MapSchema:
		obj, _ := v.(map[string]any)
		out := make(map[string]any, len(obj))
		for k, e := range obj {
			x, err := jsonValue(t.Values(), e)
			if err != nil {
				return nil, err
			}
			out[k] = x
		}
		return out, nil
	}
	return jsonScalar(s, v)
}

func jsonScalar(s avro.Schema, v any) (any, error) {
	if ls, ok := s.(avro.LogicalTypeSchema); ok && ls.Logical() != nil {
		str, _ := v.(string)
		switch ls.Logical().Type() {
		case avro.TimestampMicros:
			return time.Parse(time.RFC3339Nano, str)
		case avro.Date:
			return time.Parse(time.DateOnly, str)
		}
	}
	switch s.Type() {
	case avro.String:
		if str, ok := v.(string); ok {
			return str, nil
		}
		b, err := json.Marshal(v)
		return string(b), err
	case avro.Enum:
		if str, ok := v.(string); ok {
			return str, nil
		}
	case avro.Long:
		if n, ok := v.(json.Number); ok {
			return n.Int64()
		}
	case avro.Double:
		if n, ok := v.(json.Number); ok {
			return n.Float64()
		}
	case avro.Boolean:
		if b, ok := v.(bool); ok {
			return b, nil
		}
	}
	if v == nil {
		return zeroValue(s), nil
	}
	return nil, fmt.Errorf("%T %v does not fit %s", v, v, s.Type())
}
