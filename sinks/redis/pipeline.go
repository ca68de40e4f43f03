package redis

import (
	"context"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/backflowhq/backflow/sinks"
)

// Write is one key's HSET (and EXPIRE when TTL > 0) in a pipeline: what a batch of feature
// rows becomes once coalesced, one per key.
type Write struct {
	Key  string
	Args []any // field, value, field, value, …
	TTL  time.Duration
}

// Pipeline is the Redis side of the feature sink (sinks.BatchWriter): it sends a batch of
// writes as one pipeline. The Writer calls it from its one goroutine and retries it.
type Pipeline struct {
	rdb goredis.Cmdable
}

var _ sinks.BatchWriter[[]Write] = (*Pipeline)(nil)

// NewPipeline returns the batch writer over rdb.
func NewPipeline(rdb goredis.Cmdable) *Pipeline { return &Pipeline{rdb: rdb} }

// WriteBatch sends the writes in one pipeline, once. HSET and EXPIRE are idempotent: sending a
// partly applied pipeline again converges to the same hashes.
func (p *Pipeline) WriteBatch(ctx context.Context, writes []Write) error {
	pipe := p.rdb.Pipeline()
	for _, w := range writes {
		pipe.HSet(ctx, w.Key, w.Args...)
		if w.TTL > 0 {
			pipe.Expire(ctx, w.Key, w.TTL)
		}
	}
	_, err := pipe.Exec(ctx)
	return err
}

// Retryable implements sinks.BatchWriter: every failure of a write is retried (errors.go says
// why, beside the other Redis errors' rules).
func (p *Pipeline) Retryable(err error) bool { return err != nil }

// Close implements sinks.BatchWriter. The client belongs to whoever opened it (Open), who
// closes it: the pipeline holds nothing of its own.
func (p *Pipeline) Close() error { return nil }
