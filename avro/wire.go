package avro

import (
	"encoding/binary"
	"fmt"
)

// HeaderSize is the length of the Confluent wire-format header: magic byte 0 and a 4-byte
// big-endian schema id.
const HeaderSize = 5

// AppendFrame appends the header for schema id to dst.
func AppendFrame(dst []byte, id int) []byte {
	dst = append(dst, 0)
	return binary.BigEndian.AppendUint32(dst, uint32(id))
}

// Unframe splits a framed value into its schema id and Avro body. It fails with ErrNotFramed.
func Unframe(b []byte) (id int, body []byte, err error) {
	if len(b) < HeaderSize {
		return 0, nil, &DecodeError{Kind: ErrNotFramed, Err: fmt.Errorf("%d bytes, shorter than the %d-byte header", len(b), HeaderSize)}
	}
	if b[0] != 0 {
		return 0, nil, &DecodeError{Kind: ErrNotFramed, Err: fmt.Errorf("magic byte %#02x, want 0x00", b[0])}
	}
	return int(binary.BigEndian.Uint32(b[1:HeaderSize])), b[HeaderSize:], nil
}
