package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	hamba "github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/backflowhq/backflow/avro"
)

// streamDecoder is the product's decoder of a declared stream's subject (ProtoDecoder,
// JSONDecoder), as the stream stage builds it from the schema registered under id.
type streamDecoder interface {
	Frame(b []byte) (int, []byte, error)
	Writer(ctx context.Context, id int) (hamba.Schema, error)
	Decode(id int, body []byte, writer, reader hamba.Schema) (map[string]any, error)
}

func newStreamDecoder(t *testing.T, ctx context.Context, reg *sr.Client, id int) streamDecoder {
	t.Helper()
	got, err := reg.SchemaByID(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	st, err := avro.ParseStreamSchema(ctx, reg, id, got, "")
	if err != nil {
		t.Fatal(err)
	}
	cfg := avro.DecoderConfig{MaxRecordBytes: 4096}
	var d streamDecoder
	if st.Type == sr.TypeProtobuf {
		d, err = avro.NewProtoDecoder(reg, cfg, st.Message)
	} else {
		d, err = avro.NewJSONDecoder(reg, cfg)
	}
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestStreamFormatsRoundTrip: for the Protobuf and JSON Schema example streams, every
// original record loadgen makes reads back through the product's stream decoder to the values
// it generated (nested and repeated messages, maps, oneof, enums, Timestamp; nested objects,
// arrays, enum, date-time), with its key and event time; duplicates decode too; each poison
// kind fails with the class it names; the schema is registered with its type (and the
// Protobuf one's import under the reference prefix).
func TestStreamFormatsRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		file, key, time string
		typ             sr.SchemaType
		kinds           int
	}{
		{"shop-order.proto", "order_id", "created", sr.TypeProtobuf, len(StreamPoisonKinds)},
		{"page-view.schema.json", "view_id", "at", sr.TypeJSON, len(StreamPoisonKinds) + 1},
	} {
		t.Run(tc.file, func(t *testing.T) {
			b, err := os.ReadFile("../../deploy/streams/" + tc.file)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			reg := newFakeRegistry(t)
			start := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
			g, err := NewStreamGenerator(StreamConfig{Topic: "t", Schema: string(b), SchemaType: tc.typ, KeyField: tc.key, TimeField: tc.time,
				ImportPaths: []string{"../../deploy/streams"}, ReferencePrefix: "ref-", EventStart: start,
				Records: 300, DuplicateRate: 0.1, PoisonRate: 0.07, MaxRecordBytes: 4096, SensitiveShare: 0.2}, "run", reg)
			if err != nil {
				t.Fatal(err)
			}
			if err := g.Register(ctx); err != nil {
				t.Fatal(err)
			}
			got, err := reg.SchemaByID(ctx, g.id)
			if err != nil || got.Type != tc.typ {
				t.Fatalf("registered as %v (%v), want %v", got.Type, err, tc.typ)
			}
			if tc.typ == sr.TypeProtobuf && (len(got.References) != 1 || got.References[0] != (sr.SchemaReference{Name: "shop-common.proto", Subject: "ref-shop-common.proto", Version: 1})) {
				t.Fatalf("references %+v", got.References)
			}
			dec := newStreamDecoder(t, ctx, reg, g.id)
			kinds, poison := map[Kind]int{}, map[PoisonKind]int{}
			check := func(p Planned, want map[string]any) {
				t.Helper()
				kinds[p.Kind]++
				id, body, err := dec.Frame(p.Value)
				var m map[string]any
				if err == nil {
					var w hamba.Schema
					if w, err = dec.Writer(ctx, id); err == nil {
						m, err = dec.Decode(id, body, w, w)
					}
				}
				var de *avro.DecodeError
				switch {
				case p.Kind == KindPoison && err == nil:
					t.Errorf("poison %s decoded", p.Poison)
				case p.Kind == KindPoison && (!errors.As(err, &de) || de.ErrorClass() != p.Poison.Class()):
					t.Errorf("poison %s: %v, want class %s", p.Poison, err, p.Poison.Class())
				case p.Kind == KindPoison:
					poison[p.Poison]++
				case err != nil:
					t.Errorf("%s record %s: %v", p.Kind, p.RequestID, err)
				case fmt.Sprint(m[tc.key]) != p.RequestID:
					t.Errorf("record %s has key %v", p.RequestID, m[tc.key])
				case want != nil && fmt.Sprint(m) != fmt.Sprint(want):
					t.Errorf("record %s read back as\n%v\nwant\n%v", p.RequestID, m, want)
				}
			}
			for n := 1; n <= 300; n++ {
				planned, err := g.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				want, at := generated(t, g)
				if at == nil || !at.(time.Time).Equal(start.Add(time.Duration(n-1)*time.Second)) {
					t.Fatalf("record %d: event time %v", n, at)
				}
				for _, p := range planned {
					if p.Kind == KindOriginal {
						check(p, want)
					} else {
						check(p, nil)
					}
				}
			}
			for _, p := range g.Drain() {
				check(p, nil)
			}
			if kinds[KindOriginal] != 300 || kinds[KindDuplicate] == 0 || kinds[KindPoison] != 21 || len(poison) != tc.kinds {
				t.Errorf("kinds %v, poison %v", kinds, poison)
			}
		})
	}
}

// generated is the last record g made as the stream decoder must read it (the Avro shape of
// the docs' mapping tables), and its event time.
func generated(t *testing.T, g *StreamGenerator) (map[string]any, any) {
	t.Helper()
	switch f := g.format.(type) {
	case *protoFormat:
		want := protoWant(f.last)
		return want, want[g.cfg.TimeField]
	case *jsonFormat:
		s, err := avro.JSONRecordSchema(g.cfg.Schema)
		if err != nil {
			t.Fatal(err)
		}
		want := jsonWant(t, s.(*hamba.RecordSchema), f.last)
		return want, want[g.cfg.TimeField]
	}
	t.Fatalf("format %T", g.format)
	return nil, nil
}

// protoWant is m as the Protobuf mapping holds it: a field with presence (oneof member,
// optional, wrapper) null when unset and keyed by its type's name when a record or enum in
// a oneof; a Timestamp a time; a Struct its JSON; an unset Any or Value "".
func protoWant(m protoreflect.Message) map[string]any {
	out := map[string]any{}
	fds := m.Descriptor().Fields()
	for i := range fds.Len() {
		fd := fds.Get(i)
		switch {
		case fd.IsList():
			list := []any{}
			for j := range m.Get(fd).List().Len() {
				list = append(list, protoWantSingle(fd, m.Get(fd).List().Get(j)))
			}
			out[string(fd.Name())] = list
		case fd.IsMap():
			mp := map[string]any{}
			m.Get(fd).Map().Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
				mp[k.String()] = protoWantSingle(fd.MapValue(), v)
				return true
			})
			out[string(fd.Name())] = mp
		default:
			oneof := fd.ContainingOneof() != nil && !fd.ContainingOneof().IsSynthetic()
			wrapper := fd.Message() != nil && fd.Message().ParentFile().Path() == "google/protobuf/wrappers.proto"
			nullable := oneof || wrapper || fd.HasPresence() && fd.Message() == nil
			v := protoWantSingle(fd, m.Get(fd))
			switch {
			case nullable && !m.Has(fd):
				v = nil
			case oneof && fd.Message() != nil && fd.Message().FullName() != "google.protobuf.Timestamp":
				v = map[string]any{string(fd.Message().FullName()): v}
			case oneof && fd.Enum() != nil:
				v = map[string]any{string(fd.Enum().FullName()): v}
			case fd.Message() != nil && !m.Has(fd) && v == nil:
				v = ""
			}
			out[string(fd.Name())] = v
		}
	}
	return out
}

func protoWantSingle(fd protoreflect.FieldDescriptor, v protoreflect.Value) any {
	switch fd.Kind() {
	case protoreflect.MessageKind:
		m := v.Message()
		switch full := m.Descriptor().FullName(); {
		case full == "google.protobuf.Timestamp":
			fs := m.Descriptor().Fields()
			return time.Unix(m.Get(fs.ByName("seconds")).Int(), m.Get(fs.ByName("nanos")).Int()).UTC()
		case full == "google.protobuf.Struct":
			b, _ := protojson.Marshal(m.Interface())
			return string(b)
		case strings.HasPrefix(string(full), "google.protobuf.") && strings.HasSuffix(string(full), "Value") && full != "google.protobuf.Value":
			return protoWantSingle(m.Descriptor().Fields().ByName("value"), m.Get(m.Descriptor().Fields().ByName("value")))
		case full == "google.protobuf.Any" || full == "google.protobuf.Value" || full == "google.protobuf.ListValue":
			return nil
		}
		return protoWant(m)
	case protoreflect.EnumKind:
		return string(fd.Enum().Values().ByNumber(v.Enum()).Name())
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return int64(v.Uint())
	case protoreflect.FloatKind:
		return float32(v.Float())
	}
	return v.Interface()
}

// jsonWant is v as the JSON Schema mapping holds it: an absent property null, a date-time a
// time, an open object its JSON text, a record in a union keyed by its name.
func jsonWant(t *testing.T, rec *hamba.RecordSchema, v map[string]any) map[string]any {
	out := map[string]any{}
	for _, f := range rec.Fields() {
		x, ok := v[f.Name()]
		if !ok {
			out[f.Name()] = nil
			continue
		}
		out[f.Name()] = jsonWantValue(t, f.Type(), x)
	}
	return out
}

func jsonWantValue(t *testing.T, s hamba.Schema, v any) any {
	if r, ok := s.(*hamba.RefSchema); ok {
		s = r.Schema()
	}
	switch x := s.(type) {
	case *hamba.UnionSchema:
		if v == nil {
			return nil
		}
		for _, u := range x.Types() {
			if u.Type() != hamba.Null {
				w := jsonWantValue(t, u, v)
				if n, ok := u.(hamba.NamedSchema); ok {
					return map[string]any{n.FullName(): w}
				}
				if u.Type() == hamba.Array || u.Type() == hamba.Map {
					return map[string]any{string(u.Type()): w}
				}
				return w
			}
		}
	case *hamba.RecordSchema:
		return jsonWant(t, x, v.(map[string]any))
	case *hamba.ArraySchema:
		out := []any{}
		for _, e := range v.([]any) {
			out = append(out, jsonWantValue(t, x.Items(), e))
		}
		return out
	case *hamba.MapSchema:
		out := map[string]any{}
		for k, e := range v.(map[string]any) {
			out[k] = jsonWantValue(t, x.Values(), e)
		}
		return out
	}
	if ls, ok := s.(hamba.LogicalTypeSchema); ok && ls.Logical() != nil && ls.Logical().Type() == hamba.TimestampMicros {
		at, err := time.Parse(time.RFC3339Nano, v.(string))
		if err != nil {
			t.Fatal(err)
		}
		return at
	}
	if str, ok := v.(string); ok || s.Type() != hamba.String {
		if ok {
			return str
		}
		return v
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// TestStreamConfigSchemaErrors: a schema of the wrong type, a key or time field it lacks or
// of a kind that cannot be one, and the JSON-only poison kind elsewhere are each refused,
// naming the field.
func TestStreamConfigSchemaErrors(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile("../../deploy/streams/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	proto, js := read("shop-order.proto"), read("page-view.schema.json")
	imports := []string{"../../deploy/streams"}
	for _, tc := range []struct {
		cfg  StreamConfig
		want string
	}{
		{StreamConfig{Topic: "t", Schema: proto, SchemaType: sr.TypeProtobuf}, "shop-common.proto"},
		{StreamConfig{Topic: "t", Schema: js, SchemaType: sr.TypeProtobuf, ImportPaths: imports}, "compile the Protobuf schema"},
		{StreamConfig{Topic: "t", Schema: proto, SchemaType: sr.TypeProtobuf, ImportPaths: imports, KeyField: "nope"}, "key field nope: not in message shop.v1.Order"},
		{StreamConfig{Topic: "t", Schema: proto, SchemaType: sr.TypeProtobuf, ImportPaths: imports, KeyField: "customer"}, "key field customer is a message"},
		{StreamConfig{Topic: "t", Schema: proto, SchemaType: sr.TypeProtobuf, ImportPaths: imports, TimeField: "order_id"}, "want a google.protobuf.Timestamp"},
		{StreamConfig{Topic: "t", Schema: proto, SchemaType: sr.TypeProtobuf, ImportPaths: imports, PoisonKinds: []PoisonKind{PoisonRejected}}, `poison kind "rejected" is a JSON Schema stream's only`},
		{StreamConfig{Topic: "t", Schema: proto, SchemaType: sr.TypeJSON}, "schema:"},
		{StreamConfig{Topic: "t", Schema: js, SchemaType: sr.TypeJSON, KeyField: "user"}, "key field user is not a property of type string or integer"},
		{StreamConfig{Topic: "t", Schema: js, SchemaType: sr.TypeJSON, TimeField: "view_id"}, "time field view_id is not a property of type string with format date-time"},
	} {
		err := tc.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error with %q", tc.cfg.KeyField+tc.cfg.TimeField, err, tc.want)
		}
	}
}
