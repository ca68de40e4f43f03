package clickhouse

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/backflowhq/backflow/internal/dlq"
	"github.com/backflowhq/backflow/internal/retry"
)

// retrier is how a Sink and its mapping wait out an outage: retry.Do with the sink's backoff
// (BackoffMin doubling up to BackoffMax, jittered), every retry logged and counted in
// Stats.Retries. The sink lends it to its mapping, which needs no more of the sink than this.
type retrier struct {
	policy  retry.Policy
	log     *slog.Logger
	retries *atomic.Int64 // Stats.Retries
	metrics *metrics
	pause   func() // stops fetching until the flush under way ends
}

// Await runs op until it succeeds, fails with an error retryable refuses, or ctx ends, for
// what (the registry, clickhouse) is unavailable. The caller holds up polling meanwhile:
// Map waiting for the registry, Run connecting.
func (r *retrier) Await(ctx context.Context, what string, retryable func(error) bool, op func() error) error {
	return retry.Do(ctx, r.policy, retryable, func(err error, attempt int, _ time.Duration) {
		r.retries.Add(1)
		r.log.Warn("clickhouse sink: "+what+" unavailable, retrying", "attempt", attempt, "err", err)
	}, op)
}

// Retry runs op like Await, with fetching paused while it retries, so nothing piles up in
// memory; each retry also counts in attempts (a flush's), each failed attempt in the
// sink-error metric (a DLQ write in its own).
func (r *retrier) Retry(ctx context.Context, what string, attempts *atomic.Int64, retryable func(error) bool, op func(context.Context) error) error {
	return retry.Do(ctx, r.policy, retryable, func(err error, attempt int, _ time.Duration) {
		if attempts != nil {
			attempts.Add(1)
		}
		r.retries.Add(1)
		r.pause()
		if what == opDLQWrite {
			r.metrics.st().DLQWriteError()
		}
		r.log.Warn("clickhouse sink: retrying", "op", what, "attempt", attempt, "err", err)
	}, func() error {
		err := op(ctx)
		if err != nil && ctx.Err() == nil {
			r.metrics.st().SinkError(errorClass(err))
		}
		return err
	})
}

// opDLQWrite names the DLQ write among the retried operations.
const opDLQWrite = "dlq write"

// isKafkaRetryable: a DLQ write or commit failure is an outage of Kafka (or a rebalance in
// progress); it is retried unless the sink is stopping.
func isKafkaRetryable(err error) bool {
	return !errors.Is(err, context.Canceled) && !errors.Is(err, dlq.ErrUnsafeClient) && !errors.Is(err, dlq.ErrInvalidEntry) &&
		!errors.Is(err, dlq.ErrTooLarge)
}
