package avro

// Protobuf subjects. This package is the Confluent wire format and the registry, whatever the
// schema type: a declared stream whose subject holds a Protobuf schema (schemaType PROTOBUF)
// is read through the same registry client, framing, schema cache and error classes as an
// Avro one, so its decoding sits here rather than in a package of its own. The schema engine
// (sinks/clickhouse/chschema) derives, evolves and fills tables from Avro record schemas; a
// Protobuf message is shown to it as the Avro record it maps to (ProtoSchema), and its values
// decoded into the maps a generic Avro decode gives (ProtoDecoder, proto_decode.go), so one
// engine serves both.
//
// The mapping (docs/streams.md has the table): scalars to their Avro peers (uint32 and the
// 64-bit unsigned kinds to long), enums to enums (symbols in declaration order), messages to
// records, repeated to arrays, maps to maps keyed by the key's text; a field with presence
// (proto3 optional, a member of a oneof) is ["null", T]; google.protobuf.Timestamp is a
// timestamp-micros long, the wrappers (Int64Value, StringValue, ...) are ["null", T], and
// Struct, Value, ListValue, Any and a message that contains itself are a string holding the
// value as JSON. Every field has its type's zero value as its default, as Protobuf gives it
// to a reader that does not find it, so a field a newer schema adds is an ADD COLUMN.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/bufbuild/protocompile"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// maxProtoRefs bounds the references one Protobuf schema may pull in (transitively).
const maxProtoRefs = 256

// CompileProto compiles a PROTOBUF schema with the schemas it references (fetched from reg
// by subject and version, each under its import path) and returns its file. A schema that
// does not compile, or a reference the registry lacks, is ErrIncompatibleSchema; a registry
// that cannot be asked ErrRegistryUnavailable.
func CompileProto(ctx context.Context, reg Registry, id int, s sr.Schema) (protoreflect.FileDescriptor, error) {
	if s.Type != sr.TypeProtobuf {
		return nil, &DecodeError{Kind: ErrIncompatibleSchema, SchemaID: id, Err: fmt.Errorf("schema type %s, want PROTOBUF", typeName(s.Type))}
	}
	srcs := map[string]string{}
	if err := protoRefs(ctx, reg, id, s.References, srcs); err != nil {
		return nil, err
	}
	main := "schema.proto"
	for i := 0; srcs[main] != ""; i++ {
		main = fmt.Sprintf("schema%d.proto", i)
	}
	srcs[main] = s.Schema
	c := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{Accessor: protocompile.SourceAccessorFromMap(srcs)}),
	}
	files, err := c.Compile(ctx, main)
	if err != nil {
		return nil, &DecodeError{Kind: ErrIncompatibleSchema, SchemaID: id, Err: fmt.Errorf("compile the Protobuf schema: %w", err)}
	}
	return files[0], nil
}

// protoRefs adds the text of each reference (and theirs) to srcs under its import path.
func protoRefs(ctx context.Context, reg Registry, id int, refs []sr.SchemaReference, srcs map[string]string) error {
	for _, r := range refs {
		if _, done := srcs[r.Name]; done {
			continue
		}
		if len(srcs) >= maxProtoRefs {
			return &DecodeError{Kind: ErrIncompatibleSchema, SchemaID: id, Err: fmt.Errorf("more than %d references", maxProtoRefs)}
		}
		got, err := reg.SchemaByVersion(ctx, r.Subject, r.Version)
		if err != nil {
			// 40401 no such subject, 40402 no such version: the schema names what is not there.
			var re *sr.ResponseError
			if errors.As(err, &re) && re.StatusCode == http.StatusNotFound && (re.ErrorCode == 40401 || re.ErrorCode == 40402) {
				return &DecodeError{Kind: ErrIncompatibleSchema, SchemaID: id, Err: fmt.Errorf("reference %s (subject %s version %d): %w", r.Name, r.Subject, r.Version, err)}
			}
			return classifyRegistryErr(id, err)
		}
		srcs[r.Name] = got.Schema.Schema
		if err := protoRefs(ctx, reg, id, got.Schema.References, srcs); err != nil {
			return err
		}
	}
	return nil
}

// ProtoMessage is the message of f named name (its full name, or its name within f's
// package); "" is the first message of f, the one a producer writes by default (message
// index [0]).
func ProtoMessage(f protoreflect.FileDescriptor, name string) (protoreflect.MessageDescriptor, error) {
	msgs := f.Messages()
	if name == "" {
		if msgs.Len() == 0 {
			return nil, errors.New("the Protobuf schema declares no message")
		}
		return msgs.Get(0), nil
	}
	full := protoreflect.FullName(name)
	if !strings.Contains(name, ".") && f.Package() != "" {
		full = f.Package().Append(protoreflect.Name(name))
	}
	if d := findMessage(msgs, full); d != nil {
		return d, nil
	}
	return nil, fmt.Errorf("the Protobuf schema has no message %s", name)
}

// ProtoMessageIndexes are the Confluent message indexes of m in its file: the index of its
// top-level message, then of each nested one down to m ([0] for the file's first message).
func ProtoMessageIndexes(m protoreflect.MessageDescriptor) []int {
	var idx []int
	for d := protoreflect.Descriptor(m); ; d = d.Parent() {
		if _, ok := d.(protoreflect.MessageDescriptor); !ok {
			break
		}
		idx = append([]int{d.Index()}, idx...)
	}
	return idx
}

func findMessage(msgs protoreflect.MessageDescriptors, full protoreflect.FullName) protoreflect.MessageDescriptor {
	for i := range msgs.Len() {
		m := msgs.Get(i)
		if m.FullName() == full {
			return m
		}
		if d := findMessage(m.Messages(), full); d != nil {
			return d
		}
	}
	return nil
}

// ProtoSchema is the Avro record schema message m maps to (the package comment has the
// mapping): the schema the schema engine derives a table from and decoded values follow.
func ProtoSchema(m protoreflect.MessageDescriptor) (avro.Schema, error) {
	b := protoAvro{defined: map[protoreflect.FullName]bool{}, open: map[protoreflect.FullName]bool{}}
	text, err := json.Marshal(b.message(m))
	if err != nil {
		return nil, err
	}
	s, err := avro.ParseWithCache(string(text), "", &avro.SchemaCache{})
	if err != nil {
		return nil, fmt.Errorf("message %s as an Avro record: %w", m.FullName(), err)
	}
	return s, nil
}

// Well-known messages with a mapping of their own.
const (
	protoTimestamp = "google.protobuf.Timestamp"
)

// protoJSONTypes are the well-known messages held as JSON text: their shape is open.
var protoJSONTypes = map[protoreflect.FullName]bool{
	"google.protobuf.Struct": true, "google.protobuf.Value": true, "google.protobuf.ListValue": true, "google.protobuf.Any": true,
}

// isProtoWrapper says whether m is one of google/protobuf/wrappers.proto's messages.
func isProtoWrapper(m protoreflect.MessageDescriptor) bool {
	return m.ParentFile() != nil && m.ParentFile().Path() == "google/protobuf/wrappers.proto"
}

// protoAvro builds an Avro schema's JSON form from messages. A named type (record, enum) is
// spelled out once and named after that; a message inside its own definition is JSON text.
type protoAvro struct {
	defined map[protoreflect.FullName]bool
	open    map[protoreflect.FullName]bool // records being spelled out
}

func (b *protoAvro) message(m protoreflect.MessageDescriptor) any {
	full := m.FullName()
	switch {
	case full == protoTimestamp:
		return map[string]any{"type": "long", "logicalType": "timestamp-micros"}
	case protoJSONTypes[full] || b.open[full]:
		return "string"
	case isProtoWrapper(m):
		return []any{"null", b.single(m.Fields().ByName("value"))}
	case b.defined[full]:
		return string(full)
	}
	b.defined[full], b.open[full] = true, true
	defer delete(b.open, full)
	fields := []any{}
	for i := range m.Fields().Len() {
		fields = append(fields, b.field(m.Fields().Get(i)))
	}
	return map[string]any{"type": "record", "name": string(full), "fields": fields}
}

// field is a record field's JSON form: its type and default.
func (b *protoAvro) field(fd protoreflect.FieldDescriptor) map[string]any {
	f := map[string]any{"name": string(fd.Name())}
	switch {
	case fd.IsMap():
		f["type"], f["default"] = map[string]any{"type": "map", "values": b.single(fd.MapValue())}, map[string]any{}
	case fd.IsList():
		f["type"], f["default"] = map[string]any{"type": "array", "items": b.single(fd)}, []any{}
	default:
		t := b.single(fd)
		if _, union := t.([]any); !union && protoNullable(fd) {
			t = []any{"null", t}
		}
		f["type"] = t
		if def, ok := protoDefault(fd, t); ok {
			f["default"] = def
		}
	}
	return f
}

// protoNullable says whether a singular field has presence: a member of a oneof, or a scalar
// that tracks it (proto3 optional, proto2 optional). A message field without a oneof reads as
// its zero value when unset, as Protobuf reads it.
func protoNullable(fd protoreflect.FieldDescriptor) bool {
	if o := fd.ContainingOneof(); o != nil && !o.IsSynthetic() {
		return true
	}
	return fd.HasPresence() && fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind
}

// protoDefault is a field's Avro default: null for a union, the zero value of a scalar or
// timestamp, an enum's value numbered 0 (else its first); none for a record, whose fields
// carry their own.
func protoDefault(fd protoreflect.FieldDescriptor, t any) (any, bool) {
	switch x := t.(type) {
	case []any:
		return nil, true
	case string:
		if x == "string" && fd.Kind() == protoreflect.MessageKind {
			return "", true // JSON text
		}
	case map[string]any:
		if x["type"] == "record" {
			return nil, false
		}
	}
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return false, true
	case protoreflect.StringKind, protoreflect.BytesKind:
		return "", true
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		return 0.0, true
	case protoreflect.EnumKind:
		return string(protoEnumZero(fd.Enum()).Name()), true
	case protoreflect.MessageKind, protoreflect.GroupKind:
		if fd.Message().FullName() == protoTimestamp {
			return 0, true
		}
		return nil, false // a record named after its first spelling
	}
	return 0, true // the integer kinds
}

// protoEnumZero is the value a reader of e gets for an unset field: the one numbered 0 (the
// first one in proto3), else the first declared.
func protoEnumZero(e protoreflect.EnumDescriptor) protoreflect.EnumValueDescriptor {
	if v := e.Values().ByNumber(0); v != nil {
		return v
	}
	return e.Values().Get(0)
}

// single is the JSON form of one value of fd's kind (an element, for a repeated field).
func (b *protoAvro) single(fd protoreflect.FieldDescriptor) any {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return "boolean"
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return "int"
	case protoreflect.FloatKind:
		return "float"
	case protoreflect.DoubleKind:
		return "double"
	case protoreflect.StringKind:
		return "string"
	case protoreflect.BytesKind:
		return "bytes"
	case protoreflect.EnumKind:
		return b.enum(fd.Enum())
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return b.message(fd.Message())
	}
	return "long" // int64, sint64, sfixed64, uint32, fixed32, uint64, fixed64
}

func (b *protoAvro) enum(e protoreflect.EnumDescriptor) any {
	full := e.FullName()
	if b.defined[full] {
		return string(full)
	}
	b.defined[full] = true
	var symbols []string
	for i := range e.Values().Len() {
		symbols = append(symbols, string(e.Values().Get(i).Name()))
	}
	return map[string]any{"type": "enum", "name": string(full), "symbols": symbols}
}
