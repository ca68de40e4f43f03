package ingest

import (
	"encoding/json"
	"fmt"
	"math/bits"
	"sort"
	"strings"
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
// internal/tablecodec, kind 'c':
//
//	0x01 'c' | slot count (uvarint) | base seen: the oldest slot's seen time, unix ms (varint)
//	then per slot, in name order:
//	  lead byte: bits 0-4 the slot's name from wellKnownSlots (0: the name follows as a
//	    string); bit 5 the origin topic is the slot's topic (the name up to a '/'), else it
//	    follows as a string; bit 6 the epoch is the previous slot's (the first slot's: 0),
//	    else it follows (varint); bit 7 the offset is a delta from the previous slot's
//	  [name] | [origin topic] | origin partition (varint) | origin offset, or its delta
//	  (varint) | [epoch] | seen - base seen (uvarint)
//
// A request's three slots take 30 to 40 bytes (the names and topics are a byte, the seen
// times a base and three deltas), where kind 's', written before, took about 150: the slot
// count, then per slot its name, origin topic, partition, offset, epoch and seen time in full.
// It reads both and the JSON values earlier versions still wrote ({"slots": …}), told apart by
// the first two bytes, so a running group's table decodes across an upgrade; each key is
// rewritten in the newest layout when it is next claimed.
type StateCodec struct{}

const (
	stateKindV1 = 's'
	stateKind   = 'c'
)

// wellKnownSlots are the slot names of the default source topics (avro.TopicGatewayLog and
// its phases, avro.TopicInferenceResult), written as their index here (1..31): a value stores
// the index, so an entry is never changed or removed, only appended.
var wellKnownSlots = [...]string{"", slotGatewayRequest, slotGatewayResponse, slotInference}

const (
	slotGatewayRequest  = "gateway-log/REQUEST"
	slotGatewayResponse = "gateway-log/RESPONSE"
	slotInference       = "model-inference-result"
)

const (
	slotNameMask    = 0x1f
	slotSameTopic   = 0x20
	slotSameEpoch   = 0x40
	slotOffsetDelta = 0x80
)

// slotCode is name's index in wellKnownSlots, or 0.
func slotCode(name string) byte {
	switch name {
	case slotGatewayRequest:
		return 1
	case slotGatewayResponse:
		return 2
	case slotInference:
		return 3
	}
	return 0
}

// slotTopic is the topic of a slot: its name up to a '/' (a gateway record's phase follows).
func slotTopic(slot string) string {
	if i := strings.IndexByte(slot, '/'); i >= 0 {
		return slot[:i]
	}
	return slot
}

// names interns the slot and topic names the codec reads: a handful, read for every record.
var names tablecodec.Interner

// varintLen is the bytes of v as a zig-zag varint.
func varintLen(v int64) int {
	return max(1, (bits.Len64(uint64(v<<1)^uint64(v>>63))+6)/7)
}

// Encode accepts *State.
func (StateCodec) Encode(v any) ([]byte, error) {
	st, ok := v.(*State)
	if !ok || st == nil {
		return nil, fmt.Errorf("ingest: state codec: cannot encode %T", v)
	}
	slots := make([]string, 0, len(st.Slots))
	var base int64
	for s, c := range st.Slots {
		if len(slots) == 0 || c.Seen < base {
			base = c.Seen
		}
		slots = append(slots, s)
	}
	sort.Strings(slots)
	// Enough for the default topics' slots; a name written out grows the buffer.
	w := tablecodec.NewWriter(stateKind, 12+16*len(slots))
	w.Uint(uint64(len(slots)))
	w.Int(base)
	var prev Claim // the first slot's previous: epoch 0, offset 0
	for _, s := range slots {
		c := st.Slots[s]
		code := slotCode(s)
		lead := code
		sameTopic := c.Origin.Topic == slotTopic(s)
		if sameTopic {
			lead |= slotSameTopic
		}
		if c.Epoch == prev.Epoch {
			lead |= slotSameEpoch
		}
		off, delta := c.Origin.Offset, c.Origin.Offset-prev.Origin.Offset
		if varintLen(delta) < varintLen(off) {
			lead |= slotOffsetDelta
			off = delta
		}
		w.Byte(lead)
		if code == 0 {
			w.String(s)
		}
		if !sameTopic {
			w.String(c.Origin.Topic)
		}
		w.Int(int64(c.Origin.Partition))
		w.Int(off)
		if c.Epoch != prev.Epoch {
			w.Int(int64(c.Epoch))
		}
		w.Uint(uint64(c.Seen - base))
		prev = c
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
	switch kind {
	case stateKind:
		decodeState(r, &st)
	case stateKindV1:
		decodeStateV1(r, &st)
	default:
		return nil, fmt.Errorf("ingest: state codec: %w: kind %q", tablecodec.ErrCorrupt, kind)
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("ingest: state codec: %w", err)
	}
	return &st, nil
}

// decodeState reads the layout Encode writes (kind 'c').
func decodeState(r *tablecodec.Reader, st *State) {
	n := r.Len(4)
	base := r.Int()
	st.Slots = make(map[string]Claim, n)
	var prev Claim
	for range n {
		lead := r.Byte()
		var s string
		switch code := int(lead & slotNameMask); {
		case code == 0:
			s = r.StringIn(&names)
		case code < len(wellKnownSlots):
			s = wellKnownSlots[code]
		default:
			r.Fail("unknown slot name")
		}
		var c Claim
		if lead&slotSameTopic != 0 {
			c.Origin.Topic = slotTopic(s)
		} else {
			c.Origin.Topic = r.StringIn(&names)
		}
		c.Origin.Partition = r.Int32()
		c.Origin.Offset = r.Int()
		if lead&slotOffsetDelta != 0 {
			c.Origin.Offset += prev.Origin.Offset
		}
		c.Epoch = prev.Epoch
		if lead&slotSameEpoch == 0 {
			c.Epoch = r.Int32()
		}
		c.Seen = base + int64(r.Uint())
		st.Slots[s] = c
		prev = c
	}
}

// decodeStateV1 reads kind 's', the layout written before: per slot its name, origin topic,
// partition, offset, epoch and seen time in full.
func decodeStateV1(r *tablecodec.Reader, st *State) {
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
}
