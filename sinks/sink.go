// Package sinks is the contract between a sink stage and the external system it writes to:
// BatchWriter, which clickhouse.Writer and redis.Pipeline implement and which the stages call
// (clickhouse.Sink's inserts, redis.Writer's pipelines). The stage owns consuming, buffering,
// retrying and committing; the writer owns one attempt at one batch.
package sinks

import "context"

// BatchWriter writes batches to one external system, one attempt at a time.
//
// Lifecycle, and who calls what:
//   - The stage builds the writer (building touches no network) and calls WriteBatch from one
//     goroutine at a time, with a batch taken from its bounded buffer. WriteBatch is not
//     called concurrently unless the implementation says it may be.
//   - WriteBatch makes one attempt and does not retry. It returns nil once every row of the
//     batch is durably written: only then may the stage commit the offsets of the records the
//     batch holds.
//   - On an error the stage asks Retryable. True (the system is down, overloaded, timed out,
//     refused a rotated credential): the stage retries the same batch with backoff
//     (internal/retry), pausing consumption, and never dead-letters for it. False: the system
//     refused the batch for good; the stage dead-letters the records it cannot write, once,
//     narrowing down to the rows at fault where it can, and goes on.
//   - Writing the same batch again converges to the same state: rows collapse by request id,
//     hashes are overwritten. A lost reply followed by a retry never doubles a row.
//   - Close is called once, after the last WriteBatch returned, and releases connections.
type BatchWriter[B any] interface {
	WriteBatch(ctx context.Context, batch B) error
	Retryable(err error) bool
	Close() error
}
