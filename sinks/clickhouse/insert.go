package clickhouse

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/backflowhq/backflow/internal/rollup"
	"github.com/backflowhq/backflow/sinks"
)

// inserter lands one flush's batches for its mapping: each through the writer, with outages
// retried (fetching paused, see retrier.Retry) and, when the sink has a DLQ, a batch rejected
// for its data narrowed down to its rows at fault. Safe for concurrent use: the built-in
// tables are inserted at once.
type inserter struct {
	w     sinks.BatchWriter[Batch]
	stmts rollup.Conn // the Sink's statements; nil without
	r     *retrier
	log   *slog.Logger
	// reject: a row ClickHouse rejects goes to the DLQ; false (the DLQ mirror, which has no
	// DLQ of its own), a rejected batch stops the sink.
	reject bool
	// retries counts the flush's retries (Flush.Attempts - 1).
	retries atomic.Int64
}

var _ Lander = (*inserter)(nil)

// Retry runs op with the sink's retries, counted in the flush's.
func (in *inserter) Retry(ctx context.Context, what string, retryable func(error) bool, op func(context.Context) error) error {
	return in.r.Retry(ctx, what, &in.retries, retryable, op)
}

func (in *inserter) Statements() rollup.Conn { return in.stmts }

// Insert inserts b, retrying what the writer calls retryable. Row i of b belongs to the
// flush's record owners[i]; owners nil means b belongs to no record (the ledger), and a
// rejection stops the sink. When ClickHouse rejects the batch for its data, each half is
// inserted on its own, down to single rows, and the owner of each row rejected alone is
// recorded in rejects (with k bad rows among n this costs about 2·k·log2(n) inserts).
func (in *inserter) Insert(ctx context.Context, b Batch, owners []int, rejects map[int]error) error {
	if b.Len() == 0 {
		return nil
	}
	var retries atomic.Int64
	err := in.r.Retry(ctx, "insert "+b.Table(), &retries, in.w.Retryable, func(ctx context.Context) error {
		return in.w.WriteBatch(ctx, b)
	})
	in.retries.Add(retries.Load())
	switch {
	case err == nil:
		return nil
	case !IsRejected(err):
		return fmt.Errorf("clickhouse sink: insert %s: %w", b.Table(), err)
	case owners == nil || !in.reject:
		return fmt.Errorf("%w: insert %s: %w", ErrClickHouseFatal, b.Table(), err)
	case b.Len() == 1:
		rejects[owners[0]] = err
		return nil
	}
	if retries.Load() == 0 {
		in.log.Warn("clickhouse sink: batch rejected, bisecting to find the bad records", "table", b.Table(), "rows", b.Len(), "err", err)
	}
	mid := b.Len() / 2
	if err := in.Insert(ctx, b.Slice(0, mid), owners[:mid], rejects); err != nil {
		return err
	}
	return in.Insert(ctx, b.Slice(mid, b.Len()), owners[mid:], rejects)
}

// InsertAll inserts the batches at once, each on a connection of its own: a flush takes as
// long as its slowest insert, and every row of it is stamped landed at about its start. It
// returns the rows rejected (a record whose rows are rejected in two tables keeps the later
// table's error) and the first error in the order of batches.
func (in *inserter) InsertAll(ctx context.Context, batches ...Owned) (map[int]error, error) {
	var wg sync.WaitGroup
	errs, rejects := make([]error, len(batches)), make([]map[int]error, len(batches))
	for i, o := range batches {
		rejects[i] = map[int]error{}
		wg.Go(func() { errs[i] = in.Insert(ctx, o.Batch, o.Owners, rejects[i]) })
	}
	wg.Wait()
	out := map[int]error{}
	for i := range batches {
		if errs[i] != nil {
			return nil, errs[i]
		}
		maps.Copy(out, rejects[i])
	}
	return out, nil
}
