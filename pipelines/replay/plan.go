package replay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/internal/retry"
)

// Request is what to plan: which group, which partitions, which spec.
type Request struct {
	Group string
	Scope Scope
	Spec  Spec
	// Create allows a group that does not exist yet (its current offsets are then unknown).
	Create bool
	// ToEnd lists topics whose partitions are moved to their log end whatever the spec: the
	// feature aggregator's loopback under a state reset. They must not be in Scope.
	ToEnd []string
	// Now is the clock of ByDuration. Default time.Now.
	Now func() time.Time
}

// LoopTopic is a goka group's loopback topic, which --all-topics leaves out.
func LoopTopic(group string) string { return group + "-loop" }

// Validate checks the request without contacting Kafka.
func (r Request) Validate() error {
	if r.Group == "" {
		return badRequest("a group is needed (--group)")
	}
	if r.Spec.Kind < ToEarliest || r.Spec.Kind > ToCurrent {
		return badRequest("one spec is needed: --to-earliest, --to-latest, --to-current, --to-datetime, --by-duration, --shift-by, --to-offset or --from-file")
	}
	if r.Scope.AllTopics && len(r.Scope.Topics) > 0 {
		return badRequest("one scope is needed: --all-topics, or one or more --topic, not both")
	}
	// Kafka's tool takes --from-file with or without a scope: the file says which partitions move.
	if r.Spec.Kind == FromFile {
		if len(r.Spec.File) == 0 {
			return badRequest("--from-file: the plan has no partition")
		}
	} else if !r.Scope.Given() {
		return badRequest("one scope is needed: --all-topics, or one or more --topic")
	}
	if r.Spec.Kind == ToOffset && r.Spec.N < 0 {
		return badRequest("--to-offset %d: must not be negative", r.Spec.N)
	}
	if r.Spec.Kind == ByDuration && r.Spec.Duration <= 0 {
		return badRequest("--by-duration: must be positive")
	}
	for _, t := range r.Scope.Topics {
		if slices.Contains(r.ToEnd, t.Topic) {
			return badRequest("topic %s is moved to its end by the stage; leave it out of --topic", t.Topic)
		}
	}
	for tp := range r.Spec.File {
		if slices.Contains(r.ToEnd, tp.Topic) {
			return badRequest("topic %s is moved to its end by the stage; leave it out of the plan file", tp.Topic)
		}
	}
	return nil
}

// Row is one partition of a plan.
type Row struct {
	Topic     string
	Partition int32
	// Current is the committed offset; -1 when the group has none on this partition.
	Current int64
	// Target is where the offset moves; Requested is what the spec asked for, before clamping.
	Target, Requested int64
	// LogStart and LogEnd bound the retained log.
	LogStart, LogEnd int64
	// Note says why the target differs from the request (clamped, empty partition), or that the
	// stage moves this partition to its end.
	Note string
	// CurrentTime is the timestamp of the last record the group consumed (at Current-1) and
	// TargetTime that of the first record it will read (at Target); zero when there is none.
	CurrentTime, TargetTime time.Time
}

// Reread is how many records the group will read again (Current - Target); negative when the
// move skips records forward; 0 without a committed offset.
func (r Row) Reread() int64 {
	if r.Current < 0 {
		return 0
	}
	return r.Current - r.Target
}

// LagAfter is the group's lag on this partition once moved.
func (r Row) LagAfter() int64 { return r.LogEnd - r.Target }

// Plan is what a replay will do: one row per partition, sorted by topic and partition.
type Plan struct {
	Group string
	Spec  Spec
	// Scope is the request's, as completed (Complete): what the plan was asked to move.
	Scope Scope
	// State is the group's state (Empty, Stable, Dead...); Exists false for a group the cluster
	// does not know (allowed with Request.Create).
	State   string
	Exists  bool
	Members []Member
	Rows    []Row
	// Warnings are things the operator should read: clamped points, skipped loopback topics.
	Warnings []string
	// Time is when the plan was made (ByDuration's "now").
	Time time.Time
}

// Live reports whether the group has live members (Apply refuses then).
func (p *Plan) Live() bool { return len(p.Members) > 0 }

// Reread is the total of the rows' Reread over rows with a positive one.
func (p *Plan) Reread() int64 {
	var n int64
	for _, r := range p.Rows {
		if r.Reread() > 0 {
			n += r.Reread()
		}
	}
	return n
}

// Offsets are the commits that apply the plan.
func (p *Plan) Offsets() kadm.Offsets {
	os := kadm.Offsets{}
	for _, r := range p.Rows {
		os.Add(kadm.Offset{Topic: r.Topic, Partition: r.Partition, At: r.Target, LeaderEpoch: -1})
	}
	return os
}

// Build makes the plan of req against the cluster cl talks to. It changes nothing.
func Build(ctx context.Context, cl *kgo.Client, req Request) (*Plan, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	now := time.Now
	if req.Now != nil {
		now = req.Now
	}
	adm := kadm.NewClient(cl)
	p := &Plan{Group: req.Group, Spec: req.Spec, Scope: req.Scope, Time: now()}
	committed, err := groupState(ctx, adm, req, p)
	if err != nil {
		return nil, err
	}
	parts, err := scopePartitions(ctx, adm, req, committed, p)
	if err != nil {
		return nil, err
	}
	lo, err := listOffsets(ctx, adm, req, parts, p.Time)
	if err != nil {
		return nil, err
	}
	lo.committed = committed
	for _, tp := range parts {
		r, err := lo.row(req, tp)
		if err != nil {
			return nil, err
		}
		if warn := lo.clamp(&r, req, tp); r.Note != "" && warn {
			p.Warnings = append(p.Warnings, fmt.Sprintf("%s: %s", tp, r.Note))
		}
		p.Rows = append(p.Rows, r)
	}
	for _, t := range req.ToEnd {
		rows, err := lo.toEnd(t)
		if err != nil {
			return nil, err
		}
		p.Rows = append(p.Rows, rows...)
	}
	sort.Slice(p.Rows, func(i, j int) bool {
		a, b := p.Rows[i], p.Rows[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	if err := fillTimes(ctx, cl, p.Rows); err != nil {
		return nil, err
	}
	return p, nil
}

// groupState fills p's group state, members and existence, and returns the group's committed
// offsets. A group that does not exist is refused unless req.Create.
func groupState(ctx context.Context, adm *kadm.Client, req Request, p *Plan) (kadm.OffsetResponses, error) {
	g, err := describe(ctx, adm, req.Group)
	if err != nil {
		return nil, err
	}
	p.State, p.Members = g.State, g.Members
	var committed kadm.OffsetResponses
	err = retriable(ctx, func() error {
		var err error
		if committed, err = adm.FetchOffsets(ctx, req.Group); err == nil {
			err = committed.Error()
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("replay: committed offsets of %s: %w", req.Group, err)
	}
	p.Exists = g.Listed || len(p.Members) > 0 || len(committed) > 0
	if !p.Exists && !req.Create {
		return nil, fmt.Errorf("%w: %s (no members, no committed offsets); pass --create to start it at the planned offsets", ErrUnknownGroup, req.Group)
	}
	return committed, nil
}

// byTimeStamp is the timestamp ListOffsetsAfterMilli gave for tp's offset (zero if none).
func byTimeStamp(lo kadm.ListedOffsets, tp TopicPartition) time.Time {
	o, ok := lo.Lookup(tp.Topic, tp.Partition)
	if !ok || o.Timestamp < 0 {
		return time.Time{}
	}
	return time.UnixMilli(o.Timestamp)
}

type groupInfo struct {
	State   string
	Members []Member
	Listed  bool
}

func describe(ctx context.Context, adm *kadm.Client, group string) (groupInfo, error) {
	var gi groupInfo
	var dg kadm.DescribedGroups
	err := retriable(ctx, func() error {
		var err error
		if dg, err = adm.DescribeGroups(ctx, group); err == nil {
			if d, ok := dg[group]; ok && d.Err != nil && !errors.Is(d.Err, kerr.GroupIDNotFound) {
				err = d.Err
			}
		}
		return err
	})
	if err != nil {
		return gi, fmt.Errorf("replay: describe group %s: %w", group, err)
	}
	d, ok := dg[group]
	if ok && d.Err != nil && !errors.Is(d.Err, kerr.GroupIDNotFound) {
		return gi, fmt.Errorf("replay: describe group %s: %w", group, d.Err)
	}
	gi.State = d.State
	if gi.State == "" {
		gi.State = "Dead"
	}
	for _, m := range d.Members {
		mm := Member{ID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost}
		if m.InstanceID != nil {
			mm.Instance = *m.InstanceID
		}
		gi.Members = append(gi.Members, mm)
	}
	var lg kadm.ListedGroups
	if err := retriable(ctx, func() error {
		var err error
		lg, err = adm.ListGroups(ctx)
		return err
	}); err != nil {
		return gi, fmt.Errorf("replay: list groups: %w", err)
	}
	_, gi.Listed = lg[group]
	return gi, nil
}

// currentNote says where --to-current leaves a partition other than at a retained committed
// offset ("" when it is one).
func currentNote(r Row) string {
	switch {
	case r.Current < 0:
		return "no committed offset: set to the log end, as --to-current does"
	case r.Current > r.LogEnd:
		return fmt.Sprintf("%d is past the log end (%d): kept, as --to-current does", r.Current, r.LogEnd)
	case r.Current < r.LogStart:
		return fmt.Sprintf("%d is before the log start (%d, out of retention): kept, as --to-current does; the group's auto.offset.reset decides where it starts", r.Current, r.LogStart)
	}
	return ""
}

// retriable runs f again while it fails with a retriable Kafka error (a coordinator or leader
// that just moved, a cluster whose offsets topic is still being created), for up to about 10 s.
func retriable(ctx context.Context, f func() error) error {
	return retry.Do(ctx, kafkaPolicy, kerr.IsRetriable, nil, f)
}

// kafkaPolicy is how replay waits out a Kafka that is settling: every 200ms, 51 calls at most.
var kafkaPolicy = retry.Policy{Min: 200 * time.Millisecond, Max: 200 * time.Millisecond, Attempts: 51}

// listed runs a ListOffsets call and turns partition errors into one error.
func listed(ctx context.Context, what string, f func() (kadm.ListedOffsets, error)) (kadm.ListedOffsets, error) {
	var lo kadm.ListedOffsets
	err := retriable(ctx, func() error {
		var err error
		if lo, err = f(); err == nil {
			err = lo.Error()
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("replay: %s: %w", what, err)
	}
	return lo, nil
}

// fillTimes reads the timestamps of the records at both ends of each row: Current-1 and
// Target. It gives up quietly on a record it cannot read in a few seconds (the time is then
// shown as unknown): timestamps inform, they do not decide.
func fillTimes(ctx context.Context, cl *kgo.Client, rows []Row) error {
	cur := map[TopicPartition]int64{}
	tgt := map[TopicPartition]int64{}
	for _, r := range rows {
		tp := TopicPartition{r.Topic, r.Partition}
		if r.Current-1 >= r.LogStart && r.Current-1 < r.LogEnd {
			cur[tp] = r.Current - 1
		}
		if r.Target >= r.LogStart && r.Target < r.LogEnd {
			tgt[tp] = r.Target
		}
	}
	ct, err := RecordTimes(ctx, cl, cur)
	if err != nil {
		return err
	}
	tt, err := RecordTimes(ctx, cl, tgt)
	if err != nil {
		return err
	}
	for i := range rows {
		tp := TopicPartition{rows[i].Topic, rows[i].Partition}
		rows[i].CurrentTime, rows[i].TargetTime = ct[tp], tt[tp]
	}
	return nil
}

// RecordTimes returns the timestamp of the record at (or, past a compacted gap, just after)
// each offset. Offsets it cannot read within 5 seconds are left out.
func RecordTimes(ctx context.Context, cl *kgo.Client, at map[TopicPartition]int64) (map[TopicPartition]time.Time, error) {
	out := map[TopicPartition]time.Time{}
	if len(at) == 0 {
		return out, nil
	}
	parts := map[string]map[int32]kgo.Offset{}
	for tp, o := range at {
		if parts[tp.Topic] == nil {
			parts[tp.Topic] = map[int32]kgo.Offset{}
		}
		parts[tp.Topic][tp.Partition] = kgo.NewOffset().At(o)
	}
	rd, err := kgo.NewClient(append(cl.Opts(), kgo.ConsumePartitions(parts), kgo.FetchMaxBytes(1<<20), kgo.FetchMaxPartitionBytes(64<<10))...)
	if err != nil {
		return nil, fmt.Errorf("replay: record times: %w", err)
	}
	defer rd.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for len(out) < len(at) && ctx.Err() == nil {
		fs := rd.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			tp := TopicPartition{r.Topic, r.Partition}
			if _, done := out[tp]; done {
				return
			}
			if want, ok := at[tp]; ok && r.Offset >= want {
				out[tp] = r.Timestamp
				rd.PauseFetchPartitions(map[string][]int32{r.Topic: {r.Partition}})
			}
		})
	}
	return out, nil
}
