package dlq

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/internal/kafka"
)

// idleCheck is how long Scan waits for records before it checks whether retention deleted
// the rest of a partition's snapshot.
const idleCheck = 2 * time.Second

// Scan reads topic from the start of each partition up to the end offset (high watermark) the
// partition had when Scan was called, and calls fn for every record, partition by partition in
// ascending order, offsets in order. It is a snapshot: records written later are not read, so
// Scan returns on an empty topic too. A topic that does not exist is ErrNoTopic. Scan stops at
// the first error of fn, of the cluster, or of ctx, which bounds the whole read.
func Scan(ctx context.Context, cfg kafka.Conn, topic string, fn func(*kgo.Record) error) error {
	cl, err := cfg.NewClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if err := topicExists(ctx, adm, topic); err != nil {
		return err
	}
	starts, err := listOffsets(ctx, adm.ListStartOffsets, topic)
	if err != nil {
		return err
	}
	ends, err := listOffsets(ctx, adm.ListEndOffsets, topic)
	if err != nil {
		return err
	}
	parts := make([]int32, 0, len(ends))
	for p := range ends {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	for _, p := range parts {
		if starts[p] >= ends[p] {
			continue
		}
		if err := scanPartition(ctx, cfg, adm, topic, p, starts[p], ends[p], fn); err != nil {
			return err
		}
	}
	return nil
}

// scanPartition calls fn for the records of topic/p in [from, to).
func scanPartition(ctx context.Context, cfg kafka.Conn, adm *kadm.Client, topic string, p int32, from, to int64, fn func(*kgo.Record) error) error {
	cl, err := cfg.NewClient(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().At(from)}}),
		kgo.KeepControlRecords(), // transaction markers advance the position too; skipped below
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	next := from
	for next < to {
		pollCtx, cancel := context.WithTimeout(ctx, idleCheck)
		fs := cl.PollFetches(pollCtx)
		cancel()
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("dlq: read %s partition %d: at offset %d of %d: %w", topic, p, next, to, err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) {
			var loss *kgo.ErrDataLoss
			if ferr == nil && !errors.As(err, &loss) && !errors.Is(err, context.DeadlineExceeded) {
				ferr = err
			}
		})
		if ferr != nil {
			return fmt.Errorf("dlq: read %s partition %d: %w", topic, p, ferr)
		}
		got := false
		for it := fs.RecordIter(); !it.Done() && next < to; {
			r := it.Next()
			got = true
			if r.Offset >= to {
				next = to
				break
			}
			next = r.Offset + 1
			if r.Attrs.IsControl() {
				continue
			}
			if err := fn(r); err != nil {
				return err
			}
		}
		if !got {
			// Nothing came: retention may have deleted what is left of the snapshot.
			starts, err := listOffsets(ctx, adm.ListStartOffsets, topic)
			if err != nil {
				return err
			}
			if starts[p] >= to {
				return nil
			}
		}
	}
	return nil
}

// Follow calls fn for every record written to topic after Follow starts: it takes each
// partition's end offset first, calls ready (when not nil) with them, then reads on from there
// until ctx ends, and then returns nil. Partitions added later are not followed. A topic that
// does not exist is ErrNoTopic. Follow returns the first error of fn or of the cluster. While
// the cluster is unreachable it keeps trying, like every franz-go consumer.
func Follow(ctx context.Context, cfg kafka.Conn, topic string, ready func(ends map[int32]int64), fn func(*kgo.Record) error) error {
	adminCl, err := cfg.NewClient()
	if err != nil {
		return err
	}
	adm := kadm.NewClient(adminCl)
	err = topicExists(ctx, adm, topic)
	var ends map[int32]int64
	if err == nil {
		ends, err = listOffsets(ctx, adm.ListEndOffsets, topic)
	}
	adminCl.Close()
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	at := map[int32]kgo.Offset{}
	for p, end := range ends {
		at[p] = kgo.NewOffset().At(end)
	}
	cl, err := cfg.NewClient(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: at}))
	if err != nil {
		return err
	}
	defer cl.Close()
	if ready != nil {
		ready(ends)
	}
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) {
			var loss *kgo.ErrDataLoss
			if ferr == nil && !errors.As(err, &loss) {
				ferr = err
			}
		})
		if ferr != nil {
			return fmt.Errorf("dlq: follow %s: %w", topic, ferr)
		}
		for it := fs.RecordIter(); !it.Done(); {
			if err := fn(it.Next()); err != nil {
				return err
			}
		}
	}
}

// topicExists asks the cluster's metadata for topic; a missing one is ErrNoTopic.
func topicExists(ctx context.Context, adm *kadm.Client, topic string) error {
	tds, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return fmt.Errorf("dlq: metadata for %s: %w", topic, err)
	}
	td, ok := tds[topic]
	switch {
	case !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition):
		return fmt.Errorf("%w: %s", ErrNoTopic, topic)
	case td.Err != nil:
		return fmt.Errorf("dlq: metadata for %s: %w", topic, td.Err)
	}
	return nil
}

// listOffsets returns topic's offsets per partition from list (ListStartOffsets or
// ListEndOffsets), failing if any partition could not be listed.
func listOffsets(ctx context.Context, list func(context.Context, ...string) (kadm.ListedOffsets, error), topic string) (map[int32]int64, error) {
	lo, err := list(ctx, topic)
	if err == nil {
		err = lo.Error()
	}
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		return nil, fmt.Errorf("%w: %s", ErrNoTopic, topic)
	}
	if err != nil {
		return nil, fmt.Errorf("dlq: list offsets of %s: %w", topic, err)
	}
	out := map[int32]int64{}
	for p, o := range lo[topic] {
		out[p] = o.Offset
	}
	return out, nil
}
