// Package control is backflow's control topic (default backflow.control, compacted, one
// partition): where ingest keeps each group's replay epoch (key "epoch/<group>") and where every
// executed replay is recorded (keys "replay/<group>/<id>", pipelines/replay). Scan reads it to
// its end; ReadEpoch and WriteEpoch are the epoch's two sides.
package control

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/internal/retry"
)

// DefaultTopic is the control topic's default name.
const DefaultTopic = "backflow.control"

// ErrNoTopic: the control topic does not exist (no ingest has started with it, no replay was
// recorded in it). Scan returns it only when told not to wait.
var ErrNoTopic = errors.New("control: topic does not exist")

// Scan reads topic from its start to its end as of the call and calls fn with each record, in
// offset order per partition. Retriable broker errors (a topic created a moment ago may have no
// leader yet) are retried until ctx ends; a topic that does not exist is waited for too when
// wait is set, and is ErrNoTopic at once otherwise.
func Scan(ctx context.Context, cl *kgo.Client, topic string, wait bool, fn func(*kgo.Record)) error {
	adm := kadm.NewClient(cl)
	var ends kadm.ListedOffsets
	retryable := func(err error) bool {
		return kerr.IsRetriable(err) && (wait || !errors.Is(err, kerr.UnknownTopicOrPartition))
	}
	err := retry.Do(ctx, retry.Policy{Min: 50 * time.Millisecond, Max: 2 * time.Second}, retryable, nil, func() error {
		var err error
		if ends, err = adm.ListEndOffsets(ctx, topic); err == nil {
			err = ends.Error()
		}
		return err
	})
	if errors.Is(err, kerr.UnknownTopicOrPartition) && !wait {
		return fmt.Errorf("%w: %s", ErrNoTopic, topic)
	}
	if err != nil {
		return fmt.Errorf("control: topic %s: %w", topic, err)
	}
	want := map[int32]int64{}
	offsets := map[string]map[int32]kgo.Offset{topic: {}}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
			offsets[topic][o.Partition] = kgo.NewOffset().AtStart()
		}
	})
	if len(want) == 0 {
		return nil
	}
	rd, err := kgo.NewClient(append(cl.Opts(), kgo.ConsumePartitions(offsets), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		return err
	}
	defer rd.Close()
	for len(want) > 0 {
		fs := rd.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("control: reading %s: %w", topic, err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return fmt.Errorf("control: reading %s: %w", topic, ferr)
		}
		fs.EachRecord(func(r *kgo.Record) {
			fn(r)
			if r.Offset+1 >= want[r.Partition] {
				delete(want, r.Partition)
			}
		})
	}
	return nil
}
