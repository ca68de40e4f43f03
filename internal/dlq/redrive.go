package dlq

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/internal/kafka"
)

// Redrive returns the record that re-drives e (an entry from Decode) to its origin: the raw
// key, value and original headers, to e.Origin.Topic and e.Origin.Partition, with
// backflow.redrive.from, .time (now) and .count (previous + 1, or 1) replacing any earlier
// backflow.redrive.* headers, and without backflow.origin.* or backflow.error.*. The
// timestamp is left zero: the producer stamps the time of the re-drive.
//
// Produce it with kgo.ManualPartitioner so the key lands on the partition it was first
// written to (goka group tables are co-partitioned with their input), through an idempotent
// producer with acks=all. An entry whose value was truncated is ErrTruncated; one without a
// DLQ position or origin is ErrInvalidEntry; an unparsable count is ErrBadHeader.
func Redrive(e Entry, now time.Time) (*kgo.Record, error) {
	o := e.Origin
	switch {
	case e.TruncatedFrom > 0:
		return nil, fmt.Errorf("%w (%d of %d bytes kept): re-produce %s/%d/%d from its origin",
			ErrTruncated, len(o.Value), e.TruncatedFrom, o.Topic, o.Partition, o.Offset)
	case e.DLQTopic == "":
		return nil, fmt.Errorf("%w: no DLQ position (decode the entry from its DLQ record)", ErrInvalidEntry)
	case o.Topic == "" || o.Partition < 0:
		return nil, fmt.Errorf("%w: origin %q partition %d", ErrInvalidEntry, o.Topic, o.Partition)
	}
	count := 0
	headers := make([]kgo.RecordHeader, 0, len(o.Headers)+3)
	for _, h := range o.Headers {
		switch {
		case staleHeader(h.Key):
		case h.Key == HeaderRedriveCount:
			n, err := strconv.Atoi(string(h.Value))
			if err != nil || n < 0 {
				return nil, fmt.Errorf("%w %s: %q is not a count", ErrBadHeader, h.Key, h.Value)
			}
			count = n
		case strings.HasPrefix(h.Key, prefixRedrive):
		default:
			headers = append(headers, h)
		}
	}
	str := func(k, v string) kgo.RecordHeader { return kgo.RecordHeader{Key: k, Value: []byte(v)} }
	headers = append(headers,
		str(HeaderRedriveFrom, fmt.Sprintf("%s/%d/%d", e.DLQTopic, e.DLQPartition, e.DLQOffset)),
		str(HeaderRedriveTime, now.UTC().Format(TimeLayout)),
		str(HeaderRedriveCount, strconv.Itoa(count+1)),
	)
	return &kgo.Record{Topic: o.Topic, Partition: o.Partition, Key: o.Key, Value: o.Value, Headers: headers}, nil
}

// Pos is a DLQ entry's position: its partition and offset in the DLQ topic.
type Pos struct {
	Partition int32
	Offset    int64
}

func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.Partition, p.Offset) }

// Selection is which entries of the DLQ a re-drive takes: exactly one of Positions, Class and
// All, narrowed by OriginTopic when set.
type Selection struct {
	Positions   map[Pos]bool
	Class       string
	All         bool
	OriginTopic string
}

// RedrivePlan is what a re-drive would produce: Records[i] re-drives From[i], in origin order.
type RedrivePlan struct {
	Topic   string
	Records []*kgo.Record
	From    []Entry
	// Collapsed counts selected entries left out because another entry holds the same origin
	// record (the same bad record written twice, by a retried DLQ write): it is re-driven once.
	Collapsed int
	// Problems are entries selected but not re-drivable (truncated value, origin gone, a
	// position that is not an entry), one line each, sorted.
	Problems []string
}

// PlanRedrive reads a snapshot of the DLQ topic and returns what re-driving sel would produce
// at now. It produces nothing.
func PlanRedrive(ctx context.Context, cfg kafka.Conn, topic string, sel Selection, now time.Time) (*RedrivePlan, error) {
	p := &RedrivePlan{Topic: topic}
	var selected []Entry
	found := map[Pos]bool{}
	err := Scan(ctx, cfg, topic, func(r *kgo.Record) error {
		pos := Pos{r.Partition, r.Offset}
		if sel.Positions != nil && !sel.Positions[pos] {
			return nil
		}
		found[pos] = true
		e, err := Decode(r)
		if err != nil {
			if sel.Positions != nil {
				p.Problems = append(p.Problems, fmt.Sprintf("--offsets %s: %s/%d/%d is not a DLQ entry: %v", pos, topic, pos.Partition, pos.Offset, err))
			}
			return nil
		}
		if (sel.Class != "" && e.Class != sel.Class) || (sel.OriginTopic != "" && e.Origin.Topic != sel.OriginTopic) {
			return nil
		}
		selected = append(selected, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	for pos := range sel.Positions {
		if !found[pos] {
			p.Problems = append(p.Problems, fmt.Sprintf("--offsets %s: no such entry in %s", pos, topic))
		}
	}
	// The same bad record written twice (a retried DLQ write) is re-driven once, and records go
	// back in their origin order.
	slices.SortFunc(selected, func(a, b Entry) int {
		return cmp.Or(strings.Compare(a.Origin.Topic, b.Origin.Topic),
			cmp.Compare(a.Origin.Partition, b.Origin.Partition), cmp.Compare(a.Origin.Offset, b.Origin.Offset),
			cmp.Compare(a.DLQPartition, b.DLQPartition), cmp.Compare(a.DLQOffset, b.DLQOffset))
	})
	n := len(selected)
	selected = slices.CompactFunc(selected, func(a, b Entry) bool {
		return a.Origin.Topic == b.Origin.Topic && a.Origin.Partition == b.Origin.Partition && a.Origin.Offset == b.Origin.Offset
	})
	p.Collapsed = n - len(selected)
	// Where each would go; skip what cannot be re-driven.
	origins, err := originPartitions(ctx, cfg, selected)
	if err != nil {
		return nil, err
	}
	for _, e := range selected {
		at := fmt.Sprintf("%s/%d/%d", e.DLQTopic, e.DLQPartition, e.DLQOffset)
		n, ok := origins[e.Origin.Topic]
		switch {
		case !ok:
			p.Problems = append(p.Problems, fmt.Sprintf("%s: origin topic %s does not exist", at, e.Origin.Topic))
			continue
		case e.Origin.Partition >= n:
			p.Problems = append(p.Problems, fmt.Sprintf("%s: origin %s has %d partition(s), not %d", at, e.Origin.Topic, n, e.Origin.Partition))
			continue
		}
		r, err := Redrive(e, now)
		if err != nil {
			p.Problems = append(p.Problems, fmt.Sprintf("%s: %v", at, err))
			continue
		}
		p.Records = append(p.Records, r)
		p.From = append(p.From, e)
	}
	slices.Sort(p.Problems)
	return p, nil
}

// Execute produces the plan's records synchronously, each to its origin partition, through an
// idempotent producer with acks=all, and returns one result per record in the plan's order
// (Err set where that record failed).
func (p *RedrivePlan) Execute(ctx context.Context, cfg kafka.Conn) ([]kgo.ProduceResult, error) {
	cl, err := cfg.NewClient(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	// Results come back in completion order, not in the order produced.
	index := make(map[*kgo.Record]int, len(p.Records))
	for i, r := range p.Records {
		index[r] = i
	}
	results := cl.ProduceSync(ctx, p.Records...)
	slices.SortFunc(results, func(a, b kgo.ProduceResult) int { return cmp.Compare(index[a.Record], index[b.Record]) })
	return results, nil
}

// originPartitions returns the partition count of every origin topic of entries that exists.
func originPartitions(ctx context.Context, cfg kafka.Conn, entries []Entry) (map[string]int32, error) {
	var topics []string
	for _, e := range entries {
		if !slices.Contains(topics, e.Origin.Topic) {
			topics = append(topics, e.Origin.Topic)
		}
	}
	out := map[string]int32{}
	if len(topics) == 0 {
		return out, nil
	}
	cl, err := cfg.NewClient()
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	tds, err := kadm.NewClient(cl).ListTopics(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("dlq: metadata for origin topics: %w", err)
	}
	for _, td := range tds {
		switch {
		case errors.Is(td.Err, kerr.UnknownTopicOrPartition):
		case td.Err != nil:
			return nil, fmt.Errorf("dlq: metadata for origin topic %s: %w", td.Topic, td.Err)
		default:
			out[td.Topic] = int32(len(td.Partitions))
		}
	}
	return out, nil
}
