package features

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/backflowhq/backflow/internal/tablecodec"
)

// The group table's entries and the loopback's deltas are written in the compact binary layout
// of internal/tablecodec: an entry or delta is read and written for every record and every
// delta, and JSON cost ten times the rest of the work. Values earlier versions wrote are JSON;
// both codecs read them (told apart by the first byte), so a running group upgrades in place:
// its table converts key by key as keys are written, and deltas still in the loopback decode.
//
// Layout after the format byte (a kind byte, then fields in this order; ints are zig-zag
// varints, counts unsigned varints, times Unix seconds + nanoseconds, empty collections and
// nil decode alike as nil):
//
//	entry 'e': which ('r' request, 't' tenant, 'u' user, 'm' model, 0 none), then that state
//	  request: tenant, user, model, risk (float32), verdict, categories, latency, tokens,
//	           flagged, event time, counted, flagSent, userFlagSent (pos, each with a presence
//	           byte), countedAt, countedKeys, winFlagSent, seen
//	  tenant/user: requests, flagged, tokens, lastSeen, applied, windows
//	  model: requests, errors, latency sum, latency max, lastSeen, applied, histogram, windows
//	  applied: count, then (partition, offset) by partition; windows: count, then per window
//	  by name: name, bucket count, per bucket start, requests, flagged, tokens, errors,
//	  latency sum, latency max, histogram; histogram: count, then the bins
//	delta 'd': from (partition, offset), count, flag, error, tokens, latency, event time, flagAt
//	delta batch 'b': count, then each delta's fields as in 'd' (what the loopback carries now;
//	  a single 'd' is read as a batch of one)

const (
	entryKind = 'e'
	deltaKind = 'd'
	// deltaBatchKind is a DeltaBatch: the deltas of one aggregate key (fold.go).
	deltaBatchKind = 'b'

	entryNone    = 0
	entryRequest = 'r'
	entryTenant  = 't'
	entryUser    = 'u'
	entryModel   = 'm'
)

// EntryCodec is the goka codec of Entry: written in binary, read from binary or JSON.
type EntryCodec struct{}

// Encode implements goka.Codec.
func (EntryCodec) Encode(v any) ([]byte, error) {
	e, ok := v.(*Entry)
	if !ok || e == nil {
		return nil, fmt.Errorf("features: entry codec: unexpected %T", v)
	}
	switch {
	case e.Request != nil:
		w := tablecodec.NewWriter(entryKind, 192)
		w.Uint(entryRequest)
		writeRequest(w, e.Request)
		return w.Bytes(), nil
	case e.Tenant != nil:
		w := tablecodec.NewWriter(entryKind, 512)
		w.Uint(entryTenant)
		writeParty(w, e.Tenant)
		return w.Bytes(), nil
	case e.User != nil:
		w := tablecodec.NewWriter(entryKind, 512)
		w.Uint(entryUser)
		writeParty(w, (*TenantState)(e.User))
		return w.Bytes(), nil
	case e.Model != nil:
		w := tablecodec.NewWriter(entryKind, 2048)
		w.Uint(entryModel)
		writeModel(w, e.Model)
		return w.Bytes(), nil
	}
	w := tablecodec.NewWriter(entryKind, 4)
	w.Uint(entryNone)
	return w.Bytes(), nil
}

// Decode implements goka.Codec.
func (EntryCodec) Decode(b []byte) (any, error) {
	var e Entry
	r, err := open(b, entryKind, &e)
	if err != nil || r == nil {
		if err != nil {
			return nil, fmt.Errorf("features: entry codec: %w", err)
		}
		return &e, nil
	}
	switch r.Uint() {
	case entryNone:
	case entryRequest:
		e.Request = readRequest(r)
	case entryTenant:
		e.Tenant = readParty(r)
	case entryUser:
		e.User = (*UserState)(readParty(r))
	case entryModel:
		e.Model = readModel(r)
	default:
		return nil, fmt.Errorf("features: entry codec: %w: unknown entry kind", tablecodec.ErrCorrupt)
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("features: entry codec: %w", err)
	}
	return &e, nil
}

// DeltaCodec is the goka codec of the loopback messages: it writes a DeltaBatch (or one
// *Delta) as a batch, and reads a batch, a single binary delta or a JSON one (what earlier
// versions wrote, still in a loopback topic after an upgrade) as a DeltaBatch.
type DeltaCodec struct{}

// Encode implements goka.Codec.
func (DeltaCodec) Encode(v any) ([]byte, error) {
	var ds DeltaBatch
	switch x := v.(type) {
	case DeltaBatch:
		ds = x
	case *Delta:
		ds = DeltaBatch{x}
	}
	if len(ds) == 0 {
		return nil, fmt.Errorf("features: delta codec: unexpected %T", v)
	}
	w := tablecodec.NewWriter(deltaBatchKind, 1+40*len(ds))
	w.Uint(uint64(len(ds)))
	for _, d := range ds {
		if d == nil {
			return nil, fmt.Errorf("features: delta codec: a nil delta in a batch")
		}
		writeDelta(w, d)
	}
	return w.Bytes(), nil
}

func writeDelta(w *tablecodec.Writer, d *Delta) {
	w.Int(int64(d.From.Partition))
	w.Int(d.From.Offset)
	w.Bool(d.Count)
	w.Bool(d.Flag)
	w.Bool(d.Error)
	w.Int(d.Tokens)
	w.Int(d.LatencyMs)
	w.Time(d.EventTime)
	w.Time(d.FlagAt)
}

func readDelta(r *tablecodec.Reader) *Delta {
	d := &Delta{}
	d.From.Partition = r.Int32()
	d.From.Offset = r.Int()
	d.Count = r.Bool()
	d.Flag = r.Bool()
	d.Error = r.Bool()
	d.Tokens = r.Int()
	d.LatencyMs = r.Int()
	d.EventTime = r.Time()
	d.FlagAt = r.Time()
	return d
}

// Decode implements goka.Codec: it returns a DeltaBatch.
func (DeltaCodec) Decode(b []byte) (any, error) {
	var d Delta
	r, kind, err := read(b, &d)
	if err != nil {
		return nil, fmt.Errorf("features: delta codec: %w", err)
	}
	var ds DeltaBatch
	switch {
	case r == nil: // a JSON delta
		return DeltaBatch{&d}, nil
	case kind == deltaKind:
		ds = DeltaBatch{readDelta(r)}
	case kind == deltaBatchKind:
		n := r.Len(9) // a delta is at least nine bytes
		ds = make(DeltaBatch, 0, n)
		for range n {
			ds = append(ds, readDelta(r))
		}
	default:
		return nil, fmt.Errorf("features: delta codec: %w: kind %q", tablecodec.ErrCorrupt, kind)
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("features: delta codec: %w", err)
	}
	return ds, nil
}

// open tells b's format: a JSON value is decoded into v at once (the reader is nil); a binary
// one of kind returns its reader.
func open(b []byte, kind byte, v any) (*tablecodec.Reader, error) {
	r, k, err := read(b, v)
	if err == nil && r != nil && k != kind {
		err = fmt.Errorf("%w: kind %q, want %q", tablecodec.ErrCorrupt, k, kind)
	}
	return r, err
}

// read is open for a value of any kind: a binary value's reader comes with its kind.
func read(b []byte, v any) (*tablecodec.Reader, byte, error) {
	switch tablecodec.Detect(b) {
	case tablecodec.FormatJSON:
		return nil, 0, json.Unmarshal(b, v)
	case tablecodec.FormatBinary:
		return tablecodec.NewReader(b)
	}
	return nil, 0, fmt.Errorf("%w: neither binary nor JSON", tablecodec.ErrCorrupt)
}

func writePos(w *tablecodec.Writer, p *Pos) {
	w.Bool(p != nil)
	if p != nil {
		w.Int(int64(p.Partition))
		w.Int(p.Offset)
	}
}

func readPos(r *tablecodec.Reader) *Pos {
	if !r.Bool() {
		return nil
	}
	return &Pos{Partition: r.Int32(), Offset: r.Int()}
}

func writeStrings(w *tablecodec.Writer, ss []string) {
	w.Uint(uint64(len(ss)))
	for _, s := range ss {
		w.String(s)
	}
}

func readStrings(r *tablecodec.Reader) []string {
	n := r.Len(1)
	if n == 0 {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = r.String()
	}
	return out
}

func writeRequest(w *tablecodec.Writer, st *RequestState) {
	w.String(st.Tenant)
	w.String(st.User)
	w.String(st.Model)
	w.Float32(st.RiskScore)
	w.String(st.Verdict)
	writeStrings(w, st.Categories)
	w.Int(st.LatencyMs)
	w.Int(st.TotalTokens)
	w.Bool(st.Flagged)
	w.Time(st.EventTime)
	writePos(w, st.Counted)
	writePos(w, st.FlagSent)
	writePos(w, st.UserFlagSent)
	w.Time(st.CountedAt)
	writeStrings(w, st.CountedKeys)
	writePos(w, st.WinFlagSent)
	w.Time(st.Seen)
}

func readRequest(r *tablecodec.Reader) *RequestState {
	st := &RequestState{}
	st.Tenant = r.String()
	st.User = r.String()
	st.Model = r.String()
	st.RiskScore = r.Float32()
	st.Verdict = r.String()
	st.Categories = readStrings(r)
	st.LatencyMs = r.Int()
	st.TotalTokens = r.Int()
	st.Flagged = r.Bool()
	st.EventTime = r.Time()
	st.Counted = readPos(r)
	st.FlagSent = readPos(r)
	st.UserFlagSent = readPos(r)
	st.CountedAt = r.Time()
	st.CountedKeys = readStrings(r)
	st.WinFlagSent = readPos(r)
	st.Seen = r.Time()
	return st
}

func writeApplied(w *tablecodec.Writer, applied map[int32]int64) {
	parts := make([]int32, 0, len(applied))
	for p := range applied {
		parts = append(parts, p)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	w.Uint(uint64(len(parts)))
	for _, p := range parts {
		w.Int(int64(p))
		w.Int(applied[p])
	}
}

func readApplied(r *tablecodec.Reader) map[int32]int64 {
	n := r.Len(2)
	if n == 0 {
		return nil
	}
	m := make(map[int32]int64, n)
	for range n {
		p := r.Int32()
		m[p] = r.Int()
	}
	return m
}

func writeHist(w *tablecodec.Writer, h Hist) {
	w.Uint(uint64(len(h)))
	for _, n := range h {
		w.Int(n)
	}
}

func readHist(r *tablecodec.Reader) Hist {
	n := r.Len(1)
	if n == 0 {
		return nil
	}
	h := make(Hist, n)
	for i := range h {
		h[i] = r.Int()
	}
	return h
}

func writeWindows(w *tablecodec.Writer, wd Windowed) {
	names := make([]string, 0, len(wd))
	for n := range wd {
		names = append(names, n)
	}
	sort.Strings(names)
	w.Uint(uint64(len(names)))
	for _, n := range names {
		w.String(n)
		s := wd[n]
		w.Uint(uint64(len(s)))
		for i := range s {
			b := &s[i]
			w.Int(b.Start)
			w.Int(b.Requests)
			w.Int(b.Flagged)
			w.Int(b.Tokens)
			w.Int(b.Errors)
			w.Int(b.LatencySum)
			w.Int(b.LatencyMax)
			writeHist(w, b.Hist)
		}
	}
}

func readWindows(r *tablecodec.Reader) Windowed {
	n := r.Len(2)
	if n == 0 {
		return nil
	}
	wd := make(Windowed, n)
	for range n {
		name := r.String()
		m := r.Len(8)
		var s Series
		if m > 0 {
			s = make(Series, m)
		}
		for i := range s {
			b := &s[i]
			b.Start = r.Int()
			b.Requests = r.Int()
			b.Flagged = r.Int()
			b.Tokens = r.Int()
			b.Errors = r.Int()
			b.LatencySum = r.Int()
			b.LatencyMax = r.Int()
			b.Hist = readHist(r)
		}
		wd[name] = s
	}
	return wd
}

func writeParty(w *tablecodec.Writer, st *TenantState) {
	w.Int(st.RequestCount)
	w.Int(st.FlaggedCount)
	w.Int(st.Tokens)
	w.Time(st.LastSeen)
	writeApplied(w, st.Applied)
	writeWindows(w, st.Win)
}

func readParty(r *tablecodec.Reader) *TenantState {
	st := &TenantState{}
	st.RequestCount = r.Int()
	st.FlaggedCount = r.Int()
	st.Tokens = r.Int()
	st.LastSeen = r.Time()
	st.Applied = readApplied(r)
	st.Win = readWindows(r)
	return st
}

func writeModel(w *tablecodec.Writer, st *ModelState) {
	w.Int(st.RequestCount)
	w.Int(st.ErrorCount)
	w.Int(st.LatencySumMs)
	w.Int(st.LatencyMaxMs)
	w.Time(st.LastSeen)
	writeApplied(w, st.Applied)
	writeHist(w, st.LatencyHist)
	writeWindows(w, st.Win)
}

func readModel(r *tablecodec.Reader) *ModelState {
	st := &ModelState{}
	st.RequestCount = r.Int()
	st.ErrorCount = r.Int()
	st.LatencySumMs = r.Int()
	st.LatencyMaxMs = r.Int()
	st.LastSeen = r.Time()
	st.Applied = readApplied(r)
	st.LatencyHist = readHist(r)
	st.Win = readWindows(r)
	return st
}
