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
	// one it named, or the file's first, which a producer writes by default. "" otherwise.
	Message string
}

// ErrStreamMessage: a stream names a Protobuf message its subject's schema does not hold, or
// names one for a subject that is not Protobuf.
var ErrStreamMessage = errors.New("the stream's message")

// ErrStreamSchemaType: the subject's schema type is not one a declared stream reads.
var ErrStreamSchemaType = errors.New("a declared stream reads AVRO, PROTOBUF or JSON subjects")

// ParseStreamSchema parses the schema s registered under id for a declared stream: an AVRO
// schema as it is, a PROTOBUF one compiled with its references (fetched from reg) as the Avro
// record of its message named message (its full name, or its name in the file's package; ""
// the file's first), a JSON one as the Avro record its root object maps to
// (JSONRecordSchema). Another type is ErrStreamSchemaType; a message the file lacks, or one
// named for another type, ErrStreamMessage; a schema that does not parse or compile an error
// saying why.
func ParseStreamSchema(ctx context.Context, reg Registry, id int, s sr.Schema, message string) (StreamSchema, error) {
	out := StreamSchema{ID: id, Type: s.Type}
	if message != "" && s.Type != sr.TypeProtobuf {
		return out, fmt.Errorf("%w %s: the schema (id %d) is %s, and only a Protobuf schema has messages to choose from", ErrStreamMessage, message, id, typeName(s.Type))
	}
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
		m, err := ProtoMessage(f, message)
		if err != nil && message != "" {
			return out, fmt.Errorf("%w %s: %w (schema id %d)", ErrStreamMessage, message, err, id)
		}
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
