package control

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A group's replay epoch lives under key "epoch/<group>" as JSON {"epoch":N,"time":"...",
// "by":"..."}. A dedupe claim made in an older epoch does not count as seen, so a replay with a
// new epoch re-processes records instead of dropping them (processors/ingest reads it at
// start-up; pipelines/replay bumps it).
func epochKey(group string) string { return "epoch/" + group }

// EpochRecord is the value stored under the epoch key.
type EpochRecord struct {
	Epoch int32     `json:"epoch"`
	Time  time.Time `json:"time"`
	By    string    `json:"by,omitempty"`
}

// ReadEpoch reads the control topic to its end and returns group's latest epoch (0 if none).
// A topic created a moment ago may not have a leader yet, or not be known to every broker:
// that is waited for until ctx ends.
func ReadEpoch(ctx context.Context, cl *kgo.Client, topic, group string) (int32, error) {
	var epoch int32
	key := epochKey(group)
	err := Scan(ctx, cl, topic, true, func(r *kgo.Record) {
		if string(r.Key) != key {
			return
		}
		if r.Value == nil {
			epoch = 0
			return
		}
		var er EpochRecord
		if json.Unmarshal(r.Value, &er) == nil {
			epoch = er.Epoch
		}
	})
	return epoch, err
}

// WriteEpoch sets group's epoch. The record is acknowledged by all in-sync replicas before it
// returns.
func WriteEpoch(ctx context.Context, cl *kgo.Client, topic, group string, er EpochRecord) error {
	if er.Epoch < 0 {
		return errors.New("control: epoch must not be negative")
	}
	v, err := json.Marshal(er)
	if err != nil {
		return err
	}
	return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(epochKey(group)), Value: v}).FirstErr()
}
