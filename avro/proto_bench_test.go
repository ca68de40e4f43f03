package avro_test

import (
	"context"
	"encoding/json"
	"testing"

	hamba "github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
)

// BenchmarkStreamRecord is what a declared stream's stage does per record before the insert
// (frame, cached writer schema, decode, row values), for the example shop order as Protobuf and
// the same record as Avro (the Avro record the message maps to): the two should cost alike.
func BenchmarkStreamRecord(b *testing.B) {
	f := newProtoFixture(b, "shop-order.proto")
	ctx := context.Background()
	pdec, err := avro.NewProtoDecoder(f.reg, avro.DecoderConfig{}, "shop.v1.Order")
	if err != nil {
		b.Fatal(err)
	}
	writer, err := pdec.Writer(ctx, f.id)
	if err != nil {
		b.Fatal(err)
	}
	protoValue := f.value(b, orderJSON, 0)
	_, body, _ := pdec.Frame(protoValue)
	rec, err := pdec.Decode(f.id, body, writer, nil)
	if err != nil {
		b.Fatal(err)
	}
	avroBody, err := hamba.Marshal(writer, rec)
	if err != nil {
		b.Fatal(err)
	}
	text, _ := json.Marshal(writer)
	ss, err := f.reg.CreateSchema(ctx, "shop-order-avro-value", sr.Schema{Schema: string(text)})
	if err != nil {
		b.Fatal(err)
	}
	avroValue := append(avro.AppendFrame(nil, ss.ID), avroBody...)
	gdec, err := avro.NewGenericDecoder(f.reg, avro.DecoderConfig{})
	if err != nil {
		b.Fatal(err)
	}
	cols, err := chschema.DeriveColumns(writer, chschema.Capabilities{})
	if err != nil {
		b.Fatal(err)
	}
	benchStreamRecord(b, cols, []benchCase{{"protobuf", pdec, protoValue}, {"avro", gdec, avroValue}})
}

type streamDecoder interface {
	Frame([]byte) (int, []byte, error)
	Writer(context.Context, int) (hamba.Schema, error)
	Decode(int, []byte, hamba.Schema, hamba.Schema) (map[string]any, error)
}

type benchCase struct {
	name  string
	dec   streamDecoder
	value []byte
}

// benchStreamRecord runs each case: frame, writer schema (cached), decode, row values.
func benchStreamRecord(b *testing.B, cols []chschema.Column, cases []benchCase) {
	ctx := context.Background()
	for _, bb := range cases {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bb.value)))
			for b.Loop() {
				id, body, err := bb.dec.Frame(bb.value)
				if err != nil {
					b.Fatal(err)
				}
				w, err := bb.dec.Writer(ctx, id)
				if err != nil {
					b.Fatal(err)
				}
				m, err := bb.dec.Decode(id, body, w, w)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := chschema.RowValues(cols, m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkJSONStreamRecord is BenchmarkStreamRecord for the example page view as JSON
// (validated against its schema) and the same record as Avro.
func BenchmarkJSONStreamRecord(b *testing.B) {
	reg, ids := jsonFixture(b, "page-view.schema.json")
	ctx := context.Background()
	jdec, err := avro.NewJSONDecoder(reg, avro.DecoderConfig{})
	if err != nil {
		b.Fatal(err)
	}
	writer, err := jdec.Writer(ctx, ids[0])
	if err != nil {
		b.Fatal(err)
	}
	rec, err := jdec.Decode(ids[0], []byte(pageViewJSON), writer, nil)
	if err != nil {
		b.Fatal(err)
	}
	avroBody, err := hamba.Marshal(writer, rec)
	if err != nil {
		b.Fatal(err)
	}
	text, _ := json.Marshal(writer)
	ss, err := reg.CreateSchema(ctx, "page-view-avro-value", sr.Schema{Schema: string(text)})
	if err != nil {
		b.Fatal(err)
	}
	gdec, _ := avro.NewGenericDecoder(reg, avro.DecoderConfig{})
	cols, err := chschema.DeriveColumns(writer, chschema.Capabilities{})
	if err != nil {
		b.Fatal(err)
	}
	benchStreamRecord(b, cols, []benchCase{
		{"json", jdec, append(avro.AppendFrame(nil, ids[0]), pageViewJSON...)},
		{"avro", gdec, append(avro.AppendFrame(nil, ss.ID), avroBody...)},
	})
}
