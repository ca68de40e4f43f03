package avro_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bufbuild/protocompile"
	hamba "github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
)

func readProto(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "deploy", "streams", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// protoFixture registers the example shop-order schema (and the schema it references) on a
// fake registry and compiles it locally, as a producer would, to write values with.
type protoFixture struct {
	reg   *sr.Client
	id    int // shop-order.proto's schema id
	order protoreflect.MessageDescriptor
}

func newProtoFixture(t testing.TB, order string) *protoFixture {
	t.Helper()
	fake := srfake.New()
	t.Cleanup(fake.Close)
	reg, err := avro.NewRegistryClient(avro.RegistryConn{URL: fake.URL()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	common := readProto(t, "shop-common.proto")
	if _, err := reg.CreateSchema(ctx, "shop-common.proto", sr.Schema{Schema: common, Type: sr.TypeProtobuf}); err != nil {
		t.Fatal(err)
	}
	text := readProto(t, order)
	ss, err := reg.CreateSchema(ctx, "shop-order-value", sr.Schema{Schema: text, Type: sr.TypeProtobuf,
		References: []sr.SchemaReference{{Name: "shop-common.proto", Subject: "shop-common.proto", Version: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(map[string]string{"shop-common.proto": common, "order.proto": text})})}
	files, err := c.Compile(ctx, "order.proto")
	if err != nil {
		t.Fatal(err)
	}
	return &protoFixture{reg: reg, id: ss.ID, order: files[0].Messages().ByName("Order")}
}

// value is the framed value of the order written as JSON, under message index idx.
func (f *protoFixture) value(t testing.TB, js string, idx ...int) []byte {
	t.Helper()
	m := dynamicpb.NewMessage(f.order)
	if err := protojson.Unmarshal([]byte(js), m); err != nil {
		t.Fatal(err)
	}
	body, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var h sr.ConfluentHeader
	b, _ := h.AppendEncode(nil, f.id, idx)
	return append(b, body...)
}

const orderJSON = `{"orderId": "o-1", "created": "2026-12-07T03:04:05.250Z",
	"customer": {"id": "c-9", "tier": "gold"},
	"items": [{"sku": "a", "qty": 2, "price": 1.5}, {"sku": "b", "qty": 1, "price": 10}],
	"counters": {"views": "7", "clicks": "3"}, "status": "SHIPPED",
	"voucher": {"code": "V10", "discount": 0.5}, "priority": 0, "note": "fragile",
	"extra": {"gift": true}, "tags": ["x", "y"], "weightMg": "1200"}`

// TestProtoTableAndRow: a Protobuf message (imported message, nested and repeated messages, a
// map, a oneof, an optional scalar, a wrapper, a Struct, a Timestamp) derives the columns the
// mapping says and its value fills them with the values written; the 0 shortcut and the
// explicit index [0] read alike.
func TestProtoTableAndRow(t *testing.T) {
	f := newProtoFixture(t, "shop-order.proto")
	ctx := context.Background()
	dec, err := avro.NewProtoDecoder(f.reg, avro.DecoderConfig{}, "shop.v1.Order")
	if err != nil {
		t.Fatal(err)
	}
	writer, err := dec.Writer(ctx, f.id)
	if err != nil {
		t.Fatal(err)
	}
	cols, err := chschema.DeriveColumns(writer, chschema.Capabilities{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cols {
		got = append(got, c.Name+" "+c.Type)
	}
	want := []string{"order_id String", "created DateTime", "customer_id String", "customer_tier String",
		"items_sku Array(String)", "items_qty Array(Int32)", "items_price Array(Float64)",
		"counters_keys Array(String)", "counters_values Array(Int64)",
		"status Enum8('STATUS_UNSPECIFIED' = 1, 'PAID' = 2, 'SHIPPED' = 3)",
		"card Nullable(String)", "voucher_code Nullable(String)", "voucher_discount Nullable(Float32)",
		"priority Nullable(Int32)", "note Nullable(String)", "extra String", "tags Array(String)", "weight_mg Int64"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("columns:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	shortcut := f.value(t, orderJSON, 0)
	explicit := append(append(append([]byte{}, shortcut[:avro.HeaderSize]...), 0x02, 0x00), shortcut[avro.HeaderSize+1:]...) // [0] spelled out
	for _, idx := range [][]int{{0}, {1, 0}, nil} {                                                                          // {0} is the one-byte shortcut; nil: explicit
		value := explicit
		if idx != nil {
			value = f.value(t, orderJSON, idx...)
		}
		_, body, err := dec.Frame(value)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := dec.Decode(f.id, body, writer, nil)
		if len(idx) == 2 { // index 1 of a file with one top-level message: no such message
			if !errors.Is(err, avro.ErrCorrupt) {
				t.Fatalf("index %v: %v, want ErrCorrupt", idx, err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		vals, err := chschema.RowValues(cols, rec)
		if err != nil {
			t.Fatal(err)
		}
		str, p32, p := "fragile", int32(0), func(s string) *string { return &s }
		f32 := float32(0.5)
		wantVals := []any{"o-1", time.Date(2026, 12, 7, 3, 4, 5, 250e6, time.UTC), "c-9", "gold",
			[]string{"a", "b"}, []int32{2, 1}, []float64{1.5, 10},
			[]string{"clicks", "views"}, []int64{3, 7}, "SHIPPED",
			(*string)(nil), p("V10"), &f32, &p32, &str, `{"gift":true}`, []string{"x", "y"}, int64(1200)}
		for i := range cols {
			if !reflect.DeepEqual(vals[i], wantVals[i]) {
				t.Errorf("%s = %s, want %s", cols[i].Name, show(vals[i]), show(wantVals[i]))
			}
		}
	}
}

// TestProtoEvolution: a v1 record read with the v2 shape gets v2's new field's zero value; a v2
// record with the new enum value reads it; v2's columns add one and extend the enum.
func TestProtoEvolution(t *testing.T) {
	v1 := newProtoFixture(t, "shop-order.proto")
	v2 := newProtoFixture(t, "shop-order.v2.proto")
	ctx := context.Background()
	d1, _ := avro.NewProtoDecoder(v1.reg, avro.DecoderConfig{}, "shop.v1.Order")
	d2, _ := avro.NewProtoDecoder(v2.reg, avro.DecoderConfig{}, "shop.v1.Order")
	w1, err := d1.Writer(ctx, v1.id)
	if err != nil {
		t.Fatal(err)
	}
	w2, err := d2.Writer(ctx, v2.id)
	if err != nil {
		t.Fatal(err)
	}
	c1, _ := chschema.DeriveColumns(w1, chschema.Capabilities{})
	c2, _ := chschema.DeriveColumns(w2, chschema.Capabilities{})
	stmts, err := chschema.PlanEvolution("shop_order", c1, c2, "order_id")
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(stmts, "\n")
	for _, s := range []string{"ADD COLUMN `channel` String", "MODIFY COLUMN `status` Enum8('STATUS_UNSPECIFIED' = 1, 'PAID' = 2, 'SHIPPED' = 3, 'REFUNDED' = 4)"} {
		if !strings.Contains(joined, s) {
			t.Errorf("plan lacks %q:\n%s", s, joined)
		}
	}
	_, body, _ := d1.Frame(v1.value(t, orderJSON, 0))
	rec, err := d1.Decode(v1.id, body, w1, w2)
	if err != nil {
		t.Fatal(err)
	}
	if rec["channel"] != "" || rec["order_id"] != "o-1" {
		t.Errorf("v1 record as v2: channel %#v, order_id %#v", rec["channel"], rec["order_id"])
	}
	_, body, _ = d2.Frame(v2.value(t, strings.Replace(orderJSON, `"SHIPPED"`, `"REFUNDED"`, 1), 0))
	if rec, err = d2.Decode(v2.id, body, w2, nil); err != nil || rec["status"] != "REFUNDED" {
		t.Errorf("v2 record: status %#v, %v", rec["status"], err)
	}
}

// TestProtoPoison: each bad value fails with its class: garbage after a good frame is corrupt,
// an unknown id is unknown_schema, an enum number the schema lacks and a uint64 past Int64
// are invalid, an AVRO schema's id is incompatible.
func TestProtoPoison(t *testing.T) {
	f := newProtoFixture(t, "shop-order.proto")
	ctx := context.Background()
	dec, _ := avro.NewProtoDecoder(f.reg, avro.DecoderConfig{}, "shop.v1.Order")
	w, err := dec.Writer(ctx, f.id)
	if err != nil {
		t.Fatal(err)
	}
	decode := func(v []byte) error {
		id, body, err := dec.Frame(v)
		if err != nil {
			return err
		}
		if _, err := dec.Writer(ctx, id); err != nil {
			return err
		}
		_, err = dec.Decode(id, body, w, nil)
		return err
	}
	var h sr.ConfluentHeader
	garbage, _ := h.AppendEncode(nil, f.id, []int{0})
	garbage = append(garbage, 0xff, 0xff, 0xff)
	unknown, _ := h.AppendEncode(nil, 9999, []int{0})
	good := f.value(t, `{"orderId": "o"}`, 0)
	badEnum := append(append([]byte{}, good...), 0x30, 0x09)                                                       // field 6 (status) = 9
	bigUint := append(append([]byte{}, good...), 0x68, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01) // field 13 = 2^64-1
	avroID, err := f.reg.CreateSchema(ctx, "other-value", sr.Schema{Schema: `{"type":"record","name":"R","fields":[]}`})
	if err != nil {
		t.Fatal(err)
	}
	notProto, _ := h.AppendEncode(nil, avroID.ID, []int{0})
	nested, _ := h.AppendEncode(nil, f.id, []int{0, 0}) // Order.Item: a message, not the stream's
	nested = append(nested, 0x0a, 0x01, 0x61)
	for _, tt := range []struct {
		name  string
		value []byte
		class string
	}{
		{"garbage", garbage, avro.ClassCorrupt},
		{"not framed", []byte{1, 2}, avro.ClassNotFramed},
		{"unknown id", unknown, avro.ClassUnknownSchema},
		{"enum number not declared", badEnum, avro.ClassInvalid},
		{"uint64 past Int64", bigUint, avro.ClassInvalid},
		{"an AVRO schema", notProto, avro.ClassIncompatibleSchema},
		{"another message of the schema", nested, avro.ClassInvalid},
	} {
		err := decode(tt.value)
		var de *avro.DecodeError
		if !errors.As(err, &de) || de.ErrorClass() != tt.class {
			t.Errorf("%s: %v, want class %s", tt.name, err, tt.class)
		}
	}
}

func show(v any) string {
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && !rv.IsNil() {
		return "&" + show(rv.Elem().Interface())
	}
	return fmt.Sprintf("%#v", v)
}

// TestStreamMessageChosen: a stream reads the message it names (full name, name in the
// package, or a nested one), framed at that message's indexes; a record of the file's other
// message is invalid for it; a message the file lacks, or one named for a JSON subject, is
// ErrStreamMessage.
func TestStreamMessageChosen(t *testing.T) {
	f := newProtoFixture(t, "shop-order.proto")
	ctx := context.Background()
	got, err := f.reg.SchemaByID(ctx, f.id)
	if err != nil {
		t.Fatal(err)
	}
	item := f.order.Messages().ByName("Item")
	// Nested messages count in declaration order, a map field's entry message among them.
	var nested []string
	for i := range f.order.Messages().Len() {
		nested = append(nested, string(f.order.Messages().Get(i).Name()))
	}
	for i, name := range nested {
		if idx := avro.ProtoMessageIndexes(f.order.Messages().Get(i)); !reflect.DeepEqual(idx, []int{0, i}) {
			t.Fatalf("indexes of Order.%s %v, want [0 %d] (nested: %v)", name, idx, i, nested)
		}
	}
	if idx := avro.ProtoMessageIndexes(f.order); !reflect.DeepEqual(idx, []int{0}) {
		t.Fatalf("indexes of Order %v, want [0]", idx)
	}
	for name, want := range map[string]string{"": "shop.v1.Order", "Order": "shop.v1.Order", "shop.v1.Order.Item": "shop.v1.Order.Item"} {
		ss, err := avro.ParseStreamSchema(ctx, f.reg, f.id, got, name)
		if err != nil || ss.Message != want {
			t.Fatalf("message %q: %q %v, want %s", name, ss.Message, err, want)
		}
	}
	ss, err := avro.ParseStreamSchema(ctx, f.reg, f.id, got, "shop.v1.Order.Item")
	if err != nil {
		t.Fatal(err)
	}
	if names := fieldNames(ss.Schema); !reflect.DeepEqual(names, []string{"sku", "qty", "price"}) {
		t.Fatalf("Item's record has fields %v, want sku qty price", names)
	}

	// A decoder for Item reads an Item framed at [0 0], and refuses an Order framed at [0].
	dec, err := avro.NewProtoDecoder(f.reg, avro.DecoderConfig{}, ss.Message)
	if err != nil {
		t.Fatal(err)
	}
	w, err := dec.Writer(ctx, f.id)
	if err != nil {
		t.Fatal(err)
	}
	m := dynamicpb.NewMessage(item)
	if err := protojson.Unmarshal([]byte(`{"sku":"A-1","qty":3}`), m); err != nil {
		t.Fatal(err)
	}
	body, _ := proto.Marshal(m)
	var h sr.ConfluentHeader
	framed, _ := h.AppendEncode(nil, f.id, avro.ProtoMessageIndexes(item))
	_, rest, err := dec.Frame(append(framed, body...))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := dec.Decode(f.id, rest, w, nil)
	if err != nil || rec["sku"] != "A-1" {
		t.Fatalf("item: %v %v, want sku A-1", rec, err)
	}
	_, rest, _ = dec.Frame(f.value(t, orderJSON, 0))
	if _, err := dec.Decode(f.id, rest, w, nil); !errors.Is(err, avro.ErrInvalid) {
		t.Fatalf("an Order read as Item: %v, want ErrInvalid", err)
	}

	if _, err := avro.ParseStreamSchema(ctx, f.reg, f.id, got, "shop.v1.Refund"); !errors.Is(err, avro.ErrStreamMessage) || !strings.Contains(err.Error(), "no message shop.v1.Refund") {
		t.Fatalf("a message the file lacks: %v, want ErrStreamMessage naming it", err)
	}
	reg, ids := jsonFixture(t, "page-view.schema.json")
	js, err := reg.SchemaByID(ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := avro.ParseStreamSchema(ctx, reg, ids[0], js, "PageView"); !errors.Is(err, avro.ErrStreamMessage) || !strings.Contains(err.Error(), "JSON") {
		t.Fatalf("a message for a JSON subject: %v, want ErrStreamMessage saying it is JSON", err)
	}
}

func fieldNames(s hamba.Schema) []string {
	var out []string
	if r, ok := s.(*hamba.RecordSchema); ok {
		for _, f := range r.Fields() {
			out = append(out, f.Name())
		}
	}
	return out
}
