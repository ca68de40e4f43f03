package kafka

import (
	"bufio"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/lovoo/goka/storage"
	"github.com/syndtr/goleveldb/leveldb"
	"github.com/syndtr/goleveldb/leveldb/filter"
	ldbiter "github.com/syndtr/goleveldb/leveldb/iterator"
	"github.com/syndtr/goleveldb/leveldb/opt"
	ldbstorage "github.com/syndtr/goleveldb/leveldb/storage"
	"github.com/syndtr/goleveldb/leveldb/util"
)

// OffsetSyncInterval is the longest a running table's writes (and its changelog offset) stay
// in memory before they are written to LevelDB, when fewer than MaxDirtyEntries have
// accumulated.
const OffsetSyncInterval = time.Second

// A table partition's storage writes to LevelDB once MaxDirtyEntries values or
// MaxDirtyBytes bytes are waiting, whichever comes first.
const (
	MaxDirtyEntries = 1024
	MaxDirtyBytes   = 1 << 20
)

// GokaStorage is the local storage of backflow's goka tables: one LevelDB database per table
// partition under dir (the layout of goka's own LevelDB storage, so existing folders are
// read as they are), with writes batched.
//
// goka's storage writes every table value with its own LevelDB Put, a journal write() and a
// memtable insert each, and stores the changelog offset with another Put on every
// acknowledged write. Those were 11 to 12 % of ingest's and sink-features' CPU, and the
// lookups of the same hot keys (a busy tenant or model) another 7 to 11 %. This storage keeps
// the values written since its last flush in memory, answers lookups from there first, and
// writes them as one LevelDB batch, with the newest changelog offset in the same batch: once
// MaxDirtyEntries values or MaxDirtyBytes bytes wait, once OffsetSyncInterval has passed when
// an offset arrives, before an iteration (goka's visitors), when recovery ends, and on Close.
// A key written many times between flushes reaches LevelDB once.
//
// Why a crash loses nothing: the changelog is the table's truth, and local storage only says
// how far it has been applied. goka calls SetOffset(o) only after the value of changelog
// record o was Set (on recovery, right after it; while running, once the write is
// acknowledged), so a flush that writes offset o writes every value up to o with it, in one
// atomic batch. After a crash, recovery replays the changelog from the stored offset, at
// most about a second or MaxDirtyEntries values more than with goka's storage.
func GokaStorage(dir string) storage.Builder {
	opts := LevelDBOptions()
	return func(topic string, partition int32) (storage.Storage, error) {
		path := filepath.Join(dir, fmt.Sprintf("%s.%d", topic, partition))
		files, err := ldbstorage.OpenFile(path, false)
		if err != nil {
			return nil, fmt.Errorf("kafka: open table storage %s: %w", path, err)
		}
		db, err := leveldb.Open(bufferedTables{files}, opts)
		if err != nil {
			files.Close()
			return nil, fmt.Errorf("kafka: open table storage %s: %w", path, err)
		}
		st := newTableStore(db)
		st.files = files
		return st, nil
	}
}

// TableWriteBuffer is how much of a table file LevelDB writes with one write(): the size of
// the buffer each new table file is written through (bufferedTables).
const TableWriteBuffer = 256 << 10

// bufferedTables is LevelDB's file storage with every table file written through a buffer of
// TableWriteBuffer bytes. LevelDB writes a table file one block (4 KiB) per write(): in a
// 10.3M-record drain its compactions were 37 % of ingest's CPU and 26 % of sink-features', and
// those write() calls about two fifths of that. A table file is read only after LevelDB
// closed it (and synced it, unless NoSync), and Sync and Close write the buffer out first, so
// the buffer changes when bytes reach the file, never what LevelDB can read. The journal and
// the manifest are written as before: unbuffered, each record reaching the file when LevelDB
// writes it.
type bufferedTables struct{ ldbstorage.Storage }

func (s bufferedTables) Create(fd ldbstorage.FileDesc) (ldbstorage.Writer, error) {
	w, err := s.Storage.Create(fd)
	if err != nil || fd.Type != ldbstorage.TypeTable {
		return w, err
	}
	return &bufferedWriter{Writer: w, buf: bufio.NewWriterSize(w, TableWriteBuffer)}, nil
}

// bufferedWriter is a table file being written (bufferedTables).
type bufferedWriter struct {
	ldbstorage.Writer
	buf *bufio.Writer
}

func (w *bufferedWriter) Write(p []byte) (int, error) { return w.buf.Write(p) }

func (w *bufferedWriter) Sync() error {
	if err := w.buf.Flush(); err != nil {
		return err
	}
	return w.Writer.Sync()
}

func (w *bufferedWriter) Close() error {
	return errors.Join(w.buf.Flush(), w.Writer.Close())
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

// LevelDBBloomBits is the bloom filter's bits per key in each table file. Most lookups are for
// a requestId seen for the first time (a new claim, a new request entry), which LevelDB
// without a filter answers by reading a block of every table file that might hold the key; a
// filter of 10 bits per key (about 1 % false positives) answers most of them from memory.
const LevelDBBloomBits = 10

// LevelDBOptions are the options GokaStorage opens each database with.
//
// Table files are not compressed. Lookups are by random key over a table that outgrows any
// cache, so nearly every lookup reads a block from a file, and with snappy it decompressed that
// block too; compactions decompressed and compressed every block they rewrote. In a table
// filled like ingest's dedupe table with 1M requests (BenchmarkTableGrowth), no compression cut
// the CPU per random lookup to about 0.58 of snappy's and per write to about 0.92, for about
// 2.2 times the disk (148 MB against 67 MB for that table partition).
func LevelDBOptions() *opt.Options {
	return &opt.Options{BlockCacheCapacity: LevelDBBlockCache, WriteBuffer: LevelDBWriteBuffer,
		Filter: filter.NewBloomFilter(LevelDBBloomBits), Compression: opt.NoCompression}
}

// offsetKey is where the changelog offset is kept, as goka's storage keeps it.
const offsetKey = "__offset"

// tableStore is a goka storage over one LevelDB database with batched writes (GokaStorage).
// goka calls it from the partition's goroutine (Get, Set, Delete, iterations) and from its
// producer's callbacks (SetOffset); mu guards the pending writes.
type tableStore struct {
	db         *leveldb.DB
	files      ldbstorage.Storage // the database's files, closed after it; nil in tests
	every      time.Duration
	maxEntries int
	maxBytes   int
	now        func() time.Time

	mu        sync.Mutex
	dirty     map[string][]byte // written since the last flush; nil: deleted
	dirtySize int
	offset    int64 // newest offset given to SetOffset (hasOffset)
	hasOffset bool
	stored    int64 // offset written by the last flush (hasStored)
	hasStored bool
	recovered bool
	flushed   time.Time
	closed    bool
}

func newTableStore(db *leveldb.DB) *tableStore {
	return &tableStore{db: db, every: OffsetSyncInterval, maxEntries: MaxDirtyEntries, maxBytes: MaxDirtyBytes,
		now: time.Now, dirty: map[string][]byte{}}
}

// errStoreClosed is returned by a table store used after Close.
var errStoreClosed = errors.New("kafka: table storage closed")

// Open does nothing: the database is open from the builder on.
func (s *tableStore) Open() error { return nil }

// Has reports whether key holds a value.
func (s *tableStore) Has(key string) (bool, error) {
	v, err := s.Get(key)
	return v != nil, err
}

// Get returns key's value, nil when there is none.
func (s *tableStore) Get(key string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.dirty[key]; ok {
		return v, nil
	}
	v, err := s.db.Get([]byte(key), nil)
	if errors.Is(err, leveldb.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("kafka: table storage get %q: %w", key, err)
	}
	return v, nil
}

// Set keeps value for key, writing the pending values once enough are waiting.
func (s *tableStore) Set(key string, value []byte) error { return s.put(key, value, false) }

// Delete removes key's value.
func (s *tableStore) Delete(key string) error { return s.put(key, nil, true) }

func (s *tableStore) put(key string, value []byte, deleted bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errStoreClosed
	}
	switch {
	case deleted:
		value = nil // nil marks a deletion
	case !s.recovered:
		// Recovery hands over values that point into sarama's fetch buffers: copy them, so a
		// pending value does not keep a whole fetch alive.
		value = append([]byte{}, value...)
	case value == nil:
		value = []byte{}
	}
	if old, ok := s.dirty[key]; ok {
		s.dirtySize -= len(key) + len(old)
	}
	s.dirty[key] = value
	s.dirtySize += len(key) + len(value)
	if len(s.dirty) >= s.maxEntries || s.dirtySize >= s.maxBytes {
		return s.flushLocked()
	}
	return nil
}

// GetOffset returns the newest offset, written or not, or def when there is none.
func (s *tableStore) GetOffset(def int64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hasOffset {
		return s.offset, nil
	}
	data, err := s.db.Get([]byte(offsetKey), nil)
	if errors.Is(err, leveldb.ErrNotFound) {
		return def, nil
	}
	if err != nil {
		return 0, fmt.Errorf("kafka: table storage offset: %w", err)
	}
	off, err := strconv.ParseInt(string(data), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("kafka: table storage offset %q: %w", data, err)
	}
	return off, nil
}

// SetOffset keeps the changelog offset the table has applied up to (it never goes back), and
// flushes when the table runs and OffsetSyncInterval has passed since the last flush.
func (s *tableStore) SetOffset(offset int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errStoreClosed
	}
	if !s.hasOffset || offset > s.offset {
		s.offset, s.hasOffset = offset, true
	}
	if s.recovered && s.now().Sub(s.flushed) >= s.every {
		return s.flushLocked()
	}
	return nil
}

// MarkRecovered writes what recovery applied; from then on pending writes are also flushed
// by time.
func (s *tableStore) MarkRecovered() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recovered = true
	return s.flushLocked()
}

// Iterator iterates over every key but the offset's, after writing the pending values.
func (s *tableStore) Iterator() (storage.Iterator, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.flushLocked(); err != nil {
		return nil, err
	}
	return &tableIter{it: s.db.NewIterator(nil, &opt.ReadOptions{DontFillCache: true})}, nil
}

// IteratorWithRange iterates over [start, limit), or over the keys with prefix start when
// limit is empty, as goka's storage does.
func (s *tableStore) IteratorWithRange(start, limit []byte) (storage.Iterator, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.flushLocked(); err != nil {
		return nil, err
	}
	r := util.BytesPrefix(start)
	if len(limit) > 0 {
		r = &util.Range{Start: start, Limit: limit}
	}
	return &tableIter{it: s.db.NewIterator(r, nil)}, nil
}

// Close writes the pending values and the newest offset, then closes the database.
func (s *tableStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	err := s.flushLocked()
	if cerr := s.db.Close(); err == nil {
		err = cerr
	}
	if s.files != nil { // the database does not close a storage it was given
		if cerr := s.files.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// flushLocked writes the pending values, and the offset if it moved, as one batch.
func (s *tableStore) flushLocked() error {
	offsetMoved := s.hasOffset && (!s.hasStored || s.offset != s.stored)
	if len(s.dirty) == 0 && !offsetMoved {
		s.flushed = s.now()
		return nil
	}
	var b leveldb.Batch
	for k, v := range s.dirty {
		if v == nil {
			b.Delete([]byte(k))
		} else {
			b.Put([]byte(k), v)
		}
	}
	if offsetMoved {
		b.Put([]byte(offsetKey), []byte(strconv.FormatInt(s.offset, 10)))
	}
	if err := s.db.Write(&b, nil); err != nil {
		return fmt.Errorf("kafka: table storage write %d values: %w", len(s.dirty), err)
	}
	clear(s.dirty)
	s.dirtySize = 0
	if offsetMoved {
		s.stored, s.hasStored = s.offset, true
	}
	s.flushed = s.now()
	return nil
}

// tableIter is a LevelDB iterator that skips the offset's key, as goka's does.
type tableIter struct{ it ldbiter.Iterator }

func (i *tableIter) Next() bool {
	next := i.it.Next()
	if next && string(i.it.Key()) == offsetKey {
		next = i.it.Next()
	}
	return next
}
func (i *tableIter) Err() error             { return i.it.Error() }
func (i *tableIter) Key() []byte            { return i.it.Key() }
func (i *tableIter) Value() ([]byte, error) { return i.it.Value(), nil }
func (i *tableIter) Release()               { i.it.Release() }
func (i *tableIter) Seek(key []byte) bool   { return i.it.Seek(key) }
