package kafka

import (
	"sync"
	"time"

	"github.com/lovoo/goka/storage"
	"github.com/syndtr/goleveldb/leveldb/opt"
)

// OffsetSyncInterval is how often GokaStorage writes a running table's changelog offset to
// its local storage.
const OffsetSyncInterval = time.Second

// GokaStorage is the local storage of backflow's goka tables: goka's LevelDB storage under
// dir, one database per table partition, with the changelog offset written at most once per
// OffsetSyncInterval while the table runs.
//
// goka's own storage writes the offset to LevelDB on every acknowledged table write, a
// second Put (and journal write) for each value it stores, and the two contend for the
// database's write lock with the partition's goroutine. The offset only says where recovery
// resumes in the changelog: a stored offset older than the values is always safe, because
// replaying the changelog from there rewrites the same keys with the same values in log
// order. So the newest offset is kept in memory, written when OffsetSyncInterval has passed
// since the last write, and always written on Close. goka itself does the same while a table
// recovers (every 30 s). After a crash, recovery replays at most about a second of the
// changelog more than before.
func GokaStorage(dir string) storage.Builder {
	inner := storage.BuilderWithOptions(dir, LevelDBOptions())
	return func(topic string, partition int32) (storage.Storage, error) {
		st, err := inner(topic, partition)
		if err != nil {
			return nil, err
		}
		return &lazyOffset{Storage: st, every: OffsetSyncInterval, now: time.Now}, nil
	}
}

// LevelDB sizes of each table partition's database. LevelDB's defaults (an 8 MiB block cache
// and a 4 MiB write buffer, which is held twice while it is flushed) took about 20 MiB of heap
// per database. One process holds six (ingest's and sink-features' tables, 3 partitions each),
// so that was about half of its live heap in a 1.5M-record drain (pprof: util.BufferPool.Get
// 55 MB and memdb.New 28 MB of 178 MB). Lookups are by random requestId, so a big block cache
// hits little; the OS page cache keeps the files' hot blocks anyway. With these sizes, LevelDB
// held about 30 MB of a 10M-record drain's heap, at the same rate.
const (
	LevelDBBlockCache  = 2 << 20
	LevelDBWriteBuffer = 2 << 20
)

// LevelDBOptions are the options GokaStorage opens each database with.
func LevelDBOptions() *opt.Options {
	return &opt.Options{BlockCacheCapacity: LevelDBBlockCache, WriteBuffer: LevelDBWriteBuffer}
}

// lazyOffset is a goka storage whose offset writes after recovery are batched in time.
type lazyOffset struct {
	storage.Storage
	every time.Duration
	now   func() time.Time

	mu        sync.Mutex
	recovered bool
	pending   int64 // newest offset not yet written; 0: none
	written   time.Time
}

// SetOffset keeps offset and writes it once every has passed since the last write. Before
// recovery ends, goka's storage keeps offsets in memory itself.
func (s *lazyOffset) SetOffset(offset int64) error {
	s.mu.Lock()
	if !s.recovered {
		s.mu.Unlock()
		return s.Storage.SetOffset(offset)
	}
	offset = max(offset, s.pending)
	if now := s.now(); now.Sub(s.written) >= s.every {
		s.pending, s.written = 0, now
		s.mu.Unlock()
		return s.Storage.SetOffset(offset)
	}
	s.pending = offset
	s.mu.Unlock()
	return nil
}

// GetOffset returns the newest offset, written or not.
func (s *lazyOffset) GetOffset(def int64) (int64, error) {
	s.mu.Lock()
	pending := s.pending
	s.mu.Unlock()
	stored, err := s.Storage.GetOffset(def)
	if err != nil || pending == 0 {
		return stored, err
	}
	return max(stored, pending), nil
}

// MarkRecovered switches to batched offset writes.
func (s *lazyOffset) MarkRecovered() error {
	if err := s.Storage.MarkRecovered(); err != nil {
		return err
	}
	s.mu.Lock()
	s.recovered, s.written = true, s.now()
	s.mu.Unlock()
	return nil
}

// Close writes the newest offset, then closes the database.
func (s *lazyOffset) Close() error {
	s.mu.Lock()
	pending := s.pending
	s.pending = 0
	s.mu.Unlock()
	if pending != 0 {
		if err := s.Storage.SetOffset(pending); err != nil {
			_ = s.Storage.Close()
			return err
		}
	}
	return s.Storage.Close()
}
