package claimstore

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"strconv"
	"strings"
)

// A segment is an append-only log of records, each 8-byte aligned:
//
//	crc32c (4) | kind (1) | 0 (1) | key length (2) | value length (4) | time, unix ms (8) | key | value | zero padding
//
// The crc covers everything after itself up to the padding. A record's position is its file
// offset divided by 8, so a segment's log holds up to 32 GiB. Kinds: a value, a deletion (no
// value), and the table's changelog offset (an 8-byte value), written before every write of the
// buffer, so that an offset record follows every record it covers.
//
// The newest segment is active: its index lives in memory. A sealed segment has its index in
// <id>.idx (a 64-byte header, then the slots, read with pread) and a Bloom filter of its keys
// in <id>.bloom (filter.go), held in memory; its log, compacted by the seal to each key's
// newest record and the segment's last offset record, is only read.
const (
	recHeader = 20

	kindPut    = 1
	kindDelete = 2
	kindOffset = 3

	// maxSegmentBytes keeps positions within 32 bits.
	maxSegmentBytes = 32<<30 - 1<<20

	idxHeader = 64
	idxMagic  = "BFCLAIM1"
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

func align8(n int) int { return (n + 7) &^ 7 }

// appendRecord appends a record to b.
func appendRecord(b []byte, kind byte, key string, value []byte, ts int64) []byte {
	n := recHeader + len(key) + len(value)
	start := len(b)
	b = append(b, make([]byte, align8(n))...)
	r := b[start:]
	r[4] = kind
	binary.LittleEndian.PutUint16(r[6:], uint16(len(key)))
	binary.LittleEndian.PutUint32(r[8:], uint32(len(value)))
	binary.LittleEndian.PutUint64(r[12:], uint64(ts))
	copy(r[recHeader:], key)
	copy(r[recHeader+len(key):], value)
	binary.LittleEndian.PutUint32(r[0:], crc32.Checksum(r[4:n], crcTable))
	return b
}

// record is a parsed record; key and value point into the bytes it was parsed from.
type record struct {
	kind  byte
	key   []byte
	value []byte
	ts    int64
	size  int // aligned length
}

// errTorn is a record cut short or failing its checksum: the end of what a crash left.
var errTorn = errors.New("claimstore: torn record")

// segmentIDs lists the segments in dir, oldest first: their names are zero-padded ids, and
// os.ReadDir sorts by name.
func segmentIDs(dir string) ([]uint64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("claimstore: %w", err)
	}
	var ids []uint64
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), ".log"); ok {
			if id, err := strconv.ParseUint(name, 10, 64); err == nil {
				ids = append(ids, id)
			}
		}
	}
	return ids, nil
}

// parseHeader reads the lengths of the record starting at b (at least recHeader bytes).
func parseHeader(b []byte) (kind byte, klen, vlen int) {
	return b[4], int(binary.LittleEndian.Uint16(b[6:])), int(binary.LittleEndian.Uint32(b[8:]))
}

// parseRecord parses the record at the start of b, checking its checksum.
func parseRecord(b []byte) (record, error) {
	if len(b) < recHeader {
		return record{}, errTorn
	}
	kind, klen, vlen := parseHeader(b)
	n := recHeader + klen + vlen
	if kind < kindPut || kind > kindOffset || n > len(b) {
		return record{}, errTorn
	}
	if crc32.Checksum(b[4:n], crcTable) != binary.LittleEndian.Uint32(b) {
		return record{}, errTorn
	}
	return record{kind: kind, key: b[recHeader : recHeader+klen], value: b[recHeader+klen : n],
		ts: int64(binary.LittleEndian.Uint64(b[12:])), size: align8(n)}, nil
}

// index is an open-addressing hash table of positions: each slot holds the key's 32-bit hash
// in its upper half and its record's position + 1 in its lower half (0: empty). The slot is
// chosen by the hash's low bits, so the table grows without reading a key; a key is told from
// another with the same hash by reading its record.
type index struct {
	slots []uint64
	n     int
}

func newIndex() *index { return &index{slots: make([]uint64, 1024)} }

func slotEntry(h uint32, pos uint32) uint64 { return uint64(h)<<32 | (uint64(pos) + 1) }

// find returns the slot holding a key of hash h for which match(pos) holds, or the empty slot
// where it would go.
func (x *index) find(h uint32, match func(pos uint32) bool) (int, bool) {
	mask := uint64(len(x.slots) - 1)
	for i := uint64(h) & mask; ; i = (i + 1) & mask {
		e := x.slots[i]
		if e == 0 {
			return int(i), false
		}
		if uint32(e>>32) == h && match(uint32(e)-1) {
			return int(i), true
		}
	}
}

// set writes slot (from find), growing the table past three quarters full; it reports
// whether the table grew (slots moved).
func (x *index) set(slot int, h uint32, pos uint32, found bool) bool {
	x.slots[slot] = slotEntry(h, pos)
	if found {
		return false
	}
	x.n++
	if x.n*4 <= len(x.slots)*3 {
		return false
	}
	old := x.slots
	x.slots = make([]uint64, 2*len(old))
	mask := uint64(len(x.slots) - 1)
	for _, e := range old {
		if e == 0 {
			continue
		}
		i := (e >> 32) & mask
		for x.slots[i] != 0 {
			i = (i + 1) & mask
		}
		x.slots[i] = e
	}
	return true
}

// segment is one time segment (see above).
type segment struct {
	id   uint64
	path string // without extension
	f    *os.File
	size int64  // bytes written to f
	buf  []byte // records appended after size, not yet written
	// prev is the bytes written last, at prevOff: recent records are read from memory.
	prev    []byte
	prevOff int64

	records      int   // value and deletion records
	firstTS      int64 // time of the first record: the segment covers [firstTS, firstTS+span)
	minTS, maxTS int64
	offset       int64 // newest changelog offset recorded (hasOffset)
	hasOffset    bool

	idx *index // active segment: in memory; nil once sealed
	// sealed segment:
	idxFile *os.File
	mask    uint64
	keys    int
	filter  *filter
}

func (g *segment) sealed() bool { return g.idx == nil }

// keyCount is the keys the segment indexes.
func (g *segment) keyCount() int {
	if g.idx != nil {
		return g.idx.n
	}
	return g.keys
}

// readBuf holds the bytes last read from a segment's file, so that a key check and the read of
// its record cost one pread.
type readBuf struct {
	b   []byte
	g   *segment
	off int64
}

// readAhead is how much a read from a file takes at least: most records fit.
const readAhead = 512

// readAt returns n bytes at file offset off: from the buffer, the previous buffer, rb, or the
// file (into rb). The bytes are valid until the next read.
func (g *segment) readAt(off int64, n int, rb *readBuf) ([]byte, error) {
	if off >= g.size {
		i := int(off - g.size)
		if i+n > len(g.buf) {
			return nil, fmt.Errorf("claimstore: read past the end of segment %d", g.id)
		}
		return g.buf[i : i+n], nil
	}
	if off >= g.prevOff && off+int64(n) <= g.prevOff+int64(len(g.prev)) {
		i := int(off - g.prevOff)
		return g.prev[i : i+n], nil
	}
	if rb.g == g && off >= rb.off && off+int64(n) <= rb.off+int64(len(rb.b)) {
		i := int(off - rb.off)
		return rb.b[i : i+n], nil
	}
	want := int64(max(n, readAhead))
	if off+want > g.size {
		want = g.size - off
	}
	if want < int64(n) {
		return nil, fmt.Errorf("claimstore: read past the end of segment %d", g.id)
	}
	if int64(cap(rb.b)) < want {
		rb.b = make([]byte, want)
	}
	rb.b = rb.b[:want]
	rb.g = nil
	if _, err := g.f.ReadAt(rb.b, off); err != nil {
		return nil, fmt.Errorf("claimstore: read segment %d: %w", g.id, err)
	}
	rb.g, rb.off = g, off
	return rb.b[:n], nil
}

// record reads the record at pos.
func (g *segment) record(pos uint32, rb *readBuf) (record, error) {
	off := int64(pos) * 8
	b, err := g.readAt(off, recHeader, rb)
	if err != nil {
		return record{}, err
	}
	_, klen, vlen := parseHeader(b)
	if b, err = g.readAt(off, recHeader+klen+vlen, rb); err != nil {
		return record{}, err
	}
	r, err := parseRecord(b)
	if err != nil {
		return record{}, fmt.Errorf("claimstore: segment %d position %d: %w", g.id, pos, err)
	}
	return r, nil
}

// keyAt reports whether the record at pos has key.
func (g *segment) keyAt(pos uint32, key string, rb *readBuf) bool {
	off := int64(pos) * 8
	b, err := g.readAt(off, recHeader, rb)
	if err != nil {
		return false
	}
	_, klen, _ := parseHeader(b)
	if klen != len(key) {
		return false
	}
	b, err = g.readAt(off, recHeader+klen, rb)
	return err == nil && string(b[recHeader:]) == key
}

// lookupSealed finds key (hash h) in a sealed segment's index file.
func (g *segment) lookupSealed(key string, h uint32, rb *readBuf) (uint32, bool, error) {
	var chunk [64]byte
	i := uint64(h) & g.mask
	for probed := uint64(0); probed <= g.mask; {
		// Read the slots from i to the end of its 8-slot line, or of the table.
		n := min(8-i%8, g.mask+1-i)
		b := chunk[:n*8]
		if _, err := g.idxFile.ReadAt(b, idxHeader+int64(i)*8); err != nil {
			return 0, false, fmt.Errorf("claimstore: read index of segment %d: %w", g.id, err)
		}
		for j := uint64(0); j < n; j++ {
			e := binary.LittleEndian.Uint64(b[j*8:])
			if e == 0 {
				return 0, false, nil
			}
			if uint32(e>>32) == h && g.keyAt(uint32(e)-1, key, rb) {
				return uint32(e) - 1, true, nil
			}
		}
		probed += n
		i = (i + n) & g.mask
	}
	return 0, false, nil
}

// scan reads the log from the start, calling fn for each record at its position; it
// returns the length of the intact prefix (a torn tail ends the scan).
func (g *segment) scan(fn func(pos uint32, r record)) (int64, error) { return g.scanFrom(0, fn) }

// scanReader reads records from g.f's current position, which is byte off of the log.
func (g *segment) scanReader(off int64, fn func(pos uint32, r record)) (int64, error) {
	br := bufio.NewReaderSize(g.f, 1<<20)
	var head [recHeader]byte
	var body []byte
	for {
		if _, err := io.ReadFull(br, head[:]); err != nil {
			return off, nil // end, or a torn header
		}
		_, klen, vlen := parseHeader(head[:])
		n := align8(recHeader + klen + vlen)
		if cap(body) < n {
			body = make([]byte, n)
		}
		body = body[:n]
		copy(body, head[:])
		if _, err := io.ReadFull(br, body[recHeader:]); err != nil {
			return off, nil
		}
		r, err := parseRecord(body)
		if err != nil {
			return off, nil
		}
		fn(uint32(off/8), r)
		off += int64(n)
	}
}

// writeIndexFile writes the sealed index: a header, then the slots.
func writeIndexFile(path string, g *segment) error {
	return writeFile(path, func(w *bufio.Writer) {
		var h [idxHeader]byte
		copy(h[:], idxMagic)
		binary.LittleEndian.PutUint64(h[8:], uint64(len(g.idx.slots)))
		binary.LittleEndian.PutUint64(h[16:], uint64(g.idx.n))
		binary.LittleEndian.PutUint64(h[24:], uint64(g.minTS))
		binary.LittleEndian.PutUint64(h[32:], uint64(g.maxTS))
		binary.LittleEndian.PutUint64(h[40:], uint64(g.offset))
		if g.hasOffset {
			h[48] = 1
		}
		binary.LittleEndian.PutUint64(h[52:], uint64(g.records))
		w.Write(h[:])
		writeWords(w, g.idx.slots)
	})
}

// writeWords writes xs little-endian.
func writeWords(w *bufio.Writer, xs []uint64) {
	var b [8]byte
	for _, x := range xs {
		binary.LittleEndian.PutUint64(b[:], x)
		w.Write(b[:])
	}
}

// writeFile writes a file whole, through a temporary file renamed into place once synced, so
// a crash leaves the old file or the new one, never half of it.
func writeFile(path string, write func(w *bufio.Writer)) error {
	return writeFileChecked(path, func(w *bufio.Writer) error { write(w); return nil })
}

// writeFileChecked is writeFile with a write that can fail, which leaves the old file.
func writeFileChecked(path string, write func(w *bufio.Writer) error) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	err = errors.Join(write(w), w.Flush(), f.Sync(), f.Close())
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// readIndexHeader loads a sealed segment's header fields.
func (g *segment) readIndexHeader() error {
	var h [idxHeader]byte
	if _, err := g.idxFile.ReadAt(h[:], 0); err != nil {
		return err
	}
	if string(h[:8]) != idxMagic {
		return fmt.Errorf("claimstore: %s.idx: not an index file", g.path)
	}
	slots := binary.LittleEndian.Uint64(h[8:])
	if slots == 0 || slots&(slots-1) != 0 {
		return fmt.Errorf("claimstore: %s.idx: %d slots", g.path, slots)
	}
	g.mask = slots - 1
	g.keys = int(binary.LittleEndian.Uint64(h[16:]))
	g.minTS = int64(binary.LittleEndian.Uint64(h[24:]))
	g.maxTS = int64(binary.LittleEndian.Uint64(h[32:]))
	g.offset = int64(binary.LittleEndian.Uint64(h[40:]))
	g.hasOffset = h[48] == 1
	g.records = int(binary.LittleEndian.Uint64(h[52:]))
	return nil
}
