package clickhouse

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/internal/dlq"
	"github.com/backflowhq/backflow/internal/retry"
)

// A flush lands a taken batch: the mapping's rows, the dead letters, the ledger, the commit.

// flight is a flush running in the background while Run polls the next batch. One runs at a
// time, so batches land and commit in order; the next starts only after this one succeeded,
// so a failed batch is never passed by a later commit.
type flight struct {
	ended context.Context // done once the flush has ended
	err   error           // set before ended is done
}

func (f *flight) over() bool { return f.ended.Err() != nil }

// wait returns when the flush has ended or ctx has; a nil flight has ended.
func (f *flight) wait(ctx context.Context) {
	if f == nil {
		return
	}
	select {
	case <-f.ended.Done():
	case <-ctx.Done():
	}
}

// startFlush takes the buffer and lands it in the background.
func (s *Sink) startFlush(ctx context.Context) *flight {
	b := s.take()
	ended, end := context.WithCancel(context.Background())
	f := &flight{ended: ended}
	go func() {
		defer end()
		f.err = s.land(ctx, b)
	}()
	return f
}

// stopAfter waits for the flush under way (it runs on lctx, so it may take until InsertTimeout
// after the stop), then makes the final flush, unless the one under way failed: committing
// the records behind it would pass it. A sink that abandonOnStop only waits for the flush
// under way to see its cancelled ctx, and flushes nothing more.
func (s *Sink) stopAfter(lctx context.Context, fl *flight) error {
	if s.abandonOnStop {
		if fl != nil {
			<-fl.ended.Done() // it runs on the stopped ctx: it ends at once
		}
		s.cl.AllowRebalance()
		return nil
	}
	if fl != nil {
		<-fl.ended.Done()
		if fl.err != nil {
			s.log.Warn("clickhouse sink: flush under way at the stop failed; its records and those behind them stay uncommitted and are read again", "err", fl.err)
			return nil
		}
	}
	s.cl.AllowRebalance()
	return s.stop(lctx)
}

// afterStop returns a context that ends d after ctx ends (or when cancel is called).
func afterStop(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(d, cancel) })
	return lctx, func() {
		stop()
		cancel()
	}
}

// stop makes one attempt to flush what is buffered, bounded by lctx (InsertTimeout from the
// stop).
func (s *Sink) stop(lctx context.Context) error {
	s.mu.Lock()
	n := s.n
	s.mu.Unlock()
	if n == 0 {
		return nil
	}
	if err := s.flush(lctx); err != nil {
		s.log.Warn("clickhouse sink: final flush failed; its records stay uncommitted and are read again", "records", n, "err", err)
	}
	return nil
}

// flush lands everything buffered, then commits it; see Sink.
func (s *Sink) flush(ctx context.Context) error { return s.land(ctx, s.take()) }

// batch is a buffer taken for a flush.
type batch struct {
	buf   map[int32][]pending
	n     int
	taken time.Time
}

// take hands the buffer to a flush and starts a new one; until the flush ends its records
// count as in flight.
func (s *Sink) take() batch {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := batch{buf: s.buf, n: s.n, taken: time.Now()}
	s.buf, s.n, s.inflight = map[int32][]pending{}, 0, b.n
	return b
}

// partitions are the batch's partitions in order.
func (b batch) partitions() []int32 {
	parts := make([]int32, 0, len(b.buf))
	for p := range b.buf {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	return parts
}

// land inserts a taken batch through the mapping, dead-letters what did not map or was
// rejected, writes the batch's ledger rows and its rollup marks, and commits it.
func (s *Sink) land(ctx context.Context, b batch) error {
	defer func() {
		s.mu.Lock()
		s.inflight = 0
		s.metrics.setBuffered(s.n)
		s.mu.Unlock()
	}()
	if b.n == 0 {
		return nil
	}
	in := &inserter{w: s.w, stmts: s.stmts, r: s.retry, log: s.log, reject: s.dlqStage != ""}
	defer s.resume()
	parts := b.partitions()
	var (
		rows   []Row
		owners []*pending
		dead   []dlq.Entry
	)
	for _, p := range parts {
		for i := range b.buf[p] {
			pd := &b.buf[p][i]
			if pd.fault != nil {
				dead = append(dead, dlq.NewEntry(dlq.OriginOf(pd.rec), pd.fault))
				continue
			}
			rows, owners = append(rows, pd.row), append(owners, pd)
		}
	}
	rejects, err := s.m.Insert(ctx, in, rows)
	if err != nil {
		return err
	}
	rejected := make(map[*pending]bool, len(rejects))
	for _, i := range slices.Sorted(maps.Keys(rejects)) {
		rejected[owners[i]] = true
		dead = append(dead, dlq.NewEntry(dlq.OriginOf(owners[i].rec), dlq.WithClass(ClassRejected, rejects[i])))
	}
	if err := s.deadLetter(ctx, &in.retries, dead); err != nil {
		return err
	}
	ledger, last, t := s.account(b, parts, rejected)
	if s.ledger {
		if err := in.Insert(ctx, ledgerBatch(ledger), nil, nil); err != nil {
			return err
		}
	}
	if err := s.mark(ctx, rows, func(i int) bool { return rejected[owners[i]] }, ledger[0].FlushedAt, &in.retries); err != nil {
		return err
	}
	s.commit(ctx, last, &in.retries)
	s.flushed(b, t, dead, int(in.retries.Load())+1)
	return nil
}

// deadLetter writes the batch's dead letters, retrying a Kafka outage. A sink without a DLQ
// (the DLQ mirror) has none to write: its mapping never faults a record, and its rejected
// rows stop it (inserter.reject).
func (s *Sink) deadLetter(ctx context.Context, attempts *atomic.Int64, dead []dlq.Entry) error {
	if len(dead) == 0 {
		return nil
	}
	if s.dlqw == nil {
		return fmt.Errorf("%w: %d records cannot land and the sink has no DLQ: %v", ErrClickHouseFatal, len(dead), dead[0].Message)
	}
	return s.retry.Retry(ctx, opDLQWrite, attempts, isKafkaRetryable, func(ctx context.Context) error {
		return s.dlqw.WriteBatch(ctx, dead)
	})
}

// minDateTime is the smallest value of a ClickHouse DateTime: a ledger row's newest event
// time when it landed none.
var minDateTime = time.Unix(0, 0).UTC()

// totals are what a flush landed, for Stats, the metrics and Flush.
type totals struct{ rows, hitRows int }

// account makes the batch's ledger: one row per partition, what this flush consumed of it
// (every record's offset) and how many rows it landed (records that landed, their tallies).
// It returns the ledger rows, the last record of each partition (to commit) and the totals.
func (s *Sink) account(b batch, parts []int32, rejected map[*pending]bool) ([]LedgerRow, []*kgo.Record, totals) {
	s.seq++
	batchID := fmt.Sprintf("%s-%d", s.runID, s.seq)
	now := time.Now().UTC()
	ledger := make([]LedgerRow, 0, len(parts))
	last := make([]*kgo.Record, 0, len(parts))
	var t totals
	for _, p := range parts {
		ps := b.buf[p]
		l := LedgerRow{BatchID: batchID, Group: s.cfg.Group, Topic: s.cfg.Topic, Partition: p,
			MinOffset: ps[0].rec.Offset, MaxOffset: ps[len(ps)-1].rec.Offset, FlushedAt: now, MaxEventTime: minDateTime}
		for i := range ps {
			pd := &ps[i]
			if pd.row == nil {
				continue // dead-lettered for its fault
			}
			c := pd.row.Tally()
			l.Epoch = max(l.Epoch, c.Epoch)
			if rejected[pd] {
				continue
			}
			if c.Rows > 0 {
				l.Rows += uint32(c.Rows)
				if c.EventTime.After(l.MaxEventTime) {
					l.MaxEventTime = c.EventTime
				}
			}
			l.HitRows += uint32(c.HitRows)
		}
		t.rows += int(l.Rows)
		t.hitRows += int(l.HitRows)
		ledger = append(ledger, l)
		last = append(last, ps[len(ps)-1].rec)
	}
	return ledger, last, t
}

// commit commits the offset after each record in recs, retrying a few times. A commit that
// keeps failing is logged and given up: the records have landed, and reading them again after a
// restart or rebalance only re-writes rows that collapse.
func (s *Sink) commit(ctx context.Context, recs []*kgo.Record, attempts *atomic.Int64) {
	p := s.policy()
	p.Attempts = 5
	err := retry.Do(ctx, p, nil, func(error, int, time.Duration) {
		attempts.Add(1)
		s.stats.retries.Add(1)
	}, func() error { return s.cl.CommitRecords(ctx, recs...) })
	if err != nil {
		s.log.Warn("clickhouse sink: commit failed; these records will be read and written again", "records", len(recs), "err", err)
	}
}

// flushed counts a committed flush in Stats, the metrics and OnFlush.
func (s *Sink) flushed(b batch, t totals, dead []dlq.Entry, attempts int) {
	nDead := len(dead)
	s.stats.records.Add(int64(b.n))
	s.stats.rows.Add(int64(t.rows))
	s.stats.hitRows.Add(int64(t.hitRows))
	s.stats.dlq.Add(int64(nDead))
	s.stats.flushes.Add(1)
	if st := s.metrics.st(); st != nil {
		st.Out(b.n - nDead)
		for _, e := range dead {
			st.DLQ(e.Class, 1)
		}
		st.Batch(b.n)
		st.Flush(time.Since(b.taken))
	}
	if s.rc.OnFlush != nil {
		s.rc.OnFlush(Flush{Records: b.n, Rows: t.rows, HitRows: t.hitRows, DLQ: nDead, Took: time.Since(b.taken), Attempts: attempts})
	}
}
