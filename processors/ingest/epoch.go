package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/internal/retry"
)

// The control topic is compacted; ingest's replay epoch lives under key "epoch/<group>" as
// JSON {"epoch":N,"time":"...","by":"..."}. A claim made in an older epoch does not count as
// seen, so a replay with a new epoch re-processes records instead of dropping them.
func epochKey(group string) string { return "epoch/" + group }

// EpochRecord is the value stored under the epoch key.
type EpochRecord struct {
	Epoch int32     `json:"epoch"`
	Time  time.Time `json:"time"`
	By    string    `json:"by,omitempty"`
}

// ReadEpoch reads the control topic to its end and returns group's latest epoch (0 if none).
// A topic created a moment ago may not have a leader yet: retriable broker errors are retried
// until ctx ends.
func ReadEpoch(ctx context.Context, cl *kgo.Client, topic, group string) (int32, error) {
	adm := kadm.NewClient(cl)
	var ends kadm.ListedOffsets
	err := retry.Do(ctx, retry.Policy{Min: 50 * time.Millisecond, Max: 2 * time.Second}, kerr.IsRetriable, nil, func() error {
		var err error
		if ends, err = adm.ListEndOffsets(ctx, topic); err == nil {
			err = ends.Error()
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("ingest: control topic %s: %w", topic, err)
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
		return 0, nil
	}
	rd, err := kgo.NewClient(append(cl.Opts(), kgo.ConsumePartitions(offsets), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		return 0, err
	}
	defer rd.Close()
	var epoch int32
	key := epochKey(group)
	for len(want) > 0 {
		fs := rd.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("ingest: reading control topic %s: %w", topic, err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return 0, fmt.Errorf("ingest: reading control topic %s: %w", topic, ferr)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Key) == key {
				if r.Value == nil {
					epoch = 0
				} else {
					var er EpochRecord
					if json.Unmarshal(r.Value, &er) == nil {
						epoch = er.Epoch
					}
				}
			}
			if r.Offset+1 >= want[r.Partition] {
				delete(want, r.Partition)
			}
		})
	}
	return epoch, nil
}

// WriteEpoch sets group's epoch (the replay command uses it). The record is acknowledged by
// all in-sync replicas before it returns.
func WriteEpoch(ctx context.Context, cl *kgo.Client, topic, group string, er EpochRecord) error {
	if er.Epoch < 0 {
		return errors.New("ingest: epoch must not be negative")
	}
	v, err := json.Marshal(er)
	if err != nil {
		return err
	}
	return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(epochKey(group)), Value: v}).FirstErr()
}
