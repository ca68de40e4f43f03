package ingest

import (
	"context"
	"errors"
	"sync"
)

// errShutdown is what pending commits are released with when the processor stops before
// their records finished: goka then does not commit them, and they are redelivered.
var errShutdown = errors.New("ingest: stopped before the record finished; it will be redelivered")

// commitQueue releases goka's deferred commits of one topic-partition in the order the
// records arrived, whatever order they finish in. goka commits through sarama's MarkOffset,
// which only moves forward: releasing offset 9 before offset 8 would commit past 8 while it
// is still in flight (invariant 1). A record is released once it and every record before it
// in its partition are done. The queue also bounds the records in flight: Add blocks while
// max are pending, which pauses consumption of the partition.
type commitQueue struct {
	mu      sync.Mutex
	cond    *sync.Cond
	pending []*pendingCommit
	max     int
	closed  bool
}

// pendingCommit is one record's place in its queue. Done may be called from any goroutine,
// once.
type pendingCommit struct {
	q      *commitQueue
	commit func(error)
	done   bool
}

func newCommitQueue(max int) *commitQueue {
	q := &commitQueue{max: max}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// Add appends a record whose goka commit is commit; it blocks while the queue is full. It
// returns errShutdown (after releasing commit with it) when the queue is closed or ctx ends.
func (q *commitQueue) Add(ctx context.Context, commit func(error)) (*pendingCommit, error) {
	stop := context.AfterFunc(ctx, func() {
		q.mu.Lock()
		q.cond.Broadcast()
		q.mu.Unlock()
	})
	defer stop()
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.pending) >= q.max && !q.closed && ctx.Err() == nil {
		q.cond.Wait()
	}
	if q.closed || ctx.Err() != nil {
		commit(errShutdown)
		return nil, errShutdown
	}
	p := &pendingCommit{q: q, commit: commit}
	q.pending = append(q.pending, p)
	return p, nil
}

// Done marks the record finished and releases every finished record at the head, in order.
func (p *pendingCommit) Done() {
	q := p.q
	q.mu.Lock()
	p.done = true
	var release []*pendingCommit
	for len(q.pending) > 0 && q.pending[0].done {
		release = append(release, q.pending[0])
		q.pending[0] = nil
		q.pending = q.pending[1:]
	}
	if len(release) > 0 {
		q.cond.Broadcast()
	}
	// Commit under the lock: two Done calls racing must not release out of order.
	for _, r := range release {
		r.commit(nil)
	}
	q.mu.Unlock()
}

// Len is the number of records in flight.
func (q *commitQueue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.pending)
}

// Close releases every pending record with errShutdown (goka commits none of them) and makes
// later Adds fail. Records finishing afterwards are ignored. Pending includes records that
// finished but wait behind an unfinished one: their commits were not released either, and
// goka's partition shutdown waits (60 s) for every deferred commit to be released.
func (q *commitQueue) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	q.closed = true
	for _, p := range q.pending {
		p.done = true
		p.commit(errShutdown)
	}
	q.pending = nil
	q.cond.Broadcast()
}

// commitQueues holds one queue per topic-partition.
type commitQueues struct {
	mu     sync.Mutex
	max    int
	queues map[topicPartition]*commitQueue
	closed bool
}

type topicPartition struct {
	topic     string
	partition int32
}

func newCommitQueues(max int) *commitQueues {
	return &commitQueues{max: max, queues: map[topicPartition]*commitQueue{}}
}

func (c *commitQueues) get(topic string, partition int32) *commitQueue {
	c.mu.Lock()
	defer c.mu.Unlock()
	tp := topicPartition{topic, partition}
	q, ok := c.queues[tp]
	if !ok {
		q = newCommitQueue(c.max)
		if c.closed {
			q.closed = true
		}
		c.queues[tp] = q
	}
	return q
}

// InFlight is the number of records in flight over all partitions.
func (c *commitQueues) InFlight() int {
	c.mu.Lock()
	qs := make([]*commitQueue, 0, len(c.queues))
	for _, q := range c.queues {
		qs = append(qs, q)
	}
	c.mu.Unlock()
	n := 0
	for _, q := range qs {
		n += q.Len()
	}
	return n
}

func (c *commitQueues) closeAll() {
	c.mu.Lock()
	c.closed = true
	qs := make([]*commitQueue, 0, len(c.queues))
	for _, q := range c.queues {
		qs = append(qs, q)
	}
	c.mu.Unlock()
	for _, q := range qs {
		q.Close()
	}
}
