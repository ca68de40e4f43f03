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
	rec["voucher"] = map[string]any{"shop.v1.Order.Voucher": rec["voucher"]} // hamba keys a named union branch by its name
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
	type decoder interface {
		Frame([]byte) (int, []byte, error)
		Writer(context.Context, int) (hamba.Schema, error)
		Decode(int, []byte, hamba.Schema, hamba.Schema) (map[string]any, error)
	}
	for _, bb := range []struct {
		name  string
		dec   decoder
		value []byte
	}{{"protobuf", pdec, protoValue}, {"avro", gdec, avroValue}} {
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
