// Package retry is backflow's one retry policy. Do calls a function again, after a wait that
// grows, while its error is retryable and the context lives; Policy says how long the waits
// are: from Min, doubling, capped at Max, each randomized by Jitter. Backoff yields the same
// waits for a loop that cannot be written as one call of Do.
//
// An outage is retried until ctx ends (Policy.Attempts 0), never turned into a dead letter
// or a drop: the caller's IsRetryable decides what is an outage. Built on
// github.com/cenkalti/backoff/v5.
package retry
