package claimstore

// What a clean Close leaves for the next Open, so that a restart reads what the store needs
// and rebuilds nothing: the active segment's index (<id>.active), which Open would otherwise
// rebuild by scanning the segment's log (up to MaxActiveKeys keys, gigabytes), and the union
// filter (union.bloom), which Open would otherwise rebuild from every sealed segment's index
// file (16 bytes a key of the whole window: 1.6 GB at 10^8 claims). Each file is read once and
// removed by the Open that reads it, so a file never outlives the close it was written by: after
// a crash, Open rebuilds as before (correct, and as slow as before).

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

const (
	activeMagic  = "BFACTIV1"
	activeHeader = 96
	unionMagic   = "BFUNION1"
	unionFile    = "union.bloom"
)

// writeActiveLocked writes g's in-memory index as <id>.active, valid for the first size bytes
// of its log (written and synced first).
func (s *Store) writeActiveLocked(g *segment) error {
	if err := s.writeLocked(g); err != nil {
		return err
	}
	if err := g.f.Sync(); err != nil {
		return fmt.Errorf("claimstore: sync segment %d: %w", g.id, err)
	}
	return writeFile(g.path+".active", func(w *bufio.Writer) {
		var h [activeHeader]byte
		copy(h[:], activeMagic)
		for i, v := range []uint64{g.id, uint64(g.size), uint64(len(g.idx.slots)), uint64(g.idx.n), uint64(g.records),
			uint64(g.firstTS), uint64(g.minTS), uint64(g.maxTS), uint64(g.offset)} {
			binary.LittleEndian.PutUint64(h[8+8*i:], v)
		}
		if g.hasOffset {
			h[80] = 1
		}
		w.Write(h[:])
		writeWords(w, g.idx.slots)
	})
}

// loadActive reads g's <id>.active, if a clean Close left one for this log, into g's index
// and removes it. It returns how many bytes of the log the index covers (0: none loaded).
func (s *Store) loadActive(g *segment) (int64, error) {
	path := g.path + ".active"
	in, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("claimstore: %w", err)
	}
	defer os.Remove(path)
	defer in.Close()
	r := bufio.NewReaderSize(in, 1<<20)
	var h [activeHeader]byte
	if _, err := io.ReadFull(r, h[:]); err != nil || string(h[:8]) != activeMagic {
		return 0, nil // torn or foreign: scan instead
	}
	u := func(i int) uint64 { return binary.LittleEndian.Uint64(h[8+8*i:]) }
	id, covered, slots := u(0), int64(u(1)), u(2)
	if id != g.id || covered > g.size || slots == 0 || slots&(slots-1) != 0 {
		return 0, nil
	}
	words, err := readWords(r, int(slots))
	if err != nil {
		return 0, nil
	}
	g.idx = &index{slots: words, n: int(u(3))}
	g.records, g.firstTS, g.minTS, g.maxTS = int(u(4)), int64(u(5)), int64(u(6)), int64(u(7))
	g.offset, g.hasOffset = int64(u(8)), h[80] == 1
	return covered, nil
}

// readWords reads n little-endian words.
func readWords(r io.Reader, n int) ([]uint64, error) {
	out := make([]uint64, 0, n)
	err := eachWord(r, n, func(w uint64) { out = append(out, w) })
	return out, err
}

// eachWord calls fn with each of n little-endian words read from r, a megabyte at a time.
func eachWord(r io.Reader, n int, fn func(uint64)) error {
	buf := make([]byte, 1<<20)
	for n > 0 {
		m := min(len(buf)/8, n)
		if _, err := io.ReadFull(r, buf[:m*8]); err != nil {
			return err
		}
		for j := range m {
			fn(binary.LittleEndian.Uint64(buf[8*j:]))
		}
		n -= m
	}
	return nil
}

// writeUnionLocked writes the union filter with the sealed segments it covers.
func (s *Store) writeUnionLocked() error {
	if s.union == nil {
		return nil
	}
	var ids []uint64
	for _, g := range s.segs {
		if g.sealed() {
			ids = append(ids, g.id, uint64(g.keys))
		}
	}
	return writeFile(filepath.Join(s.dir, unionFile), func(w *bufio.Writer) {
		var h [56]byte
		copy(h[:], unionMagic)
		for i, v := range []uint64{uint64(s.unionKeys), uint64(s.unionDead), uint64(s.unionCap), uint64(len(ids) / 2),
			uint64(s.union.k), uint64(len(s.union.words))} {
			binary.LittleEndian.PutUint64(h[8+8*i:], v)
		}
		w.Write(h[:])
		writeWords(w, ids)
		writeWords(w, s.union.words)
	})
}

// loadUnion reads the union filter a clean Close left, and removes the file; the segments
// sealed since are added from their index files, those dropped since count as dead. It
// reports false when there was none to use: the caller rebuilds.
func (s *Store) loadUnion() (bool, error) {
	path := filepath.Join(s.dir, unionFile)
	in, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("claimstore: %w", err)
	}
	defer os.Remove(path)
	defer in.Close()
	r := bufio.NewReaderSize(in, 1<<20)
	var h [56]byte
	if _, err := io.ReadFull(r, h[:]); err != nil || string(h[:8]) != unionMagic {
		return false, nil
	}
	u := func(i int) uint64 { return binary.LittleEndian.Uint64(h[8+8*i:]) }
	keys, dead, capacity, nIDs, k, nWords := int(u(0)), int(u(1)), int(u(2)), int(u(3)), uint(u(4)), int(u(5))
	if k < 1 || k > 7 || nWords == 0 || nWords%blockWords != 0 || nIDs > 1<<20 {
		return false, nil
	}
	pairs, err := readWords(r, 2*nIDs)
	if err != nil {
		return false, nil
	}
	words, err := readWords(r, nWords)
	if err != nil {
		return false, nil
	}
	covered := map[uint64]int{}
	for i := 0; i < len(pairs); i += 2 {
		covered[pairs[i]] = int(pairs[i+1])
	}
	f := &filter{words: words, k: k}
	var added int
	for _, g := range s.segs {
		if !g.sealed() {
			continue
		}
		if n, ok := covered[g.id]; ok && n == g.keys {
			delete(covered, g.id)
			continue
		}
		if err := addIndexHashes(f, g); err != nil {
			return false, err
		}
		added += g.keys
	}
	for _, n := range covered { // dropped since
		dead += n
	}
	s.union, s.unionKeys, s.unionDead, s.unionCap = f, keys+added, dead, capacity
	if s.unionKeys > s.unionCap || s.unionDead*4 > s.unionKeys {
		return false, nil
	}
	return true, nil
}

// addIndexHashes adds a sealed segment's keys (the hashes of its index file) to f, reading the
// index file once, a megabyte at a time.
func addIndexHashes(f *filter, g *segment) error {
	r := io.NewSectionReader(g.idxFile, idxHeader, int64(g.mask+1)*8)
	err := eachWord(r, int(g.mask+1), func(e uint64) {
		if e != 0 {
			f.add(unionHash(uint32(e >> 32)))
		}
	})
	if err != nil {
		return fmt.Errorf("claimstore: read index of segment %d: %w", g.id, err)
	}
	return nil
}

// scanFrom is scan from byte off of the log (a record boundary).
func (g *segment) scanFrom(off int64, fn func(pos uint32, r record)) (int64, error) {
	if _, err := g.f.Seek(off, io.SeekStart); err != nil {
		return 0, err
	}
	return g.scanReader(off, fn)
}
