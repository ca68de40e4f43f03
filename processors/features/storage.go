package features

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/storage"

	"github.com/backflowhq/backflow/internal/claimstore"
)

// The group table holds two kinds of entries that live differently: one per request, written
// by each of its records and of no use once RequestWindow has passed (hundreds of millions of
// them at a week of traffic), and one per tenant, user and model, kept for good (thousands).
// In one LevelDB, the request entries made the database grow with the window, and its
// compactions with it: the stage's CPU per record rose from 29.2 to 45.1 µs between a 1M and a
// 10M drain. Storage puts each kind where it belongs: request entries in a claims store
// (internal/claimstore: time segments dropped whole, a restore that skips what expired, a
// lookup whose cost does not grow with the keys), the aggregate entries in LevelDB.

// requestStoreWindow is how long the claims store keeps a request entry after its last write:
// the request window, plus a sweep interval and an hour. The sweep (Processor.sweep) deletes an
// entry RequestWindow after the request was last seen, which writes its tombstone to the
// changelog so that compaction removes it there too; the store keeps the entry long enough for
// a sweep to see it, and drops its segment only after that.
func requestStoreWindow(cfg Config) time.Duration {
	cfg = cfg.withDefaults()
	return cfg.RequestWindow + cfg.SweepEvery + time.Hour
}

// isAggregateKey reports whether key is a tenant's, user's or model's entry (splitKey).
func isAggregateKey(key string) bool {
	return strings.HasPrefix(key, TenantKeyPrefix) || strings.HasPrefix(key, UserKeyPrefix) || strings.HasPrefix(key, ModelKeyPrefix)
}

// Storage is the table's storage builder: per partition, request entries in a claims store
// at dir/<topic>.<partition>.requests, kept for window after their last write, and aggregate
// entries in aggregates (LevelDB, kafka.GokaStorage(dir)). A partition that has a LevelDB
// folder but no claims store was written by the layout before, which kept request entries in
// LevelDB too: its folder is removed, and the partition is restored from the changelog once.
func Storage(dir string, aggregates storage.Builder, window time.Duration) storage.Builder {
	return func(topic string, partition int32) (storage.Storage, error) {
		base := filepath.Join(dir, fmt.Sprintf("%s.%d", topic, partition))
		reqDir := base + ".requests"
		if _, err := os.Stat(reqDir); errors.Is(err, os.ErrNotExist) {
			if err := os.RemoveAll(base); err != nil {
				return nil, fmt.Errorf("features: remove the table's former storage %s: %w", base, err)
			}
		}
		req, err := claimstore.Open(reqDir, claimstore.Config{Window: window})
		if err != nil {
			return nil, fmt.Errorf("features: request entries of %s/%d: %w", topic, partition, err)
		}
		agg, err := aggregates(topic, partition)
		if err != nil {
			req.Close()
			return nil, err
		}
		return &splitStore{requests: req, aggregates: agg}, nil
	}
}

// Update is the table's restore callback (goka.WithUpdateCallback): a request entry goes to
// the claims store as of its changelog record's time, skipped when older than window
// (claimstore.Update); an aggregate entry to LevelDB.
func Update(window time.Duration, now func() time.Time) goka.UpdateCallback {
	requests := claimstore.Update(window, now)
	return func(ctx goka.UpdateContext, s storage.Storage, key string, value []byte) error {
		st, ok := claimstore.Unwrap(s).(*splitStore)
		if !ok {
			return goka.DefaultUpdate(ctx, s, key, value)
		}
		if isAggregateKey(key) {
			return goka.DefaultUpdate(ctx, st.aggregates, key, value)
		}
		return requests(ctx, st.requests, key, value)
	}
}

// splitStore is one table partition: each key in the store of its kind. Both stores keep the
// changelog offset; the table's is the lower of the two, so a restart replays from where the
// store that wrote last wrote (a value applied twice, in changelog order, ends the same).
type splitStore struct {
	requests   *claimstore.Store
	aggregates storage.Storage
}

var _ storage.Storage = (*splitStore)(nil)

func (s *splitStore) of(key string) storage.Storage {
	if isAggregateKey(key) {
		return s.aggregates
	}
	return s.requests
}

func (s *splitStore) Open() error { return errors.Join(s.requests.Open(), s.aggregates.Open()) }

func (s *splitStore) Has(key string) (bool, error)       { return s.of(key).Has(key) }
func (s *splitStore) Get(key string) ([]byte, error)     { return s.of(key).Get(key) }
func (s *splitStore) Set(key string, value []byte) error { return s.of(key).Set(key, value) }
func (s *splitStore) Delete(key string) error            { return s.of(key).Delete(key) }

// GetOffset is the lower of the two stores' offsets (def if either has none).
func (s *splitStore) GetOffset(def int64) (int64, error) {
	const none = -1 << 62
	r, err := s.requests.GetOffset(none)
	if err != nil {
		return 0, err
	}
	a, err := s.aggregates.GetOffset(none)
	if err != nil {
		return 0, err
	}
	if r == none || a == none {
		return def, nil
	}
	return min(r, a), nil
}

func (s *splitStore) SetOffset(offset int64) error {
	return errors.Join(s.requests.SetOffset(offset), s.aggregates.SetOffset(offset))
}

func (s *splitStore) MarkRecovered() error {
	return errors.Join(s.requests.MarkRecovered(), s.aggregates.MarkRecovered())
}

func (s *splitStore) Close() error { return errors.Join(s.requests.Close(), s.aggregates.Close()) }

// Iterator iterates over the request entries, then the aggregate entries.
func (s *splitStore) Iterator() (storage.Iterator, error) {
	return s.iterators(func(st storage.Storage) (storage.Iterator, error) { return st.Iterator() })
}

// IteratorWithRange is Iterator over [start, limit), or the keys with prefix start when
// limit is empty.
func (s *splitStore) IteratorWithRange(start, limit []byte) (storage.Iterator, error) {
	return s.iterators(func(st storage.Storage) (storage.Iterator, error) { return st.IteratorWithRange(start, limit) })
}

func (s *splitStore) iterators(open func(storage.Storage) (storage.Iterator, error)) (storage.Iterator, error) {
	r, err := open(s.requests)
	if err != nil {
		return nil, err
	}
	a, err := open(s.aggregates)
	if err != nil {
		r.Release()
		return nil, err
	}
	return &chainIter{its: []storage.Iterator{r, a}}, nil
}

// chainIter iterates over each iterator in turn.
type chainIter struct {
	its []storage.Iterator
	i   int
}

func (c *chainIter) Next() bool {
	for c.i < len(c.its) {
		if c.its[c.i].Next() {
			return true
		}
		if c.its[c.i].Err() != nil {
			return false
		}
		c.i++
	}
	return false
}

func (c *chainIter) cur() storage.Iterator { return c.its[min(c.i, len(c.its)-1)] }

func (c *chainIter) Err() error             { return c.cur().Err() }
func (c *chainIter) Key() []byte            { return c.cur().Key() }
func (c *chainIter) Value() ([]byte, error) { return c.cur().Value() }

func (c *chainIter) Release() {
	for _, it := range c.its {
		it.Release()
	}
}

// Seek moves each iterator to key: the keys of both come after it.
func (c *chainIter) Seek(key []byte) bool {
	ok := false
	for _, it := range c.its[c.i:] {
		ok = it.Seek(key) || ok
	}
	return ok
}
