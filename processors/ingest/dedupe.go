package ingest

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/backflowhq/backflow/internal/tablecodec"
)

// Origin identifies a source record: where it was first written.
type Origin struct {
	Topic     string `json:"t"`
	Partition int32  `json:"p"`
	Offset    int64  `json:"o"`
}

// Claim records which source record first claimed a dedupe slot, in which replay epoch, and
// when.
type Claim struct {
	Origin Origin `json:"origin"`
	Epoch  int32  `json:"epoch"`
	Seen   int64  `json:"seen"` // unix ms
}

// State is the group-table value of one requestId: its claimed slots. A slot is the source
// topic, plus the phase for gateway records ("gateway-log/REQUEST"), so one request's REQUEST
// log, RESPONSE log and inference result are three records, not duplicates of each other.
type State struct {
	Slots map[string]Claim `json:"slots"`
}

// Decision is what dedupe says about a record.
type Decision int

const (
	// Claim: the slot is free (never claimed, expired, or claimed in an older epoch): this
	// record claims it and is processed.
	DecideClaim Decision = iota
	// Redelivery: the slot is claimed by this very record (same topic, partition, offset),
	// delivered again after a crash before its commit: processed again.
	DecideRedelivery
	// Duplicate: the slot is claimed by another record in this epoch and window: dropped.
	DecideDuplicate
)

func (d Decision) String() string {
	return [...]string{"claim", "redelivery", "duplicate"}[d]
}

// Decide applies the dedupe rule to a record of slot from origin, seen at now in epoch, with a
// dedupe window. It returns the decision and the state to store (nil: store nothing; a claim,
// or the claimer re-read by a replay in a newer epoch, stores one). Expired slots of the key
// are pruned whenever the key is written.
func Decide(st *State, slot string, origin Origin, epoch int32, now time.Time, window time.Duration) (Decision, *State) {
	c, ok := Claim{}, false
	decision := DecideClaim
	if st != nil {
		c, ok = st.Slots[slot]
	}
	switch {
	case ok && c.Origin == origin && c.Epoch >= epoch:
		return DecideRedelivery, nil
	case ok && c.Origin == origin:
		// A replay in a newer epoch re-reads the record that claimed the slot: it is processed
		// again, and its claim moves to this epoch, or a duplicate read later in the same replay
		// would find only an old-epoch claim and be processed too.
		decision = DecideRedelivery
	case ok && c.Epoch >= epoch && now.Sub(time.UnixMilli(c.Seen)) < window:
		return DecideDuplicate, nil
	}
	next := &State{Slots: map[string]Claim{}}
	if st != nil {
		for s, old := range st.Slots {
			if now.Sub(time.UnixMilli(old.Seen)) < window {
				next.Slots[s] = old
			}
		}
	}
	next.Slots[slot] = Claim{Origin: origin, Epoch: epoch, Seen: now.UnixMilli()}
	return decision, next
}

// Expire drops the slots of st older than window at now; nil means nothing is left.
func Expire(st *State, now time.Time, window time.Duration) *State {
	if st == nil {
		return nil
	}
	next := &State{Slots: map[string]Claim{}}
	for s, c := range st.Slots {
		if now.Sub(time.UnixMilli(c.Seen)) < window {
			next.Slots[s] = c
		}
	}
	if len(next.Slots) == 0 {
		return nil
	}
	return next
}

// StateCodec is the goka codec of the dedupe table. It writes the compact binary layout of
// internal/tablecodec (kind 's'): the slot count, then per slot in name order its name, origin
// topic, partition and offset, epoch and seen time (unix ms). It reads that and the JSON values
// earlier versions wrote ({"slots": …}), told apart by the first byte, so a running group's
// table decodes across an upgrade; each key is rewritten in binary when it is next claimed.
type StateCodec struct{}

const stateKind = 's'

// names interns the slot and topic names the codec reads: a handful, read for every record.
var names tablecodec.Interner

// Encode accepts *State.
func (StateCodec) Encode(v any) ([]byte, error) {
	st, ok := v.(*State)
	if !ok || st == nil {
		return nil, fmt.Errorf("ingest: state codec: cannot encode %T", v)
	}
	slots := make([]string, 0, len(st.Slots))
	size := 8
	for s, c := range st.Slots {
		slots = append(slots, s)
		size += len(s) + len(c.Origin.Topic) + 24
	}
	sort.Strings(slots)
	w := tablecodec.NewWriter(stateKind, size)
	w.Uint(uint64(len(slots)))
	for _, s := range slots {
		c := st.Slots[s]
		w.String(s)
		w.String(c.Origin.Topic)
		w.Int(int64(c.Origin.Partition))
		w.Int(c.Origin.Offset)
		w.Int(int64(c.Epoch))
		w.Int(c.Seen)
	}
	return w.Bytes(), nil
}

// Decode returns *State, from the binary layout or from JSON.
func (StateCodec) Decode(b []byte) (any, error) {
	var st State
	switch tablecodec.Detect(b) {
	case tablecodec.FormatJSON:
		if err := json.Unmarshal(b, &st); err != nil {
			return nil, fmt.Errorf("ingest: state codec: %w", err)
		}
		return &st, nil
	case tablecodec.FormatBinary:
	default:
		return nil, fmt.Errorf("ingest: state codec: %w: neither binary nor JSON", tablecodec.ErrCorrupt)
	}
	r, kind, err := tablecodec.NewReader(b)
	if err != nil {
		return nil, fmt.Errorf("ingest: state codec: %w", err)
	}
	if kind != stateKind {
		return nil, fmt.Errorf("ingest: state codec: %w: kind %q", tablecodec.ErrCorrupt, kind)
	}
	n := r.Len(6)
	st.Slots = make(map[string]Claim, n)
	for range n {
		s := r.StringIn(&names)
		var c Claim
		c.Origin.Topic = r.StringIn(&names)
		c.Origin.Partition = r.Int32()
		c.Origin.Offset = r.Int()
		c.Epoch = r.Int32()
		c.Seen = r.Int()
		st.Slots[s] = c
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("ingest: state codec: %w", err)
	}
	return &st, nil
}
