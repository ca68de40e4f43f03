package features

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/storage"
)

// entries keeps the aggregate entries (tenant, user, model) the processor decoded, so such an
// entry is decoded once and then updated in memory: goka's ctx.Value decodes the stored bytes
// on every call, and an aggregate entry (2 to 4 KB, read for every batch of deltas) took 14 to
// 20 µs to decode. Request entries are not kept: there is one a request, each read for at most
// three records, and keeping them cost more in the garbage collector than their decodes (in a
// 1M drain, a cache of 4 MiB of them per partition held 120 MB of live heap, and the collector
// took 30 % of the stage's time).
//
// Coherence: each cached entry keeps the bytes it was stored as. load reads the key's bytes
// from the partition's storage (a map lookup for a value written lately) and uses the cached
// entry only when they are the same bytes, so a value written by anything else (a restore
// after a rebalance, the sweep's deletion) is decoded afresh. load takes the entry out of the
// cache and save puts it back with the bytes SetValue stored, so an entry changed by a
// callback that failed before its write is never used again.
//
// Lifecycle: Storage wraps the table's storage builder, so the processor knows each
// partition's storage; without it (a processor built without the wrapper) load falls back on
// ctx.Value. load and save run in the partition's goroutine; each partition has its own cache,
// of at most maxCachedBytes stored bytes.
type entries struct {
	decoded atomic.Int64 // aggregate entries decoded from stored bytes

	mu     sync.Mutex
	stores map[int32]storage.Storage
	parts  map[int32]*entryCache
}

// maxCachedBytes bounds one partition's cache by the stored size of its entries (decoded,
// they take a few times as much).
const maxCachedBytes = 1 << 20

type entryCache struct {
	m    map[string]cachedEntry
	size int
}

type cachedEntry struct {
	raw []byte
	h   *held
}

// held is an aggregate entry the processor holds decoded. The rows made from it are built
// when the writer sends them, while the processor may be applying the next batch to it, so mu
// guards e: the processor holds it while it changes and stores e, the row builder while it
// reads it (guarded). A row built later than its batch may show a later state, which is one
// the table already holds: rows are whole, so the last write wins either way.
type held struct {
	mu sync.Mutex
	e  *Entry
}

func newEntries() *entries {
	return &entries{stores: map[int32]storage.Storage{}, parts: map[int32]*entryCache{}}
}

// Storage wraps the table's storage builder so the processor reads stored bytes itself.
func (x *entries) Storage(inner storage.Builder) storage.Builder {
	return func(topic string, partition int32) (storage.Storage, error) {
		st, err := inner(topic, partition)
		if err != nil {
			return nil, err
		}
		x.mu.Lock()
		x.stores[partition] = st
		x.parts[partition] = &entryCache{m: map[string]cachedEntry{}}
		x.mu.Unlock()
		return st, nil
	}
}

func (x *entries) partition(p int32) (storage.Storage, *entryCache) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.stores[p], x.parts[p]
}

// entry is a request's entry, read through goka (an empty one when it has none).
func entry(gctx goka.Context) *Entry {
	if v, ok := gctx.Value().(*Entry); ok && v != nil {
		return v
	}
	return &Entry{}
}

// load returns the aggregate key's entry (an empty one when it has none), decoding only what
// the cache does not hold as stored.
func (x *entries) load(gctx goka.Context) (*held, error) {
	st, c := x.partition(gctx.Partition())
	if st == nil {
		return &held{e: entry(gctx)}, nil
	}
	key := gctx.Key()
	raw, err := st.Get(key)
	if err != nil {
		return nil, fmt.Errorf("features: read entry %q: %w", key, err)
	}
	if ce, ok := c.m[key]; ok {
		delete(c.m, key)
		c.size -= len(ce.raw)
		if bytes.Equal(ce.raw, raw) && raw != nil {
			return ce.h, nil
		}
	}
	if raw == nil {
		return &held{e: &Entry{}}, nil
	}
	x.decoded.Add(1)
	v, err := (EntryCodec{}).Decode(raw)
	if err != nil {
		return nil, err
	}
	return &held{e: v.(*Entry)}, nil
}

// keep caches h as the key's entry as stored now (unchanged since load, or just stored).
func (x *entries) keep(gctx goka.Context, h *held) {
	st, c := x.partition(gctx.Partition())
	if st == nil {
		return
	}
	raw, err := st.Get(gctx.Key())
	if err != nil || raw == nil {
		return
	}
	if c.size+len(raw) > maxCachedBytes {
		// Evict about a quarter, at random (map order).
		for k, ce := range c.m {
			delete(c.m, k)
			c.size -= len(ce.raw)
			if c.size <= maxCachedBytes*3/4 {
				break
			}
		}
	}
	c.m[gctx.Key()] = cachedEntry{raw: raw, h: h}
	c.size += len(raw)
}
