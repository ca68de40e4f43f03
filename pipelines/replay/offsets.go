package replay

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// logOffsets are what a plan is made from: the partitions' log start and end offsets, the
// group's commits, and for a spec by time, the offsets at its time (at).
type logOffsets struct {
	starts, ends, byTime kadm.ListedOffsets
	committed            kadm.OffsetResponses
	at                   time.Time // zero unless the spec is by time
}

// listOffsets lists the log offsets of the topics of parts and req.ToEnd, and the offsets at
// the spec's time when it has one (measured from now for a duration).
func listOffsets(ctx context.Context, adm *kadm.Client, req Request, parts []TopicPartition, now time.Time) (*logOffsets, error) {
	topics := map[string]bool{}
	for _, tp := range parts {
		topics[tp.Topic] = true
	}
	for _, t := range req.ToEnd {
		topics[t] = true
	}
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	sort.Strings(names)
	lo := &logOffsets{}
	var err error
	if lo.starts, err = listed(ctx, "log start", func() (kadm.ListedOffsets, error) { return adm.ListStartOffsets(ctx, names...) }); err != nil {
		return nil, err
	}
	if lo.ends, err = listed(ctx, "log end", func() (kadm.ListedOffsets, error) { return adm.ListEndOffsets(ctx, names...) }); err != nil {
		return nil, err
	}
	switch req.Spec.Kind {
	case ToDatetime:
		lo.at = req.Spec.Time
	case ByDuration:
		lo.at = now.Add(-req.Spec.Duration)
	}
	if !lo.at.IsZero() {
		if lo.byTime, err = listed(ctx, "offsets by time", func() (kadm.ListedOffsets, error) {
			return adm.ListOffsetsAfterMilli(ctx, lo.at.UnixMilli(), names...)
		}); err != nil {
			return nil, err
		}
	}
	return lo, nil
}

// row is tp's row of the plan: its offsets, and the offset req's spec asks for (Requested,
// and Target until clamp).
func (lo *logOffsets) row(req Request, tp TopicPartition) (Row, error) {
	s, okS := lo.starts.Lookup(tp.Topic, tp.Partition)
	e, okE := lo.ends.Lookup(tp.Topic, tp.Partition)
	if !okS || !okE {
		return Row{}, fmt.Errorf("%w: %s", ErrUnknownPartition, tp)
	}
	r := Row{Topic: tp.Topic, Partition: tp.Partition, Current: -1, LogStart: s.Offset, LogEnd: e.Offset}
	if c, ok := lo.committed.Lookup(tp.Topic, tp.Partition); ok && c.At >= 0 {
		r.Current = c.At
	}
	switch req.Spec.Kind {
	case ToEarliest:
		r.Requested = r.LogStart
	case ToLatest:
		r.Requested = r.LogEnd
	case ToOffset:
		r.Requested = req.Spec.N
	case ShiftBy:
		if r.Current < 0 {
			return Row{}, fmt.Errorf("%w: %s of group %s", ErrNoCommittedOffset, tp, req.Group)
		}
		r.Requested = r.Current + req.Spec.N
	case FromFile:
		r.Requested = req.Spec.File[tp]
	case ToCurrent:
		r.Requested = r.Current
		if r.Current < 0 {
			r.Requested = r.LogEnd
		}
	case ToDatetime, ByDuration:
		o, ok := lo.byTime.Lookup(tp.Topic, tp.Partition)
		if !ok {
			return Row{}, fmt.Errorf("%w: %s (offsets by time)", ErrUnknownPartition, tp)
		}
		r.Requested = o.Offset
	}
	r.Target = r.Requested
	return r, nil
}

// clamp keeps r's Target within its log, as Kafka's tool does, and notes why it moved; it
// reports whether the note is a warning.
func (lo *logOffsets) clamp(r *Row, req Request, tp TopicPartition) (warn bool) {
	switch {
	case req.Spec.Kind == ToCurrent: // Kafka's tool neither clamps nor checks it
		r.Note = currentNote(*r)
	case r.Requested > r.LogEnd:
		r.Target = r.LogEnd
		r.Note = fmt.Sprintf("%d is past the log end: clamped to %d", r.Requested, r.LogEnd)
	case r.Requested < r.LogStart:
		r.Target = r.LogStart
		r.Note = fmt.Sprintf("%d is before the log start (out of retention): clamped to %d", r.Requested, r.LogStart)
	case lo.at.IsZero():
	case r.LogStart == r.LogEnd:
		r.Note = "empty partition: log end"
		return false
	case r.Target == r.LogEnd:
		r.Note = "no record at or after " + lo.at.UTC().Format(time.RFC3339) + ": clamped to the log end"
	case r.Target == r.LogStart && byTimeStamp(lo.byTime, tp).After(lo.at):
		r.Note = "before the oldest retained record (" + byTimeStamp(lo.byTime, tp).UTC().Format(time.RFC3339) + "): clamped to the log start"
	}
	return true
}

// toEnd is the rows of topic t, which the stage moves to its end (Request.ToEnd).
func (lo *logOffsets) toEnd(t string) ([]Row, error) {
	var rows []Row
	lo.ends.Each(func(e kadm.ListedOffset) {
		if e.Topic != t {
			return
		}
		s, _ := lo.starts.Lookup(t, e.Partition)
		r := Row{Topic: t, Partition: e.Partition, Current: -1, Target: e.Offset, Requested: e.Offset,
			LogStart: s.Offset, LogEnd: e.Offset, Note: "moved to its end by the stage"}
		if c, ok := lo.committed.Lookup(t, e.Partition); ok && c.At >= 0 {
			r.Current = c.At
		}
		rows = append(rows, r)
	})
	if len(rows) == 0 {
		return nil, fmt.Errorf("%w: topic %s", ErrUnknownPartition, t)
	}
	return rows, nil
}
