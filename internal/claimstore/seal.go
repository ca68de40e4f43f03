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

	"github.com/cespare/xxhash/v2"
)

// seal writes g's Bloom filter and index file and drops its in-memory index.
func (s *Store) seal(g *segment) error {
	if err := s.writeLocked(g); err != nil {
		return err
	}
	f := newFilter(g.idx.n, s.cfg.BloomFalsePositive)
	if _, err := g.scan(func(_ uint32, r record) {
		if r.kind != kindOffset {
			f.add(xxhash.Sum64(r.key))
		}
	}); err != nil {
		return fmt.Errorf("claimstore: seal segment %d: %w", g.id, err)
	}
	if err := g.f.Sync(); err != nil {
		return fmt.Errorf("claimstore: seal segment %d: %w", g.id, err)
	}
	if err := writeFilterFile(g.path+".bloom", f); err != nil {
		return fmt.Errorf("claimstore: seal segment %d: %w", g.id, err)
	}
	if err := writeIndexFile(g.path+".idx", g); err != nil {
		return fmt.Errorf("claimstore: seal segment %d: %w", g.id, err)
	}
	os.Remove(g.path + ".active") // a sealed segment has its index file
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
		r := bufio.NewReaderSize(io.NewSectionReader(g.idxFile, idxHeader, int64(g.mask+1)*8), 1<<20)
		var b [8]byte
		for range g.mask + 1 {
			if _, err := io.ReadFull(r, b[:]); err != nil {
				return fmt.Errorf("claimstore: read index of segment %d: %w", g.id, err)
			}
			if e := binary.LittleEndian.Uint64(b[:]); e != 0 {
				u.add(unionHash(uint32(e >> 32)))
			}
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
	for _, ext := range []string{".log", ".idx", ".bloom", ".active"} {
		if rerr := os.Remove(g.path + ext); rerr != nil && !os.IsNotExist(rerr) && err == nil {
			err = rerr
		}
	}
	return err
}
