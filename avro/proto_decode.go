package avro

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// ProtoDecoder decodes Protobuf values in the Confluent wire format (magic byte 0, schema id,
// the message indexes, the message) of one message type into the map[string]any a
// GenericDecoder gives for the Avro record the message maps to (ProtoSchema), so the
// schema engine fills a table from either alike. Each writer schema is fetched by id once
// (with its references) and compiled; its message of the stream's name is its Avro shape
// (Writer). A value is read with its writer's descriptor and shaped by the reader (the newest
// record the table follows): a field the writer lacks gets its zero value, as Protobuf gives
// it. Errors are *DecodeError, classified as GenericDecoder's are. Safe for concurrent use.
type ProtoDecoder struct {
	cfg     DecoderConfig
	message string // full name of the stream's message
	writers *writerSchemas

	mu    sync.RWMutex
	files map[int]protoreflect.FileDescriptor // writer id → its compiled file
}

// NewProtoDecoder returns a ProtoDecoder over reg for the message named message (its full
// name).
func NewProtoDecoder(reg Registry, cfg DecoderConfig, message string) (*ProtoDecoder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if reg == nil || message == "" {
		return nil, errors.New("avro: new protobuf decoder: registry and message are required")
	}
	cfg = cfg.withDefaults()
	d := &ProtoDecoder{cfg: cfg, message: message, files: map[int]protoreflect.FileDescriptor{}}
	d.writers = newWriterSchemas(reg, cfg.UnknownIDTTL, nil)
	d.writers.parse = func(ctx context.Context, id int, got sr.Schema) (avro.Schema, error) {
		f, err := CompileProto(ctx, reg, id, got)
		if err != nil {
			return nil, err
		}
		m, err := ProtoMessage(f, message)
		if err != nil {
			return nil, &DecodeError{Kind: ErrIncompatibleSchema, SchemaID: id, Err: err}
		}
		s, err := ProtoSchema(m)
		if err != nil {
			return nil, &DecodeError{Kind: ErrIncompatibleSchema, SchemaID: id, Err: err}
		}
		d.mu.Lock()
		d.files[id] = f
		d.mu.Unlock()
		return s, nil
	}
	return d, nil
}

// Frame checks a value's size and frame and returns its writer schema id and the rest (the
// message indexes, then the message).
func (d *ProtoDecoder) Frame(b []byte) (int, []byte, error) {
	if len(b) > d.cfg.MaxRecordBytes {
		return 0, nil, &DecodeError{Kind: ErrOversized, Err: fmt.Errorf("%d bytes, limit %d", len(b), d.cfg.MaxRecordBytes)}
	}
	return Unframe(b)
}

// Writer is the Avro shape of the stream's message in the schema registered under id. An id
// the registry does not know is ErrUnknownSchemaID; one it could not be asked about
// ErrRegistryUnavailable (IsRetryable); a schema that is not Protobuf, does not compile or
// lacks the message ErrIncompatibleSchema.
func (d *ProtoDecoder) Writer(ctx context.Context, id int) (avro.Schema, error) {
	return d.writers.get(ctx, id)
}

// maxMessageIndexes bounds the message-index array: deeper nesting is not a real schema.
const maxMessageIndexes = 32

// Decode reads body (message indexes, then the message), written with the schema id (which
// Writer fetched), into a map shaped by reader (nil: the writer's shape). A body whose
// indexes or message do not parse is ErrCorrupt; indexes naming another message than the
// stream's ErrInvalid; a value no column of reader's can hold (an enum number the schema
// does not declare, a uint64 past int64) ErrInvalid.
func (d *ProtoDecoder) Decode(id int, body []byte, writer, reader avro.Schema) (map[string]any, error) {
	d.mu.RLock()
	f := d.files[id]
	d.mu.RUnlock()
	if f == nil {
		return nil, &DecodeError{Kind: ErrIncompatibleSchema, SchemaID: id, Err: errors.New("writer schema not fetched")}
	}
	var h sr.ConfluentHeader
	idx, msg, err := h.DecodeIndex(body, maxMessageIndexes)
	if err != nil {
		return nil, &DecodeError{Kind: ErrCorrupt, SchemaID: id, Err: fmt.Errorf("message indexes: %w", err)}
	}
	md, err := indexedMessage(f, idx)
	if err != nil {
		return nil, &DecodeError{Kind: ErrCorrupt, SchemaID: id, Err: err}
	}
	if string(md.FullName()) != d.message {
		return nil, &DecodeError{Kind: ErrInvalid, SchemaID: id, Err: fmt.Errorf("a %s message, the stream reads %s", md.FullName(), d.message)}
	}
	m := dynamicpb.NewMessage(md)
	// Partial: a proto2 required field left out reads as its zero value (and the check costs).
	if err := (proto.UnmarshalOptions{DiscardUnknown: true, AllowPartial: true}).Unmarshal(msg, m); err != nil {
		return nil, &DecodeError{Kind: ErrCorrupt, SchemaID: id, Err: err}
	}
	if reader == nil {
		reader = writer
	}
	rec, ok := deref(reader).(*avro.RecordSchema)
	if !ok {
		return nil, &DecodeError{Kind: ErrIncompatibleSchema, SchemaID: id, Err: fmt.Errorf("the reader schema is a %s, not a record", reader.Type())}
	}
	out, err := protoRecord(rec, m)
	if err != nil {
		return nil, &DecodeError{Kind: ErrInvalid, SchemaID: id, Err: err}
	}
	return out, nil
}

// indexedMessage follows the Confluent message indexes: the top-level message at the first,
// then the nested one at each next.
func indexedMessage(f protoreflect.FileDescriptor, idx []int) (protoreflect.MessageDescriptor, error) {
	msgs := f.Messages()
	var md protoreflect.MessageDescriptor
	for _, i := range idx {
		if i < 0 || i >= msgs.Len() {
			return nil, fmt.Errorf("message index %v: no message at %d", idx, i)
		}
		md = msgs.Get(i)
		msgs = md.Messages()
	}
	if md == nil {
		return nil, errors.New("empty message index")
	}
	return md, nil
}

func deref(s avro.Schema) avro.Schema {
	if r, ok := s.(*avro.RefSchema); ok {
		return r.Schema()
	}
	return s
}

// protoRecord is m as a map shaped by rec: each of rec's fields from m's field of that name,
// or its zero value where m has none.
func protoRecord(rec *avro.RecordSchema, m protoreflect.Message) (map[string]any, error) {
	out := make(map[string]any, len(rec.Fields()))
	fds := m.Descriptor().Fields()
	for _, f := range rec.Fields() {
		fd := fds.ByName(protoreflect.Name(f.Name()))
		if fd == nil {
			out[f.Name()] = fieldZero(f)
			continue
		}
		v, err := protoField(f.Type(), fd, m)
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", f.Name(), err)
		}
		out[f.Name()] = v
	}
	return out, nil
}

// protoField is the value of m's field fd as s (the Avro type of the field) holds it.
func protoField(s avro.Schema, fd protoreflect.FieldDescriptor, m protoreflect.Message) (any, error) {
	s = deref(s)
	switch t := s.(type) {
	case *avro.UnionSchema:
		if !fd.IsList() && !fd.IsMap() && !m.Has(fd) {
			return nil, nil
		}
		for _, u := range t.Types() {
			if u.Type() != avro.Null {
				v, err := protoField(u, fd, m)
				return branched(u, v), err
			}
		}
		return nil, nil
	case *avro.ArraySchema:
		if !fd.IsList() {
			return nil, fmt.Errorf("not a repeated field")
		}
		list := m.Get(fd).List()
		out := make([]any, list.Len())
		for i := range list.Len() {
			v, err := protoSingle(t.Items(), fd, list.Get(i))
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	case *avro.MapSchema:
		if !fd.IsMap() {
			return nil, fmt.Errorf("not a map field")
		}
		out := map[string]any{}
		var err error
		m.Get(fd).Map().Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
			out[k.String()], err = protoSingle(t.Values(), fd.MapValue(), v)
			return err == nil
		})
		return out, err
	}
	if fd.IsList() || fd.IsMap() {
		return nil, fmt.Errorf("a repeated field where the table has one value")
	}
	if fd.Message() != nil && s.Type() == avro.String && !m.Has(fd) {
		return "", nil // a message held as JSON text, unset
	}
	return protoSingle(s, fd, m.Get(fd))
}

// protoSingle is one value of fd's kind as s holds it.
func protoSingle(s avro.Schema, fd protoreflect.FieldDescriptor, v protoreflect.Value) (any, error) {
	s = deref(s)
	if u, ok := s.(*avro.UnionSchema); ok { // a wrapper's element: ["null", T]
		for _, x := range u.Types() {
			if x.Type() != avro.Null {
				s = x
			}
		}
	}
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return protoMessage(s, v.Message())
	case protoreflect.EnumKind:
		ev := fd.Enum().Values().ByNumber(v.Enum())
		if ev == nil {
			return nil, fmt.Errorf("enum %s has no value numbered %d", fd.Enum().FullName(), v.Enum())
		}
		return string(ev.Name()), nil
	case protoreflect.BoolKind:
		return v.Bool(), nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return int32(v.Int()), nil
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return v.Int(), nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		if v.Uint() > math.MaxInt64 {
			return nil, fmt.Errorf("%d is past the largest Int64", v.Uint())
		}
		return int64(v.Uint()), nil
	case protoreflect.FloatKind:
		return float32(v.Float()), nil
	case protoreflect.DoubleKind:
		return v.Float(), nil
	case protoreflect.StringKind:
		return v.String(), nil
	case protoreflect.BytesKind:
		return v.Bytes(), nil
	}
	return nil, fmt.Errorf("kind %s has no value here", fd.Kind())
}

// protoMessage is a message value as s holds it: a record, a timestamp, JSON text, or a
// wrapper's value.
func protoMessage(s avro.Schema, m protoreflect.Message) (any, error) {
	full := m.Descriptor().FullName()
	switch t := s.(type) {
	case *avro.RecordSchema:
		return protoRecord(t, m)
	case *avro.PrimitiveSchema:
		switch {
		case full == protoTimestamp:
			fs := m.Descriptor().Fields()
			return time.Unix(m.Get(fs.ByName("seconds")).Int(), m.Get(fs.ByName("nanos")).Int()).UTC(), nil
		case isProtoWrapper(m.Descriptor()):
			fd := m.Descriptor().Fields().ByName("value")
			return protoSingle(s, fd, m.Get(fd))
		case t.Type() == avro.String:
			b, err := protojson.Marshal(m.Interface())
			return string(b), err
		}
	}
	return nil, fmt.Errorf("message %s does not fit %s", full, s.Type())
}

// branched is v, the value of union branch s, as hamba/avro decodes a union into an any: keyed
// by the branch's name for a named type (record, enum, fixed), by "array" or "map" for those,
// bare for a primitive. The schema engine takes the values in that shape.
func branched(s avro.Schema, v any) any {
	if v == nil {
		return nil
	}
	switch x := deref(s).(type) {
	case avro.NamedSchema:
		return map[string]any{x.FullName(): v}
	case *avro.ArraySchema, *avro.MapSchema:
		return map[string]any{string(x.Type()): v}
	}
	return v
}

// fieldZero is what field f reads as when the writer did not have it: its default for an
// enum (the value numbered 0), else its type's zero value.
func fieldZero(f *avro.Field) any {
	if sym, ok := f.Default().(string); ok && f.HasDefault() && deref(f.Type()).Type() == avro.Enum {
		return sym
	}
	return zeroValue(f.Type())
}

// zeroValue is what a field of type s reads as when the writer did not have it: null for a
// union, a record of zero values, the empty array or map, the first enum symbol (the
// default, for a schema ProtoSchema made, is the field's own), and each scalar's zero.
func zeroValue(s avro.Schema) any {
	s = deref(s)
	switch t := s.(type) {
	case *avro.UnionSchema:
		return nil
	case *avro.RecordSchema:
		out := make(map[string]any, len(t.Fields()))
		for _, f := range t.Fields() {
			out[f.Name()] = fieldZero(f)
		}
		return out
	case *avro.ArraySchema:
		return []any{}
	case *avro.MapSchema:
		return map[string]any{}
	case *avro.EnumSchema:
		return t.Symbols()[0]
	}
	if ls, ok := s.(avro.LogicalTypeSchema); ok && ls.Logical() != nil {
		switch ls.Logical().Type() {
		case avro.TimestampMicros, avro.TimestampMillis, avro.Date:
			return time.Unix(0, 0).UTC()
		}
	}
	switch s.Type() {
	case avro.Boolean:
		return false
	case avro.Int:
		return int32(0)
	case avro.Long:
		return int64(0)
	case avro.Float:
		return float32(0)
	case avro.Double:
		return float64(0)
	case avro.Bytes:
		return []byte{}
	}
	return ""
}
