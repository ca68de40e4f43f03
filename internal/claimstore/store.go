package claimstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/lovoo/goka/storage"
)

// bufSize is how many bytes of records a store gathers before one write().
const bufSize = 1 << 20

// ErrClosed is returned by a Store used after Close.
var ErrClosed = errors.New("claimstore: closed")

// Store is one table partition's store (see the package doc). It implements goka's
// storage.Storage; goka calls it from the partition's goroutine and SetOffset from its
// producer's callbacks, so one mutex guards it.
type Store struct {
	cfg Config
	dir string
	now func() time.Time

	mu        sync.Mutex
	segs      []*segment // oldest first; the last may be active
	nextID    uint64
	offset    int64 // newest offset from SetOffset or the log (hasOffset)
	hasOffset bool
	written   int64 // offset in the last offset record written (hasWritten)
	hasWrite  bool
	recovered bool
	flushed   time.Time
	nextDrop  time.Time
	closed    bool
	rb        readBuf
	locs      []uint64
	// last is the active index slot of the last key looked up, for the Set that follows
	// (valid while gen is unchanged).
	last struct {
		key   string
		seg   *segment
		slot  int
		found bool
		gen   uint64
	}
	gen     uint64
	skipped int64 // expired changelog records skipped by SetAt
	// What Open read to rebuild what a clean Close did not leave (Stats).
	openScanned      int64
	openRebuiltUnion bool

	// union is a filter of every sealed segment's keys (by their index hash): a key it does
	// not hold is in no sealed segment, which a first sighting learns from one cache line
	// instead of one per segment. It may still hold the keys of dropped segments (unionDead of
	// its unionKeys), which only costs false positives; it is rebuilt once a quarter of it is
	// dead or it is full (unionCap).
	union     *filter
	unionKeys int
	unionDead int
	unionCap  int
}

var _ storage.Storage = (*Store)(nil)

// Open opens (or creates) the store in dir: sealed segments are loaded (their Bloom filters
// read into memory), an unsealed one is scanned to rebuild its index (a torn tail, what a
// crash can leave, is cut off) and sealed unless it is the newest, and expired segments are
// dropped. After a clean Close, the newest segment's index and the union filter are read from
// the files Close wrote instead of rebuilt (reopen.go): a reopen then reads the filters and
// at most MaxActiveKeys index slots, whatever the store holds.
func Open(dir string, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("claimstore: %w", err)
	}
	s := &Store{cfg: cfg, dir: dir, now: cfg.Clock}
	ids, err := segmentIDs(dir)
	if err != nil {
		return nil, err
	}
	for i, id := range ids {
		g, err := s.openSegment(id, i == len(ids)-1)
		if err != nil {
			s.closeFiles()
			return nil, err
		}
		s.segs = append(s.segs, g)
		s.nextID = id + 1
	}
	for i := len(s.segs) - 1; i >= 0; i-- {
		if g := s.segs[i]; g.hasOffset {
			s.offset, s.hasOffset = g.offset, true
			s.written, s.hasWrite = g.offset, true
			break
		}
	}
	if err := s.dropExpiredLocked(); err != nil {
		s.closeFiles()
		return nil, err
	}
	loaded, err := s.loadUnion()
	if err == nil && !loaded {
		err = s.rebuildUnion()
		s.openRebuiltUnion = s.union != nil
	}
	if err != nil {
		s.closeFiles()
		return nil, err
	}
	return s, nil
}

func (s *Store) segPath(id uint64) string { return filepath.Join(s.dir, fmt.Sprintf("%016d", id)) }

// openSegment opens segment id: sealed if its index and filter are whole, else scanned (and
// sealed unless it is the newest).
func (s *Store) openSegment(id uint64, newest bool) (*segment, error) {
	g := &segment{id: id, path: s.segPath(id)}
	os.Remove(g.path + ".log.tmp") // a compaction a crash cut short: the log is the old one
	f, err := os.OpenFile(g.path+".log", os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("claimstore: %w", err)
	}
	g.f = f
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("claimstore: %w", err)
	}
	g.size = st.Size()
	if idx, err := os.Open(g.path + ".idx"); err == nil {
		g.idxFile = idx
		err = g.readIndexHeader()
		if err == nil {
			g.filter, err = readFilterFile(g.path + ".bloom")
		}
		if err == nil {
			return g, nil
		}
		idx.Close()
		g.idxFile = nil
		os.Remove(g.path + ".idx") // half-written: rebuilt from the log below
	}
	// A clean Close left the newest segment's index: only what was appended after it is read.
	var from int64
	if newest {
		if from, err = s.loadActive(g); err != nil {
			f.Close()
			return nil, err
		}
	} else {
		os.Remove(g.path + ".active")
	}
	if from == 0 {
		g.idx = newIndex()
		g.minTS, g.maxTS = 0, 0
	}
	end, err := g.scanFrom(from, func(pos uint32, r record) { s.replay(g, pos, r) })
	s.openScanned += end - from
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("claimstore: scan segment %d: %w", id, err)
	}
	if end < g.size {
		if err := f.Truncate(end); err != nil {
			f.Close()
			return nil, fmt.Errorf("claimstore: cut the torn tail of segment %d: %w", id, err)
		}
		g.size = end
	}
	if _, err := f.Seek(0, 2); err != nil {
		f.Close()
		return nil, err
	}
	if !newest {
		if err := s.seal(g); err != nil {
			f.Close()
			return nil, err
		}
	}
	return g, nil
}

// replay applies a scanned record to g's index.
func (s *Store) replay(g *segment, pos uint32, r record) {
	switch r.kind {
	case kindOffset:
		if len(r.value) == 8 {
			g.offset, g.hasOffset = int64(leUint64(r.value)), true
		}
		return
	}
	key := string(r.key)
	h := uint32(xxhash.Sum64String(key))
	slot, found := g.idx.find(h, func(p uint32) bool { return g.keyAt(p, key, &s.rb) })
	g.idx.set(slot, h, pos, found)
	g.note(r.ts)
}

// note records a record's time in g.
func (g *segment) note(ts int64) {
	if g.records == 0 {
		g.firstTS, g.minTS, g.maxTS = ts, ts, ts
	}
	g.records++
	g.minTS, g.maxTS = min(g.minTS, ts), max(g.maxTS, ts)
}

func leUint64(b []byte) uint64 {
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// Open implements storage.Storage: the store is open from Open on.
func (s *Store) Open() error { return nil }

// active returns the active segment, or nil.
func (s *Store) active() *segment {
	if n := len(s.segs); n > 0 && !s.segs[n-1].sealed() {
		return s.segs[n-1]
	}
	return nil
}

// Has reports whether key holds a value.
func (s *Store) Has(key string) (bool, error) {
	v, err := s.Get(key)
	if err != nil {
		return false, err
	}
	return v != nil, nil
}

// Get returns key's newest value, or nil when it has none (never written, deleted, or
// dropped with its segment).
func (s *Store) Get(key string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	g, pos, ok, err := s.lookup(key, s.segs, true)
	if err != nil || !ok {
		return nil, err
	}
	r, err := g.record(pos, &s.rb)
	if err != nil || r.kind != kindPut {
		return nil, err
	}
	return append(make([]byte, 0, len(r.value)), r.value...), nil
}

// lookup finds key's newest record in segs, newest first. remember keeps the active index
// slot for the next put.
func (s *Store) lookup(key string, segs []*segment, remember bool) (*segment, uint32, bool, error) {
	h64 := xxhash.Sum64String(key)
	h := uint32(h64)
	unionChecked := false
	for i := len(segs) - 1; i >= 0; i-- {
		g := segs[i]
		if g.sealed() && !unionChecked {
			unionChecked = true
			if s.union != nil && !s.union.has(unionHash(h)) {
				return nil, 0, false, nil // in no sealed segment
			}
		}
		if !g.sealed() {
			slot, found := g.idx.find(h, func(p uint32) bool { return g.keyAt(p, key, &s.rb) })
			if remember {
				s.last.key, s.last.seg, s.last.slot, s.last.found, s.last.gen = key, g, slot, found, s.gen
			}
			if found {
				return g, uint32(g.idx.slots[slot]) - 1, true, nil
			}
			continue
		}
		if !g.filter.has(h64) {
			continue
		}
		pos, ok, err := g.lookupSealed(key, h, &s.rb)
		if err != nil {
			return nil, 0, false, err
		}
		if ok {
			return g, pos, true, nil
		}
	}
	return nil, 0, false, nil
}

// Set stores value as key's newest value, as of now.
func (s *Store) Set(key string, value []byte) error {
	return s.put(kindPut, key, value, s.now().UnixMilli())
}

// SetAt stores value as key's newest value as of ts, the time its changelog record was
// written (restoring from the changelog).
func (s *Store) SetAt(key string, value []byte, ts time.Time) error {
	return s.put(kindPut, key, value, ts.UnixMilli())
}

// Delete makes key hold no value.
func (s *Store) Delete(key string) error { return s.put(kindDelete, key, nil, s.now().UnixMilli()) }

// DeleteAt is Delete as of ts (restoring from the changelog).
func (s *Store) DeleteAt(key string, ts time.Time) error {
	return s.put(kindDelete, key, nil, ts.UnixMilli())
}

func (s *Store) put(kind byte, key string, value []byte, ts int64) error {
	if len(key) > 1<<16-1 {
		return fmt.Errorf("claimstore: key of %d bytes (at most 65535)", len(key))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	g, err := s.activeFor(ts, recHeader+len(key)+len(value))
	if err != nil {
		return err
	}
	off := g.size + int64(len(g.buf))
	pos := uint32(off / 8)
	g.buf = appendRecord(g.buf, kind, key, value, ts)
	h := uint32(xxhash.Sum64String(key))
	var slot int
	var found bool
	if s.last.seg == g && s.last.gen == s.gen && s.last.key == key {
		slot, found = s.last.slot, s.last.found
	} else {
		slot, found = g.idx.find(h, func(p uint32) bool { return g.keyAt(p, key, &s.rb) })
	}
	g.idx.set(slot, h, pos, found)
	s.gen++
	g.note(ts)
	if len(g.buf) >= bufSize {
		if err := s.writeLocked(g); err != nil {
			return err
		}
	}
	if now := s.now(); !now.Before(s.nextDrop) {
		s.nextDrop = now.Add(s.cfg.DropEvery)
		return s.dropExpiredLocked()
	}
	return nil
}

// activeFor returns the segment a record of time ts goes to, sealing the active one first
// when ts is past its span, its index is full, or its log would outgrow 32 GiB.
func (s *Store) activeFor(ts int64, n int) (*segment, error) {
	g := s.active()
	if g != nil && g.records > 0 && (ts >= g.firstTS+s.cfg.span().Milliseconds() ||
		g.idx.n >= s.cfg.MaxActiveKeys || g.size+int64(len(g.buf)+n) > maxSegmentBytes) {
		if err := s.writeLocked(g); err != nil {
			return nil, err
		}
		if err := s.seal(g); err != nil {
			return nil, err
		}
		g = nil
	}
	if g != nil {
		return g, nil
	}
	return s.newSegment()
}

// newSegment starts an active segment.
func (s *Store) newSegment() (*segment, error) {
	g := &segment{id: s.nextID, path: s.segPath(s.nextID), idx: newIndex()}
	f, err := os.OpenFile(g.path+".log", os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("claimstore: new segment: %w", err)
	}
	g.f = f
	g.buf = make([]byte, 0, bufSize+4096)
	s.nextID++
	s.segs = append(s.segs, g)
	return g, nil
}

// writeLocked writes g's buffer, after an offset record when the offset moved, so the record
// follows every value it covers.
func (s *Store) writeLocked(g *segment) error {
	if s.hasOffset && (!s.hasWrite || s.written != s.offset) {
		var v [8]byte
		for i := range v {
			v[i] = byte(uint64(s.offset) >> (8 * i))
		}
		g.buf = appendRecord(g.buf, kindOffset, "", v[:], 0)
		g.offset, g.hasOffset = s.offset, true
		s.written, s.hasWrite = s.offset, true
	}
	if len(g.buf) == 0 {
		return nil
	}
	if _, err := g.f.WriteAt(g.buf, g.size); err != nil {
		return fmt.Errorf("claimstore: write segment %d: %w", g.id, err)
	}
	g.prev, g.buf = g.buf, g.prev[:0]
	g.prevOff = g.size
	g.size += int64(len(g.prev))
	s.flushed = s.now()
	return nil
}

// GetOffset returns the newest changelog offset the store holds, or def.
func (s *Store) GetOffset(def int64) (int64, error) {
	s.mu.Lock()
	off, ok := s.offset, s.hasOffset
	s.mu.Unlock()
	if !ok {
		off = def
	}
	return off, nil
}

// SetOffset keeps the changelog offset the table has applied up to (it never goes back);
// once recovered, the buffer is written when FlushEvery has passed.
func (s *Store) SetOffset(offset int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return ErrClosed
	case !s.hasOffset:
		s.offset, s.hasOffset = offset, true
	default:
		s.offset = max(s.offset, offset)
	}
	if !s.recovered || s.now().Sub(s.flushed) < s.cfg.FlushEvery {
		return nil
	}
	return s.flushLocked()
}

// flushLocked writes the active segment's buffer and the offset.
func (s *Store) flushLocked() error {
	g := s.active()
	if g == nil {
		if !s.hasOffset || (s.hasWrite && s.written == s.offset) {
			return nil
		}
		var err error
		if g, err = s.newSegment(); err != nil {
			return err
		}
	}
	return s.writeLocked(g)
}

// MarkRecovered writes what recovery applied; from then on the buffer is also written by time.
func (s *Store) MarkRecovered() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recovered = true
	return s.flushLocked()
}

// Close writes the buffer and the offset, and closes the files.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	err := s.flushLocked()
	s.closed = true
	if g := s.active(); g != nil && err == nil {
		// The index and the union filter, so the next Open rebuilds neither (reopen.go).
		err = s.writeActiveLocked(g)
	}
	if err == nil {
		err = s.writeUnionLocked()
	}
	return errors.Join(err, s.closeFiles())
}

func (s *Store) closeFiles() error {
	var errs []error
	for _, g := range s.segs {
		errs = append(errs, g.close())
	}
	return errors.Join(errs...)
}
