package loadgen

// An Avro stream's records: random valid values for each Avro type, written with the
// product's encoder.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strings"
	"time"

	hamba "github.com/hamba/avro/v2"

	"github.com/backflowhq/backflow/avro"
)

// validateAvro checks an Avro stream's schema and its key and time fields.
func validateAvro(c StreamConfig) (*hamba.RecordSchema, error) {
	schema, err := hamba.Parse(c.Schema)
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	rec, ok := schema.(*hamba.RecordSchema)
	if !ok {
		return nil, errors.New("schema: want a record schema")
	}
	var errs []error
	for _, f := range []string{c.KeyField, c.TimeField} {
		if f != "" && fieldSchema(rec, f) == nil {
			errs = append(errs, fmt.Errorf("field %s: not in the schema", f))
		}
	}
	if c.KeyField != "" {
		if s := fieldSchema(rec, c.KeyField); s != nil && s.Type() != hamba.String && s.Type() != hamba.Long && s.Type() != hamba.Int {
			errs = append(errs, fmt.Errorf("key field %s is a %s; want a string, int or long", c.KeyField, s.Type()))
		}
	}
	return rec, errors.Join(errs...)
}

// fieldSchema is the schema of the field at a dot path in rec, or nil.
func fieldSchema(rec *hamba.RecordSchema, path string) hamba.Schema {
	var s hamba.Schema = rec
	for _, name := range strings.Split(path, ".") {
		r, ok := s.(*hamba.RecordSchema)
		if !ok {
			return nil
		}
		var next hamba.Schema
		for _, f := range r.Fields() {
			if f.Name() == name {
				next = f.Type()
			}
		}
		if next == nil {
			return nil
		}
		if ref, ok := next.(*hamba.RefSchema); ok {
			next = ref.Schema()
		}
		s = next
	}
	return s
}

// avroFormat writes an Avro stream's records with the product's encoder.
type avroFormat struct {
	g      *StreamGenerator
	cfg    StreamConfig
	schema *hamba.RecordSchema
	enc    *avro.Encoder[any]
}

func newAvroFormat(cfg StreamConfig, g *StreamGenerator, reg avro.Registry) (*avroFormat, error) {
	rec, err := validateAvro(cfg)
	if err != nil || reg == nil {
		return nil, err
	}
	enc, err := avro.NewTextEncoder[any](reg, cfg.Schema, cfg.Subject)
	return &avroFormat{g: g, cfg: cfg, schema: rec, enc: enc}, err
}

func (f *avroFormat) register(ctx context.Context) (int, error) { return f.enc.ID(ctx) }

func (f *avroFormat) record(ctx context.Context, _, n int) ([]byte, string, error) {
	rec, key := f.Record(n)
	value, err := f.enc.Encode(ctx, rec)
	return value, key, err
}

// Record makes record n's value (from 1): random valid values, its key and event time set.
func (f *avroFormat) Record(n int) (map[string]any, string) {
	g := f.g
	v := g.value(f.schema, 0).(map[string]any)
	key := g.key(n)
	if f.cfg.KeyField != "" {
		switch fieldSchema(f.schema, f.cfg.KeyField).Type() {
		case hamba.Long:
			setPath(v, f.cfg.KeyField, int64(n))
			key = fmt.Sprint(n)
		case hamba.Int:
			setPath(v, f.cfg.KeyField, n)
			key = fmt.Sprint(n)
		default:
			if ls, ok := fieldSchema(f.schema, f.cfg.KeyField).(hamba.LogicalTypeSchema); ok && ls.Logical() != nil && ls.Logical().Type() == hamba.UUID {
				key = nameUUID(key)
			}
			setPath(v, f.cfg.KeyField, key)
		}
	}
	if f.cfg.TimeField != "" {
		setPath(v, f.cfg.TimeField, g.eventTime(n))
	}
	return v, key
}

func (f *avroFormat) truncate(valid []byte) []byte {
	return valid[:avro.HeaderSize+(len(valid)-avro.HeaderSize)/2]
}

func (f *avroFormat) reject(valid []byte) []byte { return valid } // refused by Validate

// value is a random valid value of s, as hamba/avro encodes an any: a map per record, a
// union's non-null value keyed by its type's name.
func (g *StreamGenerator) value(s hamba.Schema, depth int) any {
	if ref, ok := s.(*hamba.RefSchema); ok {
		s = ref.Schema()
	}
	if ls, ok := s.(hamba.LogicalTypeSchema); ok && ls.Logical() != nil {
		switch l := ls.Logical(); l.Type() {
		case hamba.TimestampMillis, hamba.TimestampMicros, hamba.LocalTimestampMillis, hamba.LocalTimestampMicros:
			return g.cfg.EventStart.Add(-time.Duration(g.rng.IntN(3600)) * time.Second)
		case hamba.Date:
			return g.cfg.EventStart.Truncate(24 * time.Hour)
		case hamba.UUID:
			b := make([]byte, 16)
			for i := range b {
				b[i] = byte(g.rng.IntN(256))
			}
			return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
		case hamba.Decimal:
			if dl, ok := l.(*hamba.DecimalLogicalSchema); ok {
				scale := int64(math.Pow10(dl.Scale()))
				return big.NewRat(g.rng.Int64N(1000*scale), scale)
			}
		}
	}
	switch t := s.(type) {
	case *hamba.RecordSchema:
		m := map[string]any{}
		for _, f := range t.Fields() {
			m[f.Name()] = g.value(f.Type(), depth+1)
		}
		return m
	case *hamba.EnumSchema:
		return t.Symbols()[g.rng.IntN(len(t.Symbols()))]
	case *hamba.FixedSchema:
		arr := reflect.New(reflect.ArrayOf(t.Size(), reflect.TypeFor[byte]())).Elem()
		for i := range t.Size() {
			arr.Index(i).SetUint(uint64('a' + g.rng.IntN(26)))
		}
		return arr.Interface()
	case *hamba.ArraySchema:
		n := g.rng.IntN(4)
		out := make([]any, n)
		for i := range out {
			out[i] = g.value(t.Items(), depth+1)
		}
		return out
	case *hamba.MapSchema:
		m := map[string]any{}
		for range g.rng.IntN(4) {
			m[vocabulary[g.rng.IntN(len(vocabulary))]] = g.value(t.Values(), depth+1)
		}
		return m
	case *hamba.UnionSchema:
		types := t.Types()
		i := g.rng.IntN(len(types))
		if types[i].Type() == hamba.Null {
			return nil
		}
		return map[string]any{unionName(types[i]): g.value(types[i], depth+1)}
	}
	switch s.Type() {
	case hamba.Boolean:
		return g.rng.IntN(2) == 1
	case hamba.Int:
		return int(g.rng.Int32N(10000))
	case hamba.Long:
		return g.rng.Int64N(1 << 40)
	case hamba.Float:
		return float32(g.rng.IntN(1000)) / 8 // exact in binary: reads back as written
	case hamba.Double:
		return float64(g.rng.IntN(100000)) / 16
	case hamba.String:
		return g.text()
	case hamba.Bytes:
		b := make([]byte, g.rng.IntN(16))
		for i := range b {
			b[i] = byte(g.rng.IntN(256))
		}
		return b
	}
	return nil
}

// unionName is how hamba/avro names a union branch in a decoded or encoded any.
func unionName(s hamba.Schema) string {
	if ref, ok := s.(*hamba.RefSchema); ok {
		s = ref.Schema()
	}
	if n, ok := s.(hamba.NamedSchema); ok {
		return n.FullName()
	}
	return string(s.Type())
}
