package dlq

import (
	"bytes"
	"context"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/internal/kafka"
)

// Identity is what makes two DLQ entries the same: the origin record (topic, partition,
// offset) and the stage that gave up on it, as the ClickHouse view v_dlq_entries groups them
// (migration 0011_dlq_by_origin). The same bad record is dead-lettered again when a stage is
// killed after its DLQ write and before its commit, when a DLQ write times out after the broker
// stored it, or when a replay reads it again. An entry without an origin topic is its own
// identity, by its DLQ position.
type Identity struct {
	OriginTopic     string
	OriginPartition int32
	OriginOffset    int64
	Stage           string
	DLQPartition    int32 // only for an entry without an origin topic
	DLQOffset       int64 // only for an entry without an origin topic
}

// IdentityOf returns e's identity.
func IdentityOf(e Entry) Identity {
	id := Identity{OriginTopic: e.Origin.Topic, OriginPartition: e.Origin.Partition, OriginOffset: e.Origin.Offset, Stage: e.Stage}
	if e.Origin.Topic == "" {
		id = Identity{DLQPartition: e.DLQPartition, DLQOffset: e.DLQOffset}
	}
	return id
}

// Listed is an entry as list shows it: Repeats is how many later entries of the same identity
// were folded into it (0 when it has none, and always 0 when nothing is folded), ValueBytes
// the length of its value (Origin.Value itself is not kept when entries are folded).
type Listed struct {
	Entry
	Repeats    int
	ValueBytes int
}

// Folder folds entries by Identity, keeping the first of each in the order added (the order
// Scan reads: by DLQ partition, then offset, which is the view's order too). It keeps in full
// only the first Keep distinct entries (0: all), without their value and headers: about 450
// bytes plus its message (at most 1 KiB) and key per entry kept; an identity beyond them costs
// about 100 bytes (enough to fold its repeats). A Folder is not safe for concurrent use.
type Folder struct {
	Keep int

	kept   []Listed
	index  map[Identity]int // into kept, or -1 for an identity seen but not kept
	strs   map[string]string
	folded int
}

// Add adds e and reports whether it is the first of its identity.
func (f *Folder) Add(e Entry) bool {
	if f.index == nil {
		f.index, f.strs = map[Identity]int{}, map[string]string{}
	}
	e.Origin.Topic, e.Stage, e.Class, e.DLQTopic = f.intern(e.Origin.Topic), f.intern(e.Stage), f.intern(e.Class), f.intern(e.DLQTopic)
	id := IdentityOf(e)
	if i, ok := f.index[id]; ok {
		f.folded++
		if i >= 0 {
			f.kept[i].Repeats++
		}
		return false
	}
	if f.Keep > 0 && len(f.kept) >= f.Keep {
		f.index[id] = -1
		return true
	}
	f.index[id] = len(f.kept)
	n := len(e.Origin.Value)
	// The key is copied: a consumed record's slices hold on to its whole fetch buffer.
	e.Origin.Key, e.Origin.Value, e.Origin.Headers = bytes.Clone(e.Origin.Key), nil, nil
	f.kept = append(f.kept, Listed{Entry: e, ValueBytes: n})
	return true
}

// intern shares the few distinct topic, stage and class names between entries.
func (f *Folder) intern(s string) string {
	if v, ok := f.strs[s]; ok {
		return v
	}
	f.strs[s] = s
	return s
}

// Entries are the first entry of each identity kept, in the order added, with their repeats.
func (f *Folder) Entries() []Listed { return f.kept }

// Distinct is how many identities were added; Folded how many entries repeated one.
func (f *Folder) Distinct() int { return len(f.index) }
func (f *Folder) Folded() int   { return f.folded }

// ListOptions say which entries List reads and how.
type ListOptions struct {
	// Class and OriginTopic, when set, narrow the entries to that class and origin topic.
	Class, OriginTopic string
	// Limit caps the entries passed to fn (0: no limit); the counts cover every entry.
	Limit int
	// All passes every entry, repeats included, as it is read (memory does not grow with the
	// topic). Otherwise entries are folded by Identity (see Folder) and passed after the read.
	All bool
	// Undecodable, when set, is told of every record that is not a DLQ entry.
	Undecodable func(r *kgo.Record, err error)
}

// ListResult counts what List read. With All every entry counts; otherwise each identity once.
type ListResult struct {
	Matched     int            // entries that match the options
	Counts      map[string]int // of Matched, per class
	Shown       int            // entries passed to fn
	Folded      int            // entries folded into an earlier one of their identity (0 with All)
	Undecodable int            // records that are not DLQ entries
}

// List reads a snapshot of topic (see Scan), decodes its entries and passes those that match
// opts to fn: every one as it is read with opts.All, otherwise the first of each identity with
// its repeats once the read is done.
func List(ctx context.Context, cfg kafka.Conn, topic string, opts ListOptions, fn func(Listed) error) (ListResult, error) {
	res := ListResult{Counts: map[string]int{}}
	folder := &Folder{Keep: opts.Limit}
	err := Scan(ctx, cfg, topic, func(r *kgo.Record) error {
		e, err := Decode(r)
		if err != nil {
			res.Undecodable++
			if opts.Undecodable != nil {
				opts.Undecodable(r, err)
			}
			return nil
		}
		if (opts.Class != "" && e.Class != opts.Class) || (opts.OriginTopic != "" && e.Origin.Topic != opts.OriginTopic) {
			return nil
		}
		if !opts.All {
			if folder.Add(e) {
				res.Matched++
				res.Counts[e.Class]++
			}
			return nil
		}
		res.Matched++
		res.Counts[e.Class]++
		if opts.Limit == 0 || res.Shown < opts.Limit {
			res.Shown++
			return fn(Listed{Entry: e, ValueBytes: len(e.Origin.Value)})
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	if opts.All {
		return res, nil
	}
	res.Folded = folder.Folded()
	for _, l := range folder.Entries() {
		res.Shown++
		if err := fn(l); err != nil {
			return res, err
		}
	}
	return res, nil
}
