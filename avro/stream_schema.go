package avro

// The schema of a declared stream's subject, whatever its type (AVRO, PROTOBUF, JSON).

import (
	"context"
	"errors"
	"fmt"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
)

// StreamSchema is a subject's schema as a declared stream reads it.
type StreamSchema struct {
	// Schema is the Avro schema, or the Avro record a Protobuf message (ProtoSchema) or a JSON
	// Schema (JSONRecordSchema) maps to.
	Schema avro.Schema
	ID     int
	Type   sr.SchemaType
	// Message is, for a PROTOBUF schema, the full name of the message the stream reads: the
	// file's first, the one a producer writes by default. "" for AVRO.
	Message string
}

// ErrStreamSchemaType: the subject's schema type is not one a declared stream reads.
var ErrStreamSchemaType = errors.New("a declared stream reads AVRO, PROTOBUF or JSON subjects")

// ParseStreamSchema parses the schema s registered under id for a declared stream: an AVRO
// schema as it is, a PROTOBUF one compiled with its references (fetched from reg) as its
// first message's Avro record, a JSON one as the Avro record its root object maps to
// (JSONRecordSchema). Another type is ErrStreamSchemaType; a schema that does not parse or
// compile an error saying why.
func ParseStreamSchema(ctx context.Context, reg Registry, id int, s sr.Schema) (StreamSchema, error) {
	out := StreamSchema{ID: id, Type: s.Type}
	switch s.Type {
	case sr.TypeAvro:
		sch, err := avro.ParseWithCache(s.Schema, "", &avro.SchemaCache{})
		if err != nil {
			return out, err
		}
		out.Schema = sch
		return out, nil
	case sr.TypeProtobuf:
		f, err := CompileProto(ctx, reg, id, s)
		if err != nil {
			return out, schemaProblem(err)
		}
		m, err := ProtoMessage(f, "")
		if err != nil {
			return out, err
		}
		out.Message = string(m.FullName())
		out.Schema, err = ProtoSchema(m)
		return out, err
	case sr.TypeJSON:
		_, sch, err := CompileJSONSchema(id, s)
		out.Schema = sch
		return out, schemaProblem(err)
	}
	return out, fmt.Errorf("schemaType %s (schema id %d): %w", typeName(s.Type), id, ErrStreamSchemaType)
}

// schemaProblem is err without the decode class a record would get for it: what is wrong with
// the schema itself, for the one who registered it. An outage stays as it is (IsRetryable).
func schemaProblem(err error) error {
	var de *DecodeError
	if errors.As(err, &de) && de.Kind == ErrIncompatibleSchema && de.Err != nil {
		return de.Err
	}
	return err
}

// typeName is a schema type as the registry spells it (AVRO when unset, as the registry takes it).
func typeName(t sr.SchemaType) string {
	b, err := t.MarshalText()
	if err != nil {
		return fmt.Sprint(int(t))
	}
	return string(b)
}
