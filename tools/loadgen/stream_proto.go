package loadgen

// A Protobuf stream's records: the schema compiled with protocompile (as the product's
// decoder compiles it), each record a dynamicpb message of the file's first message with
// random valid values, marshalled by the protobuf runtime and framed in the Confluent wire
// format with message index [0].

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/bufbuild/protocompile"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/backflowhq/backflow/avro"
)

// protoMainFile is the path the stream's own schema is compiled under.
const protoMainFile = "loadgen-stream.proto"

// maxProtoDepth bounds how deep nested messages are filled.
const maxProtoDepth = 8

type protoFormat struct {
	g    *StreamGenerator
	cfg  StreamConfig
	reg  avro.Registry
	file protoreflect.FileDescriptor
	msg  protoreflect.MessageDescriptor
	// indexes are msg's Confluent message indexes, framed before each record.
	indexes []int
	srcs    map[string]string  // import path → text, for the imports read from ImportPaths
	last    *dynamicpb.Message // the last record made (tests compare what is read back with it)
}

func newProtoFormat(cfg StreamConfig, g *StreamGenerator, reg avro.Registry) (*protoFormat, error) {
	f := &protoFormat{g: g, cfg: cfg, reg: reg, srcs: map[string]string{}}
	comp := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{Accessor: f.open})}
	files, err := comp.Compile(context.Background(), protoMainFile)
	if err != nil {
		return nil, fmt.Errorf("schema: compile the Protobuf schema: %w", err)
	}
	f.file = files[0]
	if f.msg, err = avro.ProtoMessage(f.file, cfg.Message); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	f.indexes = avro.ProtoMessageIndexes(f.msg)
	var errs []error
	if cfg.KeyField != "" {
		if fd, err := protoPath(f.msg, cfg.KeyField); err != nil {
			errs = append(errs, fmt.Errorf("key field %s: %w", cfg.KeyField, err))
		} else if !protoKeyKind(fd.Kind()) {
			errs = append(errs, fmt.Errorf("key field %s is a %s; want a string or an integer", cfg.KeyField, fd.Kind()))
		}
	}
	if cfg.TimeField != "" {
		if fd, err := protoPath(f.msg, cfg.TimeField); err != nil {
			errs = append(errs, fmt.Errorf("time field %s: %w", cfg.TimeField, err))
		} else if fd.Message() == nil || fd.Message().FullName() != "google.protobuf.Timestamp" {
			errs = append(errs, fmt.Errorf("time field %s is a %s; want a google.protobuf.Timestamp", cfg.TimeField, fd.Kind()))
		}
	}
	return f, errors.Join(errs...)
}

// open reads the schema itself, or an import from the import paths (os.ErrNotExist for one
// that is not there: the standard imports are tried next).
func (f *protoFormat) open(path string) (io.ReadCloser, error) {
	if path == protoMainFile {
		return io.NopCloser(strings.NewReader(f.cfg.Schema)), nil
	}
	for _, dir := range f.cfg.ImportPaths {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(path)))
		if err == nil {
			f.srcs[path] = string(b)
			return io.NopCloser(strings.NewReader(string(b))), nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	return nil, fmt.Errorf("import %s: not in the import paths %v: %w", path, f.cfg.ImportPaths, os.ErrNotExist)
}

// protoPath is the singular field at a dot path in md.
func protoPath(md protoreflect.MessageDescriptor, path string) (protoreflect.FieldDescriptor, error) {
	parts := strings.Split(path, ".")
	for i, name := range parts {
		fd := md.Fields().ByName(protoreflect.Name(name))
		switch {
		case fd == nil:
			return nil, fmt.Errorf("not in message %s", md.FullName())
		case fd.IsList() || fd.IsMap():
			return nil, errors.New("repeated; want a singular field")
		case i == len(parts)-1:
			return fd, nil
		case fd.Message() == nil:
			return nil, fmt.Errorf("%s is not a message", name)
		}
		md = fd.Message()
	}
	return nil, errors.New("empty path")
}

func protoKeyKind(k protoreflect.Kind) bool {
	switch k {
	case protoreflect.StringKind, protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind, protoreflect.Uint32Kind,
		protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return true
	}
	return false
}

// register registers the imports read from the import paths (theirs first), each under
// ReferencePrefix + its path, then the schema with its references.
func (f *protoFormat) register(ctx context.Context) (int, error) {
	done := map[string]sr.SchemaReference{}
	refs, err := f.registerImports(ctx, f.file, done)
	if err != nil {
		return 0, err
	}
	return avro.RegisterSchema(ctx, f.reg, f.cfg.Subject, sr.Schema{Schema: f.cfg.Schema, Type: sr.TypeProtobuf, References: refs})
}

// registerImports registers fd's imports that are not standard ones and returns them as
// references.
func (f *protoFormat) registerImports(ctx context.Context, fd protoreflect.FileDescriptor, done map[string]sr.SchemaReference) ([]sr.SchemaReference, error) {
	var refs []sr.SchemaReference
	for i := range fd.Imports().Len() {
		imp := fd.Imports().Get(i).FileDescriptor
		text, ok := f.srcs[imp.Path()]
		if !ok {
			continue // a standard import, which the registry knows
		}
		if ref, ok := done[imp.Path()]; ok {
			refs = append(refs, ref)
			continue
		}
		theirs, err := f.registerImports(ctx, imp, done)
		if err != nil {
			return nil, err
		}
		subject := f.cfg.ReferencePrefix + imp.Path()
		schema := sr.Schema{Schema: text, Type: sr.TypeProtobuf, References: theirs}
		if _, err := avro.RegisterSchema(ctx, f.reg, subject, schema); err != nil {
			return nil, fmt.Errorf("import %s: %w", imp.Path(), err)
		}
		ss, err := f.reg.LookupSchema(ctx, subject, schema)
		if err != nil {
			return nil, fmt.Errorf("import %s: its version under %s: %w", imp.Path(), subject, err)
		}
		ref := sr.SchemaReference{Name: imp.Path(), Subject: subject, Version: ss.Version}
		done[imp.Path()] = ref
		refs = append(refs, ref)
	}
	return refs, nil
}

func (f *protoFormat) record(_ context.Context, id, n int) ([]byte, string, error) {
	m := f.message(f.msg, map[protoreflect.FullName]bool{})
	key := f.g.key(n)
	if f.cfg.KeyField != "" {
		msg, fd := protoLeaf(m, f.cfg.KeyField)
		if fd.Kind() != protoreflect.StringKind {
			key = fmt.Sprint(n)
		}
		msg.Set(fd, protoScalar(fd.Kind(), key, n))
	}
	if f.cfg.TimeField != "" {
		msg, fd := protoLeaf(m, f.cfg.TimeField)
		at := f.g.eventTime(n)
		ts := msg.Mutable(fd).Message()
		ts.Set(ts.Descriptor().Fields().ByName("seconds"), protoreflect.ValueOfInt64(at.Unix()))
		ts.Set(ts.Descriptor().Fields().ByName("nanos"), protoreflect.ValueOfInt32(int32(at.Nanosecond())))
	}
	f.last = m
	body, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return nil, "", fmt.Errorf("loadgen: marshal record %d: %w", n, err)
	}
	var h sr.ConfluentHeader
	value, err := h.AppendEncode(nil, id, f.indexes)
	if err != nil {
		return nil, "", err
	}
	return append(value, body...), key, nil
}

// protoLeaf is the message holding the field at path in m (its parents made) and the field.
func protoLeaf(m protoreflect.Message, path string) (protoreflect.Message, protoreflect.FieldDescriptor) {
	parts := strings.Split(path, ".")
	for _, name := range parts[:len(parts)-1] {
		m = m.Mutable(m.Descriptor().Fields().ByName(protoreflect.Name(name))).Message()
	}
	return m, m.Descriptor().Fields().ByName(protoreflect.Name(parts[len(parts)-1]))
}

// protoScalar is a key: the text for a string field, n for an integer one.
func protoScalar(k protoreflect.Kind, text string, n int) protoreflect.Value {
	switch k {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(text)
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(n))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(n))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(uint64(n))
	}
	return protoreflect.ValueOfInt64(int64(n))
}

// message is a message of md with random valid values: each field set (a member of a oneof
// for one member or none, a field with presence two times in three), up to maxProtoDepth;
// a message inside its own definition is left unset.
func (f *protoFormat) message(md protoreflect.MessageDescriptor, open map[protoreflect.FullName]bool) *dynamicpb.Message {
	g := f.g
	m := dynamicpb.NewMessage(md)
	open[md.FullName()] = true
	defer delete(open, md.FullName())
	chosen := map[protoreflect.FullName]int{} // oneof → the member set (-1: none)
	for i := range md.Oneofs().Len() {
		if o := md.Oneofs().Get(i); !o.IsSynthetic() {
			chosen[o.FullName()] = g.rng.IntN(o.Fields().Len()+1) - 1
		}
	}
	for i := range md.Fields().Len() {
		fd := md.Fields().Get(i)
		if o := fd.ContainingOneof(); o != nil && !o.IsSynthetic() {
			if c := chosen[o.FullName()]; c < 0 || o.Fields().Get(c) != fd {
				continue
			}
		} else if fd.HasPresence() && fd.Message() == nil && g.rng.IntN(3) == 0 {
			continue
		}
		switch {
		case fd.IsList():
			list := m.Mutable(fd).List()
			for range g.rng.IntN(4) {
				if v, ok := f.single(fd, open); ok {
					list.Append(v)
				}
			}
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			for range g.rng.IntN(4) {
				k, _ := f.single(fd.MapKey(), open)
				if v, ok := f.single(fd.MapValue(), open); ok {
					mp.Set(k.MapKey(), v)
				}
			}
		default:
			if v, ok := f.single(fd, open); ok {
				m.Set(fd, v)
			}
		}
	}
	return m
}

// single is one random value of fd's kind; false leaves the field unset (a message that
// contains itself, Any, Value, ListValue, a wrapper one time in three).
func (f *protoFormat) single(fd protoreflect.FieldDescriptor, open map[protoreflect.FullName]bool) (protoreflect.Value, bool) {
	g := f.g
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return f.messageValue(fd.Message(), open)
	case protoreflect.EnumKind:
		vals := fd.Enum().Values()
		return protoreflect.ValueOfEnum(vals.Get(g.rng.IntN(vals.Len())).Number()), true
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(g.rng.IntN(2) == 1), true
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(g.rng.Int32N(20000) - 10000), true
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(g.rng.Int64N(1<<41) - 1<<40), true
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(g.rng.Uint32()), true
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(uint64(g.rng.Int64N(1 << 40))), true // within Int64: the table's column
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32(g.rng.IntN(1000)) / 8), true // exact in binary
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(float64(g.rng.IntN(100000)) / 16), true
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(g.text()), true
	case protoreflect.BytesKind:
		b := make([]byte, g.rng.IntN(16))
		for i := range b {
			b[i] = byte(g.rng.IntN(256))
		}
		return protoreflect.ValueOfBytes(b), true
	}
	return protoreflect.Value{}, false
}

// messageValue is a random message of md: a Timestamp within the hour before the event
// start, a Struct of a few words, a wrapper's value, or a message of its own fields.
func (f *protoFormat) messageValue(md protoreflect.MessageDescriptor, open map[protoreflect.FullName]bool) (protoreflect.Value, bool) {
	g := f.g
	switch full := md.FullName(); {
	case open[full] || len(open) >= maxProtoDepth || full == "google.protobuf.Any" || full == "google.protobuf.Value" || full == "google.protobuf.ListValue":
		return protoreflect.Value{}, false
	case full == "google.protobuf.Timestamp":
		at := g.cfg.EventStart.Add(-time.Duration(g.rng.IntN(3600_000_000)) * time.Microsecond)
		m := dynamicpb.NewMessage(md)
		m.Set(md.Fields().ByName("seconds"), protoreflect.ValueOfInt64(at.Unix()))
		m.Set(md.Fields().ByName("nanos"), protoreflect.ValueOfInt32(int32(at.Nanosecond())))
		return protoreflect.ValueOfMessage(m), true
	case full == "google.protobuf.Struct":
		m := dynamicpb.NewMessage(md)
		fields := m.Mutable(md.Fields().ByName("fields")).Map()
		valueMD := md.Fields().ByName("fields").MapValue().Message()
		for range g.rng.IntN(3) {
			v := dynamicpb.NewMessage(valueMD)
			v.Set(valueMD.Fields().ByName("string_value"), protoreflect.ValueOfString(g.text()))
			fields.Set(protoreflect.ValueOfString(vocabulary[g.rng.IntN(len(vocabulary))]).MapKey(), protoreflect.ValueOfMessage(v))
		}
		return protoreflect.ValueOfMessage(m), true
	case md.ParentFile() != nil && md.ParentFile().Path() == "google/protobuf/wrappers.proto":
		if g.rng.IntN(3) == 0 {
			return protoreflect.Value{}, false
		}
		m := dynamicpb.NewMessage(md)
		fd := md.Fields().ByName("value")
		v, _ := f.single(fd, open)
		m.Set(fd, v)
		return protoreflect.ValueOfMessage(m), true
	}
	return protoreflect.ValueOfMessage(f.message(md, open)), true
}

// truncate drops a value's last byte: the message's last field then lacks its value (or
// part of it), which no reading accepts.
func (f *protoFormat) truncate(valid []byte) []byte { return valid[:len(valid)-1] }

func (f *protoFormat) reject(valid []byte) []byte { return valid } // refused by Validate
