package claimstore

// How segments retire: sealing the active segment (its Bloom filter and index file written, its
// in-memory index dropped), the union filter over the sealed segments, and dropping whole
// segments once they are past the window.

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/cespare/xxhash/v2"
)

// seal compacts g's log (compact), writes its Bloom filter and index file and drops its
// in-memory index.
func (s *Store) seal(g *segment) error {
	if err := s.writeLocked(g); err != nil {
		return err
	}
	f, err := s.compact(g)
	if err != nil {
		return fmt.Errorf("claimstore: seal segment %d: %w", g.id, err)
	}
	if err := writeFilterFile(g.path+".bloom", f); err != nil {
		return fmt.Errorf("claimstore: seal segment %d: %w", g.id, err)
	}
	if err := writeIndexFile(g.path+".idx", g); err != nil {
		return fmt.Errorf("claimstore: seal segment %d: %w", g.id, err)
	}
	idx, err := os.Open(g.path + ".idx")
	if err != nil {
		return fmt.Errorf("claimstore: seal segment %d: %w", g.id, err)
	}
	g.idxFile, g.mask, g.keys, g.filter = idx, uint64(len(g.idx.slots)-1), g.idx.n, f
	slots := g.idx.slots
	g.idx, g.buf, g.prev = nil, nil, nil
	s.gen++
	if s.union == nil || s.unionKeys+g.keys > s.unionCap {
		return s.rebuildUnion()
	}
	for _, e := range slots {
		if e != 0 {
			s.union.add(unionHash(uint32(e >> 32)))
		}
	}
	s.unionKeys += g.keys
	return nil
}

// compact rewrites g's log (written whole) with only each key's newest record, a value or a
// deletion (which must stay: it hides the key's values in older segments), in the order they
// were written, then one offset record with the segment's newest changelog offset. Every
// version a key's newest record superseded goes: ingest writes a request's whole state three
// times, so about two thirds of a segment's bytes. The new log is written to <id>.log.tmp,
// synced and renamed over the log, and the directory synced, before the index file that points
// into it is written, so a crash leaves the old log or the new one, each whole and without an
// index file: Open scans it and seals it again (compacting a compacted log keeps it as it is).
// The index keeps its slots, each pointed at its record's new position; it returns the
// segment's Bloom filter.
func (s *Store) compact(g *segment) (*filter, error) {
	f := newFilter(g.idx.n, s.cfg.BloomFalsePositive)
	slots := slices.Clone(g.idx.slots)
	x := &index{slots: slots, n: g.idx.n}
	var (
		out  int64 // bytes of the new log
		kept int
		rec  []byte
	)
	// <id>.active, if an Open left one (it removes what it reads), describes the old log: it
	// goes for good before the new log takes the old one's name.
	if err := os.Remove(g.path + ".active"); err == nil {
		if err := syncDir(filepath.Dir(g.path)); err != nil {
			return nil, err
		}
	} else if !os.IsNotExist(err) {
		return nil, err
	}
	if _, err := g.f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	err := writeFileChecked(g.path+".log", func(w *bufio.Writer) error {
		end, err := g.scanReader(0, func(pos uint32, r record) {
			if r.kind == kindOffset {
				return
			}
			// The key's slot points at pos only if this is its newest record. A slot already
			// moved holds a position below pos (the new log is never longer than the old up
			// to a record), so it cannot be taken for this one.
			h64 := xxhash.Sum64(r.key)
			h := uint32(h64)
			slot, newest := x.find(h, func(p uint32) bool { return p == pos })
			if !newest {
				return
			}
			x.slots[slot] = slotEntry(h, uint32(out/8))
			f.add(h64)
			rec = appendRecord(rec[:0], r.kind, string(r.key), r.value, r.ts)
			w.Write(rec)
			out += int64(len(rec))
			kept++
		})
		if g.hasOffset {
			var v [8]byte
			binary.LittleEndian.PutUint64(v[:], uint64(g.offset))
			rec = appendRecord(rec[:0], kindOffset, "", v[:], 0)
			w.Write(rec)
			out += int64(len(rec))
		}
		if err == nil && (end != g.size || kept != g.idx.n) {
			// Cannot be once the log is written whole and indexed: rather than put a log
			// that misses keys in place, leave the old one.
			err = fmt.Errorf("compacted %d of %d keys from %d of %d bytes", kept, g.idx.n, end, g.size)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := syncDir(filepath.Dir(g.path)); err != nil {
		return nil, err
	}
	nf, err := os.OpenFile(g.path+".log", os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	g.f.Close()
	g.f, g.size, g.records, g.idx = nf, out, kept, x
	if _, err := nf.Seek(0, io.SeekEnd); err != nil {
		return nil, err
	}
	if s.rb.g == g {
		s.rb.g = nil // it holds bytes of the old log
	}
	return f, nil
}

// syncDir makes the renames in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// unionHash spreads an index hash (32 bits, all the index files keep) over 64 for the union
// filter (splitmix64's finalizer).
func unionHash(h uint32) uint64 {
	x := uint64(h) * 0x9E3779B97F4A7C15
	x ^= x >> 29
	x *= 0xBF58476D1CE4E5B9
	return x ^ x>>32
}

// rebuildUnion makes the union anew from the sealed segments' index files, sized for twice
// their keys.
func (s *Store) rebuildUnion() error {
	total := 0
	for _, g := range s.segs {
		if g.sealed() {
			total += g.keys
		}
	}
	if total == 0 {
		s.union, s.unionKeys, s.unionDead, s.unionCap = nil, 0, 0, 0
		return nil
	}
	capacity := max(2*total, 1<<16)
	u := newFilter(capacity, s.cfg.BloomFalsePositive)
	for _, g := range s.segs {
		if !g.sealed() {
			continue
		}
		if err := addIndexHashes(u, g); err != nil {
			return err
		}
	}
	s.union, s.unionKeys, s.unionDead, s.unionCap = u, total, 0, capacity
	return nil
}

// dropExpiredLocked removes the oldest segments whose newest record is older than the window.
func (s *Store) dropExpiredLocked() error {
	limit := s.now().Add(-s.cfg.Window).UnixMilli()
	act := s.active()
	keep := s.segs[:0]
	var errs []error
	// Only the oldest segments go, up to the first that stays: a newer segment holds newer
	// versions, and dropping it before an older one could bring an older version back.
	dropping := true
	for _, g := range s.segs {
		if dropping && g.records > 0 && g.maxTS < limit && g != act {
			if g.sealed() {
				s.unionDead += g.keys
			}
			errs = append(errs, g.remove())
			continue
		}
		dropping = false
		keep = append(keep, g)
	}
	clear(s.segs[len(keep):])
	s.segs = keep
	s.gen++
	if s.union != nil && s.unionDead*4 > s.unionKeys {
		errs = append(errs, s.rebuildUnion())
	}
	return errors.Join(errs...)
}

func (g *segment) close() error {
	var errs []error
	if g.f != nil {
		errs = append(errs, g.f.Close())
	}
	if g.idxFile != nil {
		errs = append(errs, g.idxFile.Close())
	}
	return errors.Join(errs...)
}

func (g *segment) remove() error {
	err := g.close()
	for _, ext := range []string{".log", ".idx", ".bloom", ".active", ".log.tmp"} {
		if rerr := os.Remove(g.path + ext); rerr != nil && !os.IsNotExist(rerr) && err == nil {
			err = rerr
		}
	}
	return err
}
