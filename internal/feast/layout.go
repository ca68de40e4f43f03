package feast

// Feast's Redis online-store layout, byte for byte, as Feast 0.67.0 writes and reads it
// (sdk/python/feast/infra/online_stores/redis.py, helpers.py and key_encoding_utils.py with
// entity_key_serialization_version 3, the only version 0.67 does not deprecate). The version is
// pinned in deploy/feast/setup.sh (FEAST_VERSION) and deploy/feast/feature_store.yaml; change
// them together.
//
// Redis key (one hash per entity and project; all feature views of that entity share it):
//
//	u32le(number of join keys)
//	for each join key, sorted:  u32le(ValueType.STRING=2) u32le(len(name)) name
//	for each value, same order: u32le(value type) u32le(len(bytes)) bytes
//	project name (UTF-8)
//
// A string value's bytes are its UTF-8, an int64 value's are 8 bytes little-endian.
//
// Hash fields:
//
//	mmh3("<view>:<feature>")  -> serialized feast.types.Value
//	"_ts:<view>"              -> serialized google.protobuf.Timestamp (event time)
//
// where mmh3 is 32-bit MurmurHash3 (x86_32, seed 0) of the UTF-8 string, as 4 bytes
// little-endian. Protos are encoded by hand with protowire; field numbers are those of
// protos/feast/types/Value.proto and google/protobuf/timestamp.proto.

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"sort"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// FeastVersion is the Feast release whose Redis layout this file reproduces.
const FeastVersion = "0.67.0"

// EntityKeySerializationVersion is the feature_store.yaml setting that matches EntityKey.
const EntityKeySerializationVersion = 3

// Feast's ValueType enum (Value.proto), for the types backflow writes.
const (
	ValueTypeString = 2
	ValueTypeInt64  = 4
)

// EntityValue is one join key and its value. Exactly one of String and Int64 is meant;
// IsInt selects Int64.
type EntityValue struct {
	JoinKey string
	String  string
	Int64   int64
	IsInt   bool
}

// StringEntity is a join key with a string value, as every backflow entity is.
func StringEntity(joinKey, value string) EntityValue {
	return EntityValue{JoinKey: joinKey, String: value}
}

// SerializeEntityKey is Feast's serialize_entity_key, version 3.
func SerializeEntityKey(vals ...EntityValue) []byte {
	sorted := append([]EntityValue(nil), vals...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].JoinKey < sorted[j].JoinKey })
	var b []byte
	b = binary.LittleEndian.AppendUint32(b, uint32(len(sorted)))
	for _, v := range sorted {
		b = binary.LittleEndian.AppendUint32(b, ValueTypeString)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(v.JoinKey)))
		b = append(b, v.JoinKey...)
	}
	for _, v := range sorted {
		if v.IsInt {
			b = binary.LittleEndian.AppendUint32(b, ValueTypeInt64)
			b = binary.LittleEndian.AppendUint32(b, 8)
			b = binary.LittleEndian.AppendUint64(b, uint64(v.Int64))
			continue
		}
		b = binary.LittleEndian.AppendUint32(b, ValueTypeString)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(v.String)))
		b = append(b, v.String...)
	}
	return b
}

// RedisKey is the Redis key of an entity in a Feast project: the serialized entity key
// followed by the project name.
func RedisKey(project string, vals ...EntityValue) string {
	return string(append(SerializeEntityKey(vals...), project...))
}

// FieldKey is the hash field of a feature: mmh3("<view>:<feature>") as 4 bytes little-endian.
func FieldKey(view, feature string) string {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], Murmur3([]byte(view+":"+feature), 0))
	return string(b[:])
}

// TimestampField is the hash field holding a feature view's event timestamp.
func TimestampField(view string) string { return "_ts:" + view }

// Murmur3 is MurmurHash3 x86_32, what Python's mmh3.hash(key, signed=False) computes.
func Murmur3(data []byte, seed uint32) uint32 {
	const c1, c2 = 0xcc9e2d51, 0x1b873593
	h := seed
	n := len(data) / 4
	for i := 0; i < n; i++ {
		k := binary.LittleEndian.Uint32(data[i*4:])
		k *= c1
		k = bits.RotateLeft32(k, 15)
		k *= c2
		h ^= k
		h = bits.RotateLeft32(h, 13)
		h = h*5 + 0xe6546b64
	}
	tail := data[n*4:]
	var k uint32
	switch len(tail) {
	case 3:
		k ^= uint32(tail[2]) << 16
		fallthrough
	case 2:
		k ^= uint32(tail[1]) << 8
		fallthrough
	case 1:
		k ^= uint32(tail[0])
		k *= c1
		k = bits.RotateLeft32(k, 15)
		k *= c2
		h ^= k
	}
	h ^= uint32(len(data))
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}

// Field numbers of feast.types.Value's oneof val (Value.proto).
const (
	fieldStringVal        protowire.Number = 2
	fieldInt64Val         protowire.Number = 4
	fieldDoubleVal        protowire.Number = 5
	fieldFloatVal         protowire.Number = 6
	fieldBoolVal          protowire.Number = 7
	fieldUnixTimestampVal protowire.Number = 8
	fieldStringListVal    protowire.Number = 12
)

// A oneof member has presence in proto3, so a zero value is still written (as Python's
// SerializeToString does).

// StringValue is a serialized Value{string_val}.
func StringValue(s string) []byte {
	b := protowire.AppendTag(nil, fieldStringVal, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// Int64Value is a serialized Value{int64_val}.
func Int64Value(v int64) []byte {
	b := protowire.AppendTag(nil, fieldInt64Val, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(v))
}

// DecodeInt64Value reads what Int64Value wrote.
func DecodeInt64Value(b []byte) (int64, error) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 || num != fieldInt64Val || typ != protowire.VarintType {
		return 0, fmt.Errorf("features: not an int64 Value: %x", b)
	}
	v, m := protowire.ConsumeVarint(b[n:])
	if m < 0 {
		return 0, fmt.Errorf("features: int64 Value: bad varint %x", b)
	}
	return int64(v), nil
}

// DoubleValue is a serialized Value{double_val}.
func DoubleValue(v float64) []byte {
	b := protowire.AppendTag(nil, fieldDoubleVal, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, math.Float64bits(v))
}

// FloatValue is a serialized Value{float_val}.
func FloatValue(v float32) []byte {
	b := protowire.AppendTag(nil, fieldFloatVal, protowire.Fixed32Type)
	return protowire.AppendFixed32(b, math.Float32bits(v))
}

// BoolValue is a serialized Value{bool_val}.
func BoolValue(v bool) []byte {
	b := protowire.AppendTag(nil, fieldBoolVal, protowire.VarintType)
	return protowire.AppendVarint(b, protowire.EncodeBool(v))
}

// UnixTimestampValue is a serialized Value{unix_timestamp_val}: whole seconds since the epoch,
// as Feast stores UnixTimestamp features.
func UnixTimestampValue(t time.Time) []byte {
	b := protowire.AppendTag(nil, fieldUnixTimestampVal, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(t.Unix()))
}

// StringListValue is a serialized Value{string_list_val: StringList{val}}.
func StringListValue(vals []string) []byte {
	var list []byte
	for _, v := range vals {
		list = protowire.AppendTag(list, 1, protowire.BytesType)
		list = protowire.AppendString(list, v)
	}
	b := protowire.AppendTag(nil, fieldStringListVal, protowire.BytesType)
	return protowire.AppendBytes(b, list)
}

// Timestamp is a serialized google.protobuf.Timestamp (seconds = 1, nanos = 2; zero fields
// are omitted, as proto3 does).
func Timestamp(t time.Time) []byte {
	var b []byte
	if s := t.Unix(); s != 0 {
		b = protowire.AppendTag(b, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(s))
	}
	if n := t.Nanosecond(); n != 0 {
		b = protowire.AppendTag(b, 2, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(n))
	}
	return b
}

// View is a feature view's hash fields, worked out once: the mmh3 field of each feature, in
// the order NewView was given them, and the event-time field. Every row of a view writes the
// same fields, so a writer that builds rows through its View hashes no field name per row.
type View struct {
	name   string
	fields []any // FieldKey(name, feature) of each feature, as HSET arguments
	ts     any   // TimestampField(name)
}

// NewView returns the view's hash fields for features, in that order.
func NewView(name string, features ...string) *View {
	v := &View{name: name, fields: make([]any, len(features)), ts: TimestampField(name)}
	for i, f := range features {
		v.fields[i] = FieldKey(name, f)
	}
	return v
}

// AppendRow appends one row of the view to dst as HSET arguments (field, value, …): each
// feature's field with values[i], the serialized Value of feature i, and the event time under
// _ts:<view>. A row must give one value per feature; AppendRow panics otherwise, as a row
// that does not match its view is a bug in the code that builds it.
func (v *View) AppendRow(dst []any, eventTime time.Time, values ...[]byte) []any {
	if len(values) != len(v.fields) {
		panic(fmt.Sprintf("feast: view %s has %d features, the row gives %d values", v.name, len(v.fields), len(values)))
	}
	for i, f := range v.fields {
		dst = append(dst, f, values[i])
	}
	return append(dst, v.ts, Timestamp(eventTime))
}
