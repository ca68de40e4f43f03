package replay

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// PartitionLag is one partition of a group: committed offset (-1: none), log end, lag.
type PartitionLag struct {
	Topic     string
	Partition int32
	Committed int64
	End       int64
	Lag       int64
	// Member is the client id of the member consuming it ("" when none).
	Member string
}

// GroupStatus is a group at one moment: state, members, lag per partition.
type GroupStatus struct {
	Group      string
	State      string
	Members    []Member
	Partitions []PartitionLag // sorted by topic, partition
	Time       time.Time
}

// Lag is the total lag.
func (s GroupStatus) Lag() int64 {
	var n int64
	for _, p := range s.Partitions {
		n += p.Lag
	}
	return n
}

// TopicLag sums a group's partitions of one topic.
type TopicLag struct {
	Topic      string
	Partitions int
	Committed  int64 // sum over partitions with a commit
	End        int64
	Lag        int64
}

// Topics sums the partitions per topic, sorted by topic.
func (s GroupStatus) Topics() []TopicLag {
	var out []TopicLag
	for _, p := range s.Partitions {
		if len(out) == 0 || out[len(out)-1].Topic != p.Topic {
			out = append(out, TopicLag{Topic: p.Topic})
		}
		t := &out[len(out)-1]
		t.Partitions++
		if p.Committed > 0 {
			t.Committed += p.Committed
		}
		t.End += p.End
		t.Lag += p.Lag
	}
	return out
}

// Status describes groups (all groups when none is named), with their lag, as
// kafka-consumer-groups --describe does: committed offsets against log ends. Its errors carry
// no package prefix: the commands that call it (groups, replay status) say whose they are.
func Status(ctx context.Context, adm *kadm.Client, groups ...string) ([]GroupStatus, error) {
	if len(groups) == 0 {
		lg, err := adm.ListGroups(ctx)
		if err != nil {
			return nil, fmt.Errorf("list groups: %w", err)
		}
		groups = lg.Groups()
	}
	if len(groups) == 0 {
		return nil, nil
	}
	var lags kadm.DescribedGroupLags
	err := retriable(ctx, func() error {
		var err error
		lags, err = adm.Lag(ctx, groups...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("lag: %w", err)
	}
	now := time.Now()
	var out []GroupStatus
	for _, g := range groups {
		l, ok := lags[g]
		if !ok {
			continue
		}
		if err := l.Error(); err != nil {
			if errors.Is(err, kerr.GroupIDNotFound) {
				return nil, fmt.Errorf("group %s: Kafka knows no such group: %w ('backflow groups' lists them)", g, err)
			}
			return nil, fmt.Errorf("group %s: %w", g, err)
		}
		st := GroupStatus{Group: g, State: l.State, Time: now}
		for _, m := range l.Members {
			mm := Member{ID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost}
			if m.InstanceID != nil {
				mm.Instance = *m.InstanceID
			}
			st.Members = append(st.Members, mm)
		}
		for t, ps := range l.Lag {
			for p, ml := range ps {
				pl := PartitionLag{Topic: t, Partition: p, Committed: max(ml.Commit.At, -1), End: ml.End.Offset, Lag: ml.Lag}
				if ml.Err != nil || pl.Lag < 0 {
					return nil, fmt.Errorf("group %s: lag of %s:%d: %v", g, t, p, ml.Err)
				}
				if ml.Member != nil {
					pl.Member = ml.Member.ClientID
				}
				st.Partitions = append(st.Partitions, pl)
			}
		}
		sort.Slice(st.Partitions, func(i, j int) bool {
			a, b := st.Partitions[i], st.Partitions[j]
			return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
		})
		out = append(out, st)
	}
	return out, nil
}

// Progress is how far a group has caught up since a replay moved its offsets.
type Progress struct {
	// Done is how many records the group has consumed since Base; Total is Done + the lag now.
	Done, Total int64
	Lag         int64
	// Rate is records per second between the last two snapshots; ETA the lag at that rate
	// (0 when the rate is 0).
	Rate float64
	ETA  time.Duration
}

// Fraction is Done/Total, 1 when there is nothing to do.
func (p Progress) Fraction() float64 {
	if p.Total <= 0 {
		return 1
	}
	return float64(p.Done) / float64(p.Total)
}

// Base is where catch-up is measured from: per partition, the offset the group started at.
type Base map[TopicPartition]int64

// BaseFromRecord is the offsets a replay record moved the group to.
func BaseFromRecord(r Record) Base {
	b := Base{}
	for _, m := range r.Partitions {
		b[TopicPartition{m.Topic, m.Partition}] = m.To
	}
	return b
}

// BaseFromStatus is the group's committed offsets now (partitions without a commit count from 0).
func BaseFromStatus(s GroupStatus) Base {
	b := Base{}
	for _, p := range s.Partitions {
		b[TopicPartition{p.Topic, p.Partition}] = max(p.Committed, 0)
	}
	return b
}

// Measure computes the progress of cur since base; prev (nil: none) gives the rate.
func Measure(base Base, prev *GroupStatus, cur GroupStatus) Progress {
	var pr Progress
	for _, p := range cur.Partitions {
		pr.Lag += p.Lag
		b, ok := base[TopicPartition{p.Topic, p.Partition}]
		if !ok {
			continue
		}
		if done := max(p.Committed, 0) - b; done > 0 {
			pr.Done += done
		}
	}
	pr.Total = pr.Done + pr.Lag
	if prev != nil {
		dt := cur.Time.Sub(prev.Time).Seconds()
		var moved int64
		old := map[TopicPartition]int64{}
		for _, p := range prev.Partitions {
			old[TopicPartition{p.Topic, p.Partition}] = max(p.Committed, 0)
		}
		for _, p := range cur.Partitions {
			if o, ok := old[TopicPartition{p.Topic, p.Partition}]; ok && p.Committed > o {
				moved += p.Committed - o
			}
		}
		if dt > 0 {
			pr.Rate = float64(moved) / dt
		}
	}
	if pr.Rate > 0 {
		pr.ETA = time.Duration(float64(pr.Lag) / pr.Rate * float64(time.Second))
	}
	return pr
}
