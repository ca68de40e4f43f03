// Package tablecodec is the compact binary layout of backflow's goka table and loopback values
// (ingest's dedupe claims, the feature sink's entries and deltas): a format byte, then
// varints, length-prefixed strings and fixed-width floats, in an order each codec documents.
//
// Values written by earlier versions are JSON objects. A JSON object starts with '{', a binary
// value with FormatV1, so Detect tells the two apart by the first byte and a group upgraded in
// place reads its existing table (and loopback messages still in flight) without a reset. New
// values are always written in the binary layout; a table converts as its keys are written.
//
// Encoding appends to a byte slice (Writer); decoding reads through a Reader whose first error
// sticks, so a codec reads every field and checks Err once at the end.
package tablecodec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// FormatV1 is the first byte of a value in this package's layout, version 1. It can never
// start a JSON document (which starts with '{', '[', '"', a digit, a letter or whitespace).
const FormatV1 byte = 0x01

// Format is how a stored value is encoded.
type Format int

const (
	// FormatUnknown: neither JSON nor a known binary version (an error for the codec).
	FormatUnknown Format = iota
	// FormatJSON: a JSON object, as written before the binary layout existed.
	FormatJSON
	// FormatBinary: this package's layout, version 1.
	FormatBinary
)

// Detect tells the format of b by its first byte.
func Detect(b []byte) Format {
	switch {
	case len(b) == 0:
		return FormatUnknown
	case b[0] == FormatV1:
		return FormatBinary
	case b[0] == '{':
		return FormatJSON
	}
	return FormatUnknown
}

// ErrCorrupt is wrapped by every decoding error: the value ends early, has bytes left over, or
// holds an impossible length.
var ErrCorrupt = errors.New("tablecodec: corrupt value")

// Writer appends fields to a value. The zero Writer is not usable: start with NewWriter.
type Writer struct{ b []byte }

// NewWriter starts a value with the format byte and kind, in a buffer of capacity hint.
func NewWriter(kind byte, hint int) *Writer {
	b := make([]byte, 0, max(hint, 16))
	return &Writer{b: append(b, FormatV1, kind)}
}

// Bytes returns the encoded value.
func (w *Writer) Bytes() []byte { return w.b }

// Uint appends an unsigned varint.
func (w *Writer) Uint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }

// Byte appends one byte (flags, a code).
func (w *Writer) Byte(v byte) { w.b = append(w.b, v) }

// Int appends a zig-zag varint.
func (w *Writer) Int(v int64) { w.b = binary.AppendVarint(w.b, v) }

// Bool appends one byte, 0 or 1.
func (w *Writer) Bool(v bool) {
	if v {
		w.b = append(w.b, 1)
	} else {
		w.b = append(w.b, 0)
	}
}

// String appends a length-prefixed string.
func (w *Writer) String(s string) {
	w.b = binary.AppendUvarint(w.b, uint64(len(s)))
	w.b = append(w.b, s...)
}

// Float32 appends 4 bytes, little endian IEEE 754 (exact).
func (w *Writer) Float32(v float32) { w.b = binary.LittleEndian.AppendUint32(w.b, math.Float32bits(v)) }

// Time appends t as Unix seconds and nanoseconds (exact to the nanosecond; the location is not
// kept: Reader.Time returns UTC). The zero time round-trips to the zero time.
func (w *Writer) Time(t time.Time) {
	w.Int(t.Unix())
	w.Uint(uint64(t.Nanosecond()))
}

// Reader reads the fields of a value in the order they were written. After the first error
// every read returns the zero value; Err reports it.
type Reader struct {
	b   []byte
	err error
}

// NewReader checks the format byte and returns the value's kind byte and a reader positioned
// after it.
func NewReader(b []byte) (*Reader, byte, error) {
	if len(b) < 2 || b[0] != FormatV1 {
		return nil, 0, fmt.Errorf("%w: no version-1 header", ErrCorrupt)
	}
	return &Reader{b: b[2:]}, b[1], nil
}

func (r *Reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrCorrupt, what)
	}
	r.b = nil
}

// Uint reads an unsigned varint.
func (r *Reader) Uint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("bad unsigned varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// Int reads a zig-zag varint.
func (r *Reader) Int() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// Int32 reads a zig-zag varint that must fit in 32 bits.
func (r *Reader) Int32() int32 {
	v := r.Int()
	if v < math.MinInt32 || v > math.MaxInt32 {
		r.fail("int32 out of range")
		return 0
	}
	return int32(v)
}

// Len reads a count of items each at least min bytes long; a count the rest of the value cannot
// hold is an error, so a corrupt count never allocates.
func (r *Reader) Len(min int) int {
	n := r.Uint()
	if r.err == nil && n > uint64(len(r.b)/max(min, 1)) {
		r.fail("count longer than the value")
		return 0
	}
	return int(n)
}

// Fail makes what was read an error (a value valid byte by byte that the codec rejects, such
// as an unknown code); the first error sticks.
func (r *Reader) Fail(what string) { r.fail(what) }

// Byte reads one byte.
func (r *Reader) Byte() byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) == 0 {
		r.fail("byte past the end")
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

// Bool reads one byte, 0 or 1.
func (r *Reader) Bool() bool {
	if r.err != nil {
		return false
	}
	if len(r.b) == 0 || r.b[0] > 1 {
		r.fail("bad bool")
		return false
	}
	v := r.b[0] == 1
	r.b = r.b[1:]
	return v
}

// String reads a length-prefixed string.
func (r *Reader) String() string {
	n := r.Len(1)
	if r.err != nil {
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// StringIn reads a length-prefixed string as String does, returning in's copy of it, so a
// value read over and over (a topic or slot name) is allocated once.
func (r *Reader) StringIn(in *Interner) string {
	n := r.Len(1)
	if r.err != nil {
		return ""
	}
	s := in.intern(r.b[:n])
	r.b = r.b[n:]
	return s
}

// Interner keeps one copy of each string it was given, up to a bound (past it, strings are
// copied each time). Safe for concurrent use; the zero value is ready.
type Interner struct {
	mu sync.RWMutex
	m  map[string]string
}

// maxInterned bounds an Interner: it is meant for a few names, not for keys.
const maxInterned = 1024

func (in *Interner) intern(b []byte) string {
	in.mu.RLock()
	s, ok := in.m[string(b)] // no allocation: a map index by string(bytes)
	in.mu.RUnlock()
	if ok {
		return s
	}
	s = string(b)
	in.mu.Lock()
	if in.m == nil {
		in.m = map[string]string{}
	}
	if len(in.m) < maxInterned {
		in.m[s] = s
	}
	in.mu.Unlock()
	return s
}

// Float32 reads 4 bytes written by Writer.Float32.
func (r *Reader) Float32() float32 {
	if r.err != nil {
		return 0
	}
	if len(r.b) < 4 {
		r.fail("float32 ends early")
		return 0
	}
	v := math.Float32frombits(binary.LittleEndian.Uint32(r.b))
	r.b = r.b[4:]
	return v
}

// Time reads a time written by Writer.Time, in UTC; the zero time stays the zero time.
func (r *Reader) Time() time.Time {
	s, ns := r.Int(), r.Uint()
	if r.err != nil {
		return time.Time{}
	}
	if ns >= 1e9 {
		r.fail("nanoseconds out of range")
		return time.Time{}
	}
	return time.Unix(s, int64(ns)).UTC()
}

// Err is the first error, or an error when bytes are left over; call it after the last field.
func (r *Reader) Err() error {
	if r.err == nil && len(r.b) > 0 {
		return fmt.Errorf("%w: %d bytes left over", ErrCorrupt, len(r.b))
	}
	return r.err
}
