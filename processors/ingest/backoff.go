package ingest

import (
	"context"
	"math/rand/v2"
	"time"
)

// backoff is exponential backoff with full jitter between min and max.
type backoff struct {
	min, max time.Duration
	attempt  int
}

// wait sleeps before the next attempt; false when ctx ended first.
func (b *backoff) wait(ctx context.Context) bool {
	d := b.min << min(b.attempt, 20)
	if d > b.max || d <= 0 {
		d = b.max
	}
	b.attempt++
	t := time.NewTimer(time.Duration(rand.Int64N(int64(d)) + 1))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// retry calls fn until it succeeds, fails with a permanent error (retryable says), or ctx
// ends; onRetry is told about each retryable failure.
func retry(ctx context.Context, b backoff, retryable func(error) bool, onRetry func(error), fn func() error) error {
	for {
		err := fn()
		if err == nil || !retryable(err) {
			return err
		}
		if onRetry != nil {
			onRetry(err)
		}
		if !b.wait(ctx) {
			return ctx.Err()
		}
	}
}
