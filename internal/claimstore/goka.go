package claimstore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/storage"
)

// Builder is goka's storage builder for a table kept by Store: one store per table partition
// in dir/<topic>.<partition>.claims. The LevelDB folder the table used before
// (dir/<topic>.<partition>, kafka.GokaStorage) is removed: the changelog rebuilds the store.
func Builder(dir string, cfg Config) storage.Builder {
	return func(topic string, partition int32) (storage.Storage, error) {
		base := filepath.Join(dir, fmt.Sprintf("%s.%d", topic, partition))
		if err := os.RemoveAll(base); err != nil {
			return nil, fmt.Errorf("claimstore: remove the table's former storage %s: %w", base, err)
		}
		return Open(base+".claims", cfg)
	}
}

// Update is the goka update callback for restoring a Store from its changelog
// (goka.WithUpdateCallback): a record older than window is skipped (an expired claim is as
// good as none, and nothing is written for it), the others are stored as of their record's
// time, which places them in their time segment. now is the clock (time.Now).
func Update(window time.Duration, now func() time.Time) goka.UpdateCallback {
	return func(ctx goka.UpdateContext, s storage.Storage, key string, value []byte) error {
		st, ok := Unwrap(s).(*Store)
		if !ok {
			return goka.DefaultUpdate(ctx, s, key, value)
		}
		ts := ctx.Timestamp()
		if ts.IsZero() {
			ts = now()
		}
		if value == nil {
			return st.DeleteAt(key, ts)
		}
		if now().Sub(ts) >= window {
			st.mu.Lock()
			st.skipped++
			st.mu.Unlock()
			return nil
		}
		return st.SetAt(key, value, ts)
	}
}

// Unwrap returns the storage under the wrappers that say what they wrap (an Unwrap method, as
// kafka.Tables' partitions have), or s.
func Unwrap(s storage.Storage) storage.Storage {
	for {
		w, ok := s.(interface{ Unwrap() storage.Storage })
		if !ok {
			return s
		}
		s = w.Unwrap()
	}
}

// Iterator iterates over every key's newest value, segment by segment, newest first; keys
// come in no particular order. It costs a lookup in the newer segments per key.
func (s *Store) Iterator() (storage.Iterator, error) { return s.iterator(nil) }

// IteratorWithRange iterates over the keys in [start, limit), or with prefix start when limit
// is empty (as goka's LevelDB storage does), in no particular order.
func (s *Store) IteratorWithRange(start, limit []byte) (storage.Iterator, error) {
	start, limit = bytes.Clone(start), bytes.Clone(limit)
	return s.iterator(func(k []byte) bool {
		if len(limit) == 0 {
			return bytes.HasPrefix(k, start)
		}
		return bytes.Compare(k, start) >= 0 && bytes.Compare(k, limit) < 0
	})
}

func (s *Store) iterator(keep func([]byte) bool) (*iter, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if g := s.active(); g != nil {
		if err := s.writeLocked(g); err != nil {
			return nil, err
		}
	}
	return &iter{s: s, keep: keep, seg: len(s.segs) - 1, segs: append([]*segment(nil), s.segs...)}, nil
}

// iter walks the slots of each segment's index.
type iter struct {
	s    *Store
	keep func([]byte) bool
	min  []byte // Seek's lower bound
	segs []*segment
	seg  int
	slot uint64
	key  []byte
	val  []byte
	err  error
}

func (it *iter) Next() bool {
	s := it.s
	s.mu.Lock()
	defer s.mu.Unlock()
	for it.err == nil && it.seg >= 0 {
		g := it.segs[it.seg]
		if s.closed || (g.idx == nil && g.idxFile == nil) {
			it.err = ErrClosed
			return false
		}
		var n uint64
		if g.idx != nil {
			n = uint64(len(g.idx.slots))
		} else {
			n = g.mask + 1
		}
		if it.slot >= n {
			it.seg--
			it.slot = 0
			continue
		}
		var e uint64
		if g.idx != nil {
			e = g.idx.slots[it.slot]
		} else {
			var b [8]byte
			if _, err := g.idxFile.ReadAt(b[:], idxHeader+int64(it.slot)*8); err != nil {
				it.err = err
				return false
			}
			e = binary.LittleEndian.Uint64(b[:])
		}
		it.slot++
		if e == 0 {
			continue
		}
		r, err := g.record(uint32(e)-1, &s.rb)
		if err != nil {
			it.err = err
			return false
		}
		if r.kind != kindPut || (it.keep != nil && !it.keep(r.key)) || (it.min != nil && bytes.Compare(r.key, it.min) < 0) {
			continue
		}
		key, val := bytes.Clone(r.key), bytes.Clone(r.value)
		// A key with a newer record in a newer segment is that segment's.
		newer := 0
		for i, x := range s.segs {
			if x == g {
				newer = i + 1
			}
		}
		if newer < len(s.segs) {
			if _, _, ok, err := s.lookup(string(key), s.segs[newer:], false); err != nil {
				it.err = err
				return false
			} else if ok {
				continue
			}
		}
		it.key, it.val = key, val
		return true
	}
	return false
}

func (it *iter) Err() error             { return it.err }
func (it *iter) Key() []byte            { return it.key }
func (it *iter) Value() ([]byte, error) { return it.val, nil }
func (it *iter) Release()               {}

// Seek restricts the rest of the iteration to keys >= key (keys come in no order).
func (it *iter) Seek(key []byte) bool {
	it.min = bytes.Clone(key)
	return true
}
