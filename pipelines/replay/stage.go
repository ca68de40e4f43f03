package replay

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// checkStage refuses a stage step on a group of another stage, up front and naming which
// groups the step is for, from what the group reads:
//   - --new-epoch is ingest's: a group that has committed offsets on the enriched topic is a
//     sink (sink-clickhouse, its DLQ mirror or sink-features), whose state has no epoch;
//   - --reset-state is sink-features': the group must read the enriched topic and have the
//     loopback topic <group>-loop its aggregates travel through (sink-clickhouse's group has
//     none).
//
// A group that has committed nothing yet is not refused: there is nothing to tell it by.
func checkStage(ctx context.Context, cl *kgo.Client, group string, o Options) error {
	if !o.NewEpoch && !o.ResetState {
		return nil
	}
	adm := kadm.NewClient(cl)
	var committed kadm.OffsetResponses
	if err := retriable(ctx, func() error {
		var err error
		committed, err = adm.FetchOffsets(ctx, group)
		if err == nil {
			err = committed.Error()
		}
		return err
	}); err != nil {
		return fmt.Errorf("replay: offsets of group %s: %w", group, err)
	}
	var topics []string
	committed.Each(func(r kadm.OffsetResponse) {
		if r.At >= 0 && !slices.Contains(topics, r.Topic) {
			topics = append(topics, r.Topic)
		}
	})
	if len(topics) == 0 {
		return nil
	}
	readsEnriched := slices.Contains(topics, o.EnrichedTopic)
	if o.NewEpoch && readsEnriched {
		return badRequest("--new-epoch is for ingest groups (they read the source topics and keep a replay epoch); %s reads %s: it is a sink group, whose rows collapse on a replay without an epoch", group, o.EnrichedTopic)
	}
	if o.ResetState {
		loop := LoopTopic(group)
		var td kadm.TopicDetails
		if err := retriable(ctx, func() error {
			var err error
			td, err = adm.ListTopics(ctx, loop)
			return err
		}); err != nil {
			return fmt.Errorf("replay: look for %s: %w", loop, err)
		}
		d, ok := td[loop]
		if !readsEnriched || !ok || d.Err != nil {
			return badRequest("--reset-state is for sink-features groups (they read %s and have a loopback topic <group>-loop); %s reads %v and has no %s", o.EnrichedTopic, group, topics, loop)
		}
	}
	return nil
}
