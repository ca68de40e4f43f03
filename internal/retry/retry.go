package retry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// Policy is how a failed call is retried. The zero Policy is the default one.
type Policy struct {
	// Min is the shortest wait, and the first wait before jitter. Default 100ms.
	Min time.Duration
	// Max caps every wait: the waits double from Min up to Max. Default 30s; a Max below
	// Min is taken as Min (every wait is then Min: a constant poll).
	Max time.Duration
	// Jitter randomizes each wait by up to ±Jitter of it, then keeps it within [Min, Max],
	// so that callers failing together do not retry together. Default (0) 0.5; at most 1.
	Jitter float64
	// Attempts is the most calls Do makes of its function. Default 0: no limit, retry until
	// ctx ends (what an outage needs).
	Attempts int
}

// Defaults of Policy.
const (
	DefaultMin    = 100 * time.Millisecond
	DefaultMax    = 30 * time.Second
	DefaultJitter = 0.5
)

// WithDefaults returns p with its zero fields set to their defaults.
func (p Policy) WithDefaults() Policy {
	if p.Min <= 0 {
		p.Min = DefaultMin
	}
	if p.Max <= 0 {
		p.Max = DefaultMax
	}
	p.Max = max(p.Max, p.Min)
	if p.Jitter <= 0 {
		p.Jitter = DefaultJitter
	}
	p.Jitter = min(p.Jitter, 1)
	p.Attempts = max(p.Attempts, 0)
	return p
}

// Do calls fn until it returns nil, an error retryable rejects (nil retryable: every error is
// retryable), p.Attempts calls were made, or ctx ends. Between calls it waits the policy's next
// wait, first telling onRetry (may be nil) the error, the number of the call that failed
// (from 1) and the wait. It returns nil; or fn's last error, as is when retryable rejected it
// or the attempts ran out; or, when ctx ended first, ctx's error wrapping fn's last error
// (errors.Is matches both).
//
// The first call is made before any of the retry machinery is set up: Do is on the path of
// every record in the processors (a decode that may meet a registry outage, a moderation
// call), where nearly every first call succeeds.
func Do(ctx context.Context, p Policy, retryable func(error) bool, onRetry func(err error, attempt int, wait time.Duration), fn func() error) error {
	err := fn()
	if err == nil || (retryable != nil && !retryable(err)) || p.Attempts == 1 {
		return err
	}
	return retryAfter(ctx, p, retryable, onRetry, fn, err)
}

// retryAfter is Do after a first call failed with first, an error worth retrying.
func retryAfter(ctx context.Context, p Policy, retryable func(error) bool, onRetry func(err error, attempt int, wait time.Duration), fn func() error, first error) error {
	p = p.WithDefaults()
	var (
		last      error
		attempt   int
		permanent bool
	)
	op := func() (struct{}, error) {
		attempt++
		if attempt == 1 {
			last = first // the call Do made
		} else {
			last = fn()
		}
		if last != nil && retryable != nil && !retryable(last) {
			permanent = true
			return struct{}{}, backoff.Permanent(last)
		}
		return struct{}{}, last
	}
	opts := []backoff.RetryOption{
		backoff.WithBackOff(libBackOff{p.Backoff()}),
		backoff.WithMaxElapsedTime(0), // the library's default gives up after 15 minutes
		backoff.WithMaxTries(uint(p.Attempts)),
	}
	if onRetry != nil {
		opts = append(opts, backoff.WithNotify(func(err error, wait time.Duration) { onRetry(err, attempt, wait) }))
	}
	if _, err := backoff.Retry(ctx, op, opts...); err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil && !permanent && !(p.Attempts > 0 && attempt >= p.Attempts) {
		if errors.Is(last, cerr) {
			return last
		}
		return fmt.Errorf("%w after %d attempts: %w", cerr, attempt, last)
	}
	return last
}

// Backoff yields a policy's waits one after another, for a loop that cannot be one call of
// Do (a produce retried from its callback, a loop with decisions of its own between
// attempts). It is not safe for concurrent use.
type Backoff struct {
	p   Policy
	exp backoff.ExponentialBackOff
}

// Backoff returns a Backoff at its first wait.
func (p Policy) Backoff() *Backoff {
	p = p.WithDefaults()
	b := &Backoff{p: p, exp: backoff.ExponentialBackOff{InitialInterval: p.Min, MaxInterval: p.Max, Multiplier: 2, RandomizationFactor: p.Jitter}}
	b.Reset()
	return b
}

// Next returns the next wait: Min·2ⁿ capped at Max, randomized by ±Jitter, within [Min, Max].
func (b *Backoff) Next() time.Duration {
	return min(max(b.exp.NextBackOff(), b.p.Min), b.p.Max)
}

// Reset starts the waits again from the first.
func (b *Backoff) Reset() { b.exp.Reset() }

// Wait sleeps the next wait; false (at once, or as soon as it ends) when ctx ended first.
func (b *Backoff) Wait(ctx context.Context) bool {
	if ctx.Err() != nil {
		return false
	}
	return Sleep(ctx, b.Next())
}

// Sleep sleeps d; false as soon as ctx ends first.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// libBackOff is a Backoff as the library's BackOff.
type libBackOff struct{ b *Backoff }

func (l libBackOff) NextBackOff() time.Duration { return l.b.Next() }
func (l libBackOff) Reset()                     { l.b.Reset() }
