package kafka

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/storage"
)

// TableKeepOpen is how long Tables keeps a released table partition open for the next group
// generation to take back: longer than a rebalance may take (sarama's rebalance timeout, 60 s).
const TableKeepOpen = 2 * time.Minute

// ErrTableOpen: goka asked for a table partition that is already open, which the storage
// layout (one folder a partition) cannot serve twice.
var ErrTableOpen = errors.New("kafka: table partition is already open")

// Tables keeps a goka stage's table partitions open from one group generation to the next.
//
// goka closes every table partition when a generation ends and opens the ones it is assigned
// when the next begins (Processor.Cleanup and Setup), even a partition that stays with the
// instance, so every rebalance cost each instance a re-open of all its table partitions. With
// Tables, a partition goka closes is only released: it stays open for TableKeepOpen, and the
// builder hands the same storage back when goka opens the partition again. goka then reads the
// storage's offset and catches up from there, which is only what the changelog gained during
// the rebalance. A released partition not taken back within TableKeepOpen (it moved to another
// instance) is closed then, and all are closed by Close.
//
// Standby turns on goka's hot standby with recovery ahead of joining: the instance keeps every
// table partition it does not own caught up with its changelog, so a partition that fails over
// to it is warm, and (through Tables) already open.
//
// Lifecycle: NewTables, then Options (and Builder, for a wrapper that needs the builder) when
// building the processor; Close once the processor's Run has returned.
type Tables struct {
	inner   storage.Builder
	standby bool
	keep    time.Duration

	mu     sync.Mutex
	parts  map[tablePart]*keptTable
	closed bool

	opened, reused atomic.Int64
}

type tablePart struct {
	topic     string
	partition int32
}

// NewTables returns Tables over inner, the stage's storage builder.
func NewTables(inner storage.Builder, standby bool) *Tables {
	return &Tables{inner: inner, standby: standby, keep: TableKeepOpen, parts: map[tablePart]*keptTable{}}
}

// Options are the processor options: the storage builder and, with standby, goka's hot standby
// and recovery ahead of joining. wrap, if not nil, wraps the builder (a stage that reads its
// storage itself).
func (t *Tables) Options(wrap func(storage.Builder) storage.Builder) []goka.ProcessorOption {
	b := t.Builder()
	if wrap != nil {
		b = wrap(b)
	}
	opts := []goka.ProcessorOption{goka.WithStorageBuilder(b)}
	if t.standby {
		opts = append(opts, goka.WithHotStandby(), goka.WithRecoverAhead())
	}
	return opts
}

// Standby reports whether the stage keeps standby copies.
func (t *Tables) Standby() bool { return t.standby }

// Opened and Reused count the table partitions opened from disk and the ones handed back open.
func (t *Tables) Opened() int64 { return t.opened.Load() }
func (t *Tables) Reused() int64 { return t.reused.Load() }

// Builder is the storage builder goka calls for each table partition it opens.
func (t *Tables) Builder() storage.Builder {
	return func(topic string, partition int32) (storage.Storage, error) {
		k := tablePart{topic, partition}
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.closed {
			return nil, fmt.Errorf("kafka: table %s/%d: %w", topic, partition, ErrClosedTables)
		}
		if kt, ok := t.parts[k]; ok {
			if kt.inUse {
				return nil, fmt.Errorf("%w: %s/%d", ErrTableOpen, topic, partition)
			}
			kt.timer.Stop()
			kt.inUse = true
			t.reused.Add(1)
			return kt, nil
		}
		st, err := t.inner(topic, partition)
		if err != nil {
			return nil, err
		}
		kt := &keptTable{Storage: st, t: t, k: k, inUse: true}
		t.parts[k] = kt
		t.opened.Add(1)
		return kt, nil
	}
}

// ErrClosedTables: goka asked for a table partition after Close.
var ErrClosedTables = errors.New("kafka: tables closed")

// Close closes every table partition, released or not. goka must have stopped.
func (t *Tables) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	var errs []error
	for k, kt := range t.parts {
		if kt.timer != nil {
			kt.timer.Stop()
		}
		errs = append(errs, kt.Storage.Close())
		delete(t.parts, k)
	}
	return errors.Join(errs...)
}

// release is goka closing kt: it stays open for keep, then closes unless taken back.
func (t *Tables) release(kt *keptTable) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !kt.inUse || t.parts[kt.k] != kt {
		return nil
	}
	kt.inUse = false
	if kt.timer == nil {
		kt.timer = time.AfterFunc(t.keep, func() { t.expire(kt) })
	} else {
		kt.timer.Reset(t.keep)
	}
	return nil
}

// expire closes kt if it was not taken back.
func (t *Tables) expire(kt *keptTable) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if kt.inUse || t.parts[kt.k] != kt {
		return
	}
	delete(t.parts, kt.k)
	_ = kt.Storage.Close() // written and synced by its own Close; nothing waits for an error here
}

// keptTable is a table partition's storage as goka sees it: its Close releases it to Tables.
type keptTable struct {
	storage.Storage
	t     *Tables
	k     tablePart
	inUse bool // guarded by t.mu
	timer *time.Timer
	once  sync.Once
}

// Open opens the storage the first time goka asks; a storage handed back is open already.
func (kt *keptTable) Open() error {
	var err error
	kt.once.Do(func() { err = kt.Storage.Open() })
	return err
}

// Close releases the partition (Tables.release).
func (kt *keptTable) Close() error { return kt.t.release(kt) }

// Unwrap returns the stage's own storage.
func (kt *keptTable) Unwrap() storage.Storage { return kt.Storage }
