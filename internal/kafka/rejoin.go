package kafka

import (
	"context"
	"time"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"

	"github.com/backflowhq/backflow/internal/retry"
)

// rejoinQuick is the shortest generation after which a goka stage rejoins its group at once.
// A generation that ended sooner (a group that cannot settle, a partition that fails its
// set-up) is followed by a wait of rejoinBackoff before the next join, so that such a group is
// not rejoined in a tight loop.
const rejoinQuick = time.Second

// rejoinBackoff is the wait after a generation shorter than rejoinQuick: 100 ms doubling, at
// most 5 s (the wait goka itself puts after every generation).
var rejoinBackoff = retry.Policy{Min: 100 * time.Millisecond, Max: 5 * time.Second}

// rejoiningGroup is a sarama consumer group whose Consume joins the group again as soon as a
// generation ends: the loop sarama documents for Consume.
//
// goka 1.1.14 calls Consume in a loop of its own, but waits a fixed 5 s after each generation
// before it calls Consume again (Processor.rebalanceLoop), and the wait cannot be configured.
// Every rebalance, a failover's included, thus left every member of the group without
// partitions for 5 s more than the rebalance took. With rejoiningGroup, Consume returns only
// when ctx ends or sarama fails (a closed group, a broker error it cannot recover from), so
// goka's wait is reached only on the way out. What goka does between two generations (Cleanup,
// then Setup with the next assignment) is sarama's to call, and is unchanged.
type rejoiningGroup struct {
	sarama.ConsumerGroup
	policy retry.Policy
	quick  time.Duration
}

// Consume joins the group and consumes until ctx ends or sarama returns an error, rejoining
// after every generation.
func (g rejoiningGroup) Consume(ctx context.Context, topics []string, handler sarama.ConsumerGroupHandler) error {
	wait := g.policy.Backoff()
	for {
		began := time.Now()
		if err := g.ConsumerGroup.Consume(ctx, topics, handler); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
		if d := g.pause(time.Since(began), wait); d > 0 && !retry.Sleep(ctx, d) {
			return nil
		}
	}
}

// pause is the wait before the next join after a generation that lasted lasted: none after
// one of at least g.quick (and the backoff starts again), else wait's next.
func (g rejoiningGroup) pause(lasted time.Duration, wait *retry.Backoff) time.Duration {
	if lasted >= g.quick {
		wait.Reset()
		return 0
	}
	return wait.Next()
}

// rejoining wraps a goka consumer-group builder so that its groups rejoin at once.
func rejoining(inner goka.ConsumerGroupBuilder) goka.ConsumerGroupBuilder {
	return func(brokers []string, group, clientID string) (sarama.ConsumerGroup, error) {
		cg, err := inner(brokers, group, clientID)
		if err != nil {
			return nil, err
		}
		return rejoiningGroup{ConsumerGroup: cg, policy: rejoinBackoff, quick: rejoinQuick}, nil
	}
}
