package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/dlq"
	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/internal/moderation"
	"github.com/backflowhq/backflow/internal/ops"
	"github.com/backflowhq/backflow/internal/retry"
)

// Stage is the DLQ stage name of the sink.
const Stage = "sink-clickhouse"

// RunConfig holds what the sink talks to.
type RunConfig struct {
	Kafka      kafka.Conn
	Registry   avro.Registry
	ClickHouse Conn
	// Logger receives warnings and one line per retry. Default: slog.Default().
	Logger *slog.Logger
	// OnFlush, when set, is called after each flush was committed (tests, progress output).
	OnFlush func(Flush)
	// Metrics is the stage's handle on the process's metrics (ops.Metrics.Stage); nil
	// records nothing.
	Metrics *ops.Stage
	// OnAssigned, when set, is called with true when the group assigns partitions to the sink
	// and with false when it loses them (readiness).
	OnAssigned func(assigned bool)
	// SensitiveWords screens a declared stream's screen fields (NewStream); the built-in sink
	// does not use it.
	SensitiveWords *moderation.Client
}

// Flush describes one committed flush.
type Flush struct {
	Records  int // enriched records consumed (rows + dead-lettered)
	Rows     int // rows in inference_results + gateway_logs
	HitRows  int // rows in moderation_hits
	DLQ      int // records sent to the DLQ
	Took     time.Duration
	Attempts int // 1 when nothing had to be retried
}

// Stats are running totals since the sink started. Safe to read concurrently.
type Stats struct {
	Records int64 // enriched records flushed and committed
	Rows    int64 // rows written to inference_results + gateway_logs
	HitRows int64 // rows written to moderation_hits
	DLQ     int64 // records sent to the DLQ
	Flushes int64 // committed flushes
	Retries int64 // retried attempts (connecting, inserts, DLQ writes, commits, registry)
	Dropped int64 // buffered records dropped because their partition was revoked or lost
	// Buffered is the records the sink holds now and has not committed: those waiting in its
	// buffer plus the batch a flush is landing (retrying through an outage included). The sink
	// polls only into the room the two leave, so this is at most BatchRows.
	Buffered int64
	// InFlight is the part of Buffered that a flush is landing; the rest is the next batch,
	// polled meanwhile.
	InFlight int64
}

// Sink is the ClickHouse sink: one member of a Kafka consumer group over the enriched topic.
// Build it with New, then call Run once; Stats may be called at any time from any goroutine.
//
// Run polls records into a buffer bounded by BatchRows, and flushes the buffer when it is full
// or BatchInterval after its first record. A flush:
//  1. writes the records that do not decode (a permanent avro error) to the DLQ;
//  2. inserts inference_results, gateway_logs and moderation_hits at once, one PrepareBatch
//     each with named columns, on connections of their own; a retryable error (IsRetryable)
//     pauses fetching and retries the same insert with backoff until it succeeds or the sink
//     stops; a rejected batch (IsRejected) is inserted row by row and the records whose rows
//     are rejected go to the DLQ once; a fatal error (IsFatal) stops Run without committing;
//  3. inserts one sink_ledger row per flushed partition;
//  4. commits, per partition, the offset after the last flushed record.
//
// Offsets are never committed past a record that has not landed in ClickHouse or the DLQ. Rows
// may be written twice (a crash before the commit, a lost insert reply); the tables collapse
// them (see Version). Partitions revoked or lost in a rebalance have their buffered records
// dropped, uncommitted: their new owner reads them again.
//
// A flush runs in the background while Run polls the next batch into the room left, so a
// batch's window starts while the one before it lands, and a slow insert does not add to the
// next batch's wait. One flush runs at a time, and the next starts only after it succeeded.
// Rebalances wait (kgo.BlockRebalanceOnPoll) until no flush is under way, so a flush never
// races a revocation.
type Sink struct {
	cfg   Config
	rc    RunConfig
	log   *slog.Logger
	recs  records // what the records become: the built-in tables, or a declared stream's
	stage string  // the DLQ's stage name: Stage, or a stream's
	w     *Writer // the ClickHouse side, once Run has connected
	cl    *kgo.Client
	dlqw  *dlq.Writer
	pcl   *kgo.Client

	mu       sync.Mutex
	buf      map[int32][]pending
	n        int
	inflight int // records of the batch being flushed
	first    time.Time

	runID  string
	seq    int
	pmu    sync.Mutex // guards paused
	paused bool
	m      *metrics
	stats  struct{ records, rows, hitRows, dlq, flushes, retries, dropped atomic.Int64 }
}

type pending struct {
	rec  *kgo.Record
	rows Rows      // the built-in tables' rows
	row  streamRow // or a declared stream's row
	err  error     // non-nil: the record goes to the DLQ with this error
	ep   int32
}

// records is what a Sink does with the records it consumes: how one becomes rows, and how a
// batch of rows lands. enrichedTables (the built-in tables) and streamTable (a declared stream's table,
// stream.go) implement it; the batching, retries, DLQ, ledger and commits around them are the
// Sink's. decode is called from Run's goroutine, one record at a time; insert and landed from
// the flush under way, one flush at a time.
type records interface {
	// decode fills p from p.rec: its rows, or the error it goes to the DLQ with (p.err). An
	// error returned stops the sink with p and what follows it uncommitted: ctx ended during
	// an outage, or a change the table cannot follow.
	decode(ctx context.Context, s *Sink, p *pending) error
	// insert lands the rows of the batch's records (those without p.err, in partition and
	// offset order) and records in rejects the records whose rows ClickHouse rejected; it
	// returns the retries it made.
	insert(ctx context.Context, s *Sink, ps []*pending, rejects map[*pending]error) (int, error)
	// landed is what one landed record counts in the ledger: rows in the main tables, hit rows,
	// and its event time.
	landed(p *pending) (rows, hitRows int, eventTime time.Time)
}

// New validates cfg and builds the sink; it does not contact any service.
func New(cfg Config, rc RunConfig) (*Sink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := rc.ClickHouse.Validate(); err != nil {
		return nil, err
	}
	if rc.Registry == nil {
		return nil, errors.New("clickhouse sink: registry: nil")
	}
	dec, err := avro.NewDecoder[avro.EnrichedRecord](rc.Registry, avro.EnrichedSchema, avro.DecoderConfig{})
	if err != nil {
		return nil, err
	}
	return newSink(cfg, rc, Stage, &enrichedTables{dec: dec}), nil
}

func newSink(cfg Config, rc RunConfig, stage string, recs records) *Sink {
	cfg = cfg.withDefaults()
	s := &Sink{cfg: cfg, rc: rc, log: rc.Logger, recs: recs, stage: stage, buf: map[int32][]pending{},
		runID: fmt.Sprintf("%s-%d", cfg.Group, time.Now().UnixNano()), m: newMetrics(rc.Metrics, cfg.Group)}
	if s.log == nil {
		s.log = slog.Default()
	}
	return s
}

// Stats returns the running totals.
func (s *Sink) Stats() Stats {
	s.mu.Lock()
	buffered, inflight := int64(s.n+s.inflight), int64(s.inflight)
	s.mu.Unlock()
	return Stats{Buffered: buffered, InFlight: inflight, Records: s.stats.records.Load(), Rows: s.stats.rows.Load(), HitRows: s.stats.hitRows.Load(),
		DLQ: s.stats.dlq.Load(), Flushes: s.stats.flushes.Load(), Retries: s.stats.retries.Load(), Dropped: s.stats.dropped.Load()}
}

// Run consumes until ctx ends or a fatal error. When ctx ends, the flush under way (if any) is
// finished, and one last flush lands and commits what is still buffered, both bounded by
// InsertTimeout from the stop; what does not make it stays uncommitted and is read again by the
// next run. It returns nil after a clean stop.
func (s *Sink) Run(ctx context.Context) error {
	conn, err := s.openClickHouse(ctx)
	if err != nil {
		return err
	}
	s.w = NewWriter(conn, s.cfg.InsertTimeout).forCluster(s.rc.ClickHouse)
	defer s.w.Close()

	reset := kgo.NewOffset().AtEnd()
	if s.cfg.FromStart {
		reset = kgo.NewOffset().AtStart()
	}
	s.cl, err = s.rc.Kafka.NewClient(
		kgo.ConsumerGroup(s.cfg.Group),
		kgo.ConsumeTopics(s.cfg.Topic),
		kgo.ConsumeResetOffset(reset),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) { s.assigned(true) }),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { s.drop(m) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			s.drop(m)
			s.assigned(false)
		}),
	)
	if err != nil {
		return err
	}
	defer s.cl.Close()
	if s.pcl, err = s.rc.Kafka.NewClient(); err != nil {
		return err
	}
	defer s.pcl.Close()
	if s.dlqw, err = dlq.NewWriter(s.pcl, dlq.Config{Topic: s.cfg.DLQTopic, Stage: s.stage}); err != nil {
		return err
	}

	// Flushes run on lctx, which outlives ctx by InsertTimeout: a flush that is under way when
	// the sink is stopped finishes its inserts, ledger row and commit instead of being cut off
	// between them (which left rows and a ledger row landed but uncommitted, written a second
	// time by the partition's next owner).
	lctx, lcancel := afterStop(ctx, s.cfg.InsertTimeout)
	defer lcancel()
	var fl *flight // the flush under way; nil: none
	for {
		if ctx.Err() != nil {
			return s.stopAfter(lctx, fl)
		}
		if fl != nil && fl.over() {
			err := fl.err
			fl = nil
			if err != nil {
				s.cl.AllowRebalance()
				if ctx.Err() != nil {
					s.log.Warn("clickhouse sink: flush under way at the stop failed; its records stay uncommitted and are read again", "err", err)
					return nil
				}
				return err
			}
		}
		if fl == nil {
			// No flush under way: a rebalance held since the last poll may run now.
			s.cl.AllowRebalance()
		}
		s.mu.Lock()
		room, n, first := s.cfg.BatchRows-s.n-s.inflight, s.n, s.first
		s.mu.Unlock()
		if room <= 0 && fl != nil {
			fl.wait(ctx) // full: the batch being landed must make room first
			continue
		}
		if room > 0 {
			wait := s.cfg.BatchInterval
			if n > 0 {
				wait = max(time.Until(first.Add(s.cfg.BatchInterval)), time.Millisecond)
			}
			pctx, cancel := context.WithTimeout(ctx, wait)
			unwake := func() bool { return false }
			if fl != nil {
				unwake = context.AfterFunc(fl.ended, cancel) // wake up when the flush ends, to start the next one
			}
			fs := s.cl.PollRecords(pctx, room)
			unwake()
			cancel()
			if fs.IsClientClosed() {
				return s.stopAfter(lctx, fl)
			}
			fs.EachError(func(t string, p int32, err error) {
				if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
					s.log.Warn("clickhouse sink: fetch", "topic", t, "partition", p, "err", err)
				}
			})
			var recs []*kgo.Record
			fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
			for _, r := range recs {
				if err := s.add(ctx, r); err != nil {
					if ctx.Err() != nil {
						return s.stopAfter(lctx, fl)
					}
					fl.wait(context.Background())
					s.cl.AllowRebalance()
					return err
				}
			}
		}
		s.mu.Lock()
		due := s.n >= s.cfg.BatchRows || (s.n > 0 && time.Since(s.first) >= s.cfg.BatchInterval)
		s.mu.Unlock()
		switch {
		case !due:
		case fl != nil:
			fl.wait(ctx) // due while the last batch is still landing: it goes first
		default:
			fl = s.startFlush(lctx)
		}
	}
}

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
// the records behind it would pass it.
func (s *Sink) stopAfter(lctx context.Context, fl *flight) error {
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

func (s *Sink) openClickHouse(ctx context.Context) (driver.Conn, error) {
	var conn driver.Conn
	err := retry.Do(ctx, s.policy(), IsRetryable, func(err error, attempt int, _ time.Duration) {
		s.stats.retries.Add(1) // counted like every other retry (Stats.Retries, the stop summary)
		s.log.Warn("clickhouse sink: clickhouse unavailable, retrying", "attempt", attempt, "err", err)
	}, func() (err error) {
		conn, err = Open(ctx, s.rc.ClickHouse)
		return err
	})
	if err != nil {
		return nil, err
	}
	return conn, nil
}

func (s *Sink) assigned(ok bool) {
	if s.rc.OnAssigned != nil {
		s.rc.OnAssigned(ok)
	}
}

// drop forgets the buffered records of revoked or lost partitions; they stay uncommitted.
func (s *Sink) drop(m map[string][]int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range m[s.cfg.Topic] {
		if k := len(s.buf[p]); k > 0 {
			s.n -= k
			s.stats.dropped.Add(int64(k))
			s.m.drop(k)
			s.log.Info("clickhouse sink: partition revoked, dropping its buffered records", "partition", p, "records", k)
		}
		delete(s.buf, p)
	}
}

// add decodes r and buffers it. A registry outage is retried while decoding, holding up
// polling.
func (s *Sink) add(ctx context.Context, r *kgo.Record) error {
	p := pending{rec: r}
	if err := s.recs.decode(ctx, s, &p); err != nil {
		return err
	}
	s.mu.Lock()
	if s.n == 0 {
		s.first = time.Now()
	}
	s.buf[r.Partition] = append(s.buf[r.Partition], p)
	s.n++
	s.m.setBuffered(s.n + s.inflight)
	s.mu.Unlock()
	s.m.st().In(1)
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

// land inserts a taken batch, writes its ledger rows and commits it.
func (s *Sink) land(ctx context.Context, b batch) error {
	start, buf, n := b.taken, b.buf, b.n
	defer func() {
		s.mu.Lock()
		s.inflight = 0
		s.m.setBuffered(s.n)
		s.mu.Unlock()
	}()
	if n == 0 {
		return nil
	}
	parts := make([]int32, 0, len(buf))
	for p := range buf {
		parts = append(parts, p)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })

	var (
		ok      []*pending
		dead    []dlq.Entry
		rejects = map[*pending]error{}
	)
	for _, p := range parts {
		for i := range buf[p] {
			pd := &buf[p][i]
			if pd.err != nil {
				dead = append(dead, dlq.NewEntry(dlq.OriginOf(pd.rec), pd.err))
				continue
			}
			ok = append(ok, pd)
		}
	}
	attempts := 1
	defer s.resume()
	tries, err := s.recs.insert(ctx, s, ok, rejects)
	attempts += tries
	if err != nil {
		return err
	}
	for pd, err := range rejects {
		dead = append(dead, dlq.NewEntry(dlq.OriginOf(pd.rec), dlq.WithClass(ClassRejected, err)))
	}
	if len(dead) > 0 {
		if err := s.retry(ctx, "dlq write", &attempts, func(ctx context.Context) error {
			return s.dlqw.WriteBatch(ctx, dead)
		}, isKafkaRetryable); err != nil {
			return err
		}
	}

	// One ledger row per partition: what this flush consumed and how many rows it landed.
	s.seq++
	batchID := fmt.Sprintf("%s-%d", s.runID, s.seq)
	now := time.Now().UTC()
	var ledger []LedgerRow
	var commit []*kgo.Record
	rows, hitRows := 0, 0
	for _, p := range parts {
		ps := buf[p]
		l := LedgerRow{BatchID: batchID, Group: s.cfg.Group, Topic: s.cfg.Topic, Partition: p,
			MinOffset: ps[0].rec.Offset, MaxOffset: ps[len(ps)-1].rec.Offset, FlushedAt: now, MaxEventTime: time.Unix(0, 0).UTC()}
		for i := range ps {
			pd := &ps[i]
			l.Epoch = max(l.Epoch, pd.ep)
			if _, rejected := rejects[pd]; rejected || pd.err != nil {
				continue
			}
			r, h, et := s.recs.landed(pd)
			if r > 0 {
				l.Rows += uint32(r)
				if et.After(l.MaxEventTime) {
					l.MaxEventTime = et
				}
			}
			l.HitRows += uint32(h)
		}
		rows += int(l.Rows)
		hitRows += int(l.HitRows)
		ledger = append(ledger, l)
		commit = append(commit, ps[len(ps)-1].rec)
	}
	a, err := insertRows(ctx, s, TableLedger, ledger, nil, nil)
	attempts += a
	if err != nil {
		return err
	}
	s.commit(ctx, commit, &attempts)
	s.stats.records.Add(int64(n))
	s.stats.rows.Add(int64(rows))
	s.stats.hitRows.Add(int64(hitRows))
	s.stats.dlq.Add(int64(len(dead)))
	s.stats.flushes.Add(1)
	if st := s.m.st(); st != nil {
		st.Out(n - len(dead))
		for _, e := range dead {
			st.DLQ(e.Class, 1)
		}
		st.Batch(n)
		st.Flush(time.Since(start))
	}
	if s.rc.OnFlush != nil {
		s.rc.OnFlush(Flush{Records: n, Rows: rows, HitRows: hitRows, DLQ: len(dead), Took: time.Since(start), Attempts: attempts})
	}
	return nil
}

// commit commits the offset after each record in recs, retrying a few times. A commit that
// keeps failing is logged and given up: the records have landed, and reading them again after a
// restart or rebalance only re-writes rows that collapse.
func (s *Sink) commit(ctx context.Context, recs []*kgo.Record, attempts *int) {
	p := s.policy()
	p.Attempts = 5
	err := retry.Do(ctx, p, nil, func(error, int, time.Duration) {
		*attempts++
		s.stats.retries.Add(1)
	}, func() error { return s.cl.CommitRecords(ctx, recs...) })
	if err != nil {
		s.log.Warn("clickhouse sink: commit failed; these records will be read and written again", "records", len(recs), "err", err)
	}
}

// enrichedTables is the built-in sink's records: enriched records into inference_results,
// gateway_logs and moderation_hits.
type enrichedTables struct {
	dec *avro.Decoder[avro.EnrichedRecord]
}

func (en *enrichedTables) decode(ctx context.Context, s *Sink, p *pending) error {
	var e avro.EnrichedRecord
	err := s.decodeRetrying(ctx, func() (err error) {
		e, _, err = en.dec.Decode(ctx, p.rec.Value)
		return err
	})
	switch {
	case err == nil:
		p.ep = e.Epoch
		if p.rows, err = MapRecord(&e); err != nil {
			p.err = dlq.WithClass("invalid", err)
		}
	case !avro.IsRetryable(err):
		// A record ingest wrote that we cannot read is a bug of ours, not an outage: it goes to
		// the DLQ (with the decoder's class) so that the partition is not blocked forever.
		s.log.Warn("clickhouse sink: enriched record does not decode; sending it to the DLQ",
			"partition", p.rec.Partition, "offset", p.rec.Offset, "err", err)
		p.err = err
	default: // ctx ended during the outage
		return ctx.Err()
	}
	return nil
}

func (en *enrichedTables) insert(ctx context.Context, s *Sink, ps []*pending, rejects map[*pending]error) (int, error) {
	var (
		inf    []InferenceRow
		infOwn []*pending
		gw     []GatewayRow
		gwOwn  []*pending
		hits   []HitRow
		hitOwn []*pending
	)
	for _, pd := range ps {
		if pd.rows.Inference != nil {
			inf, infOwn = append(inf, *pd.rows.Inference), append(infOwn, pd)
		}
		if pd.rows.Gateway != nil {
			gw, gwOwn = append(gw, *pd.rows.Gateway), append(gwOwn, pd)
		}
		for _, h := range pd.rows.Hits {
			hits, hitOwn = append(hits, h), append(hitOwn, pd)
		}
	}
	// The three tables are inserted at once, each on a connection of its own: a flush takes as
	// long as its slowest insert, and every row of it is stamped landed at about its start.
	// Each insert records its rejected rows apart; they are merged once all are done.
	steps := []func(rejects map[*pending]error) (int, error){
		func(r map[*pending]error) (int, error) { return insertRows(ctx, s, TableInference, inf, infOwn, r) },
		func(r map[*pending]error) (int, error) { return insertRows(ctx, s, TableGateway, gw, gwOwn, r) },
		func(r map[*pending]error) (int, error) { return insertRows(ctx, s, TableHits, hits, hitOwn, r) },
	}
	var wg sync.WaitGroup
	tries, errs := make([]int, len(steps)), make([]error, len(steps))
	stepRejects := make([]map[*pending]error, len(steps))
	for i, step := range steps {
		stepRejects[i] = map[*pending]error{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			tries[i], errs[i] = step(stepRejects[i])
		}()
	}
	wg.Wait()
	attempts := 0
	for i := range steps {
		attempts += tries[i]
		maps.Copy(rejects, stepRejects[i])
	}
	for _, err := range errs {
		if err != nil {
			return attempts, err // the first table's, in the order above
		}
	}
	return attempts, nil
}

func (en *enrichedTables) landed(p *pending) (int, int, time.Time) {
	rows := 0
	if p.rows.Inference != nil || p.rows.Gateway != nil {
		rows = 1
	}
	return rows, len(p.rows.Hits), p.rows.EventTime()
}

// decodeRetrying runs decode until it succeeds, fails for the record's own fault, or ctx
// ends: a registry outage (avro.IsRetryable) is waited out, holding up polling.
func (s *Sink) decodeRetrying(ctx context.Context, decode func() error) error {
	return retry.Do(ctx, s.policy(), avro.IsRetryable, func(err error, attempt int, _ time.Duration) {
		s.stats.retries.Add(1)
		s.log.Warn("clickhouse sink: registry unavailable, retrying", "attempt", attempt, "err", err)
	}, decode)
}

// insertRows inserts rows into table in one batch, retrying retryable errors. When the batch is
// rejected for its data, it bisects: each half is inserted on its own, down to single rows, and
// the owner of each row rejected alone is recorded in rejects (with k bad rows among n this costs
// about 2·k·log2(n) inserts). owners nil means a rejection is fatal (the ledger). It returns
// the number of retries it made.
func insertRows[T any](ctx context.Context, s *Sink, table string, rows []T, owners []*pending, rejects map[*pending]error) (int, error) {
	if len(rows) == 0 {
		return 0, nil
	}
	attempts := 0
	err := s.retry(ctx, "insert "+table, &attempts, func(ctx context.Context) error {
		return s.w.WriteBatch(ctx, Table{Name: table, Rows: rows})
	}, s.w.Retryable)
	switch {
	case err == nil:
		return attempts, nil
	case !IsRejected(err):
		return attempts, fmt.Errorf("clickhouse sink: insert %s: %w", table, err)
	case owners == nil:
		return attempts, fmt.Errorf("%w: insert %s: %w", ErrClickHouseFatal, table, err)
	case len(rows) == 1:
		rejects[owners[0]] = err
		return attempts, nil
	}
	if len(rows) == len(owners) && attempts == 0 {
		s.log.Warn("clickhouse sink: batch rejected, bisecting to find the bad records", "table", table, "rows", len(rows), "err", err)
	}
	mid := len(rows) / 2
	a1, err := insertRows(ctx, s, table, rows[:mid], owners[:mid], rejects)
	if err != nil {
		return attempts + a1, err
	}
	a2, err := insertRows(ctx, s, table, rows[mid:], owners[mid:], rejects)
	return attempts + a1 + a2, err
}

// retry runs op until it succeeds, fails with an error retryable does not accept, or ctx ends
// (retry.Do with the sink's policy). While it retries, fetching is paused, so nothing piles up
// in memory; each retry counts in attempts, Stats.Retries and the metrics.
func (s *Sink) retry(ctx context.Context, what string, attempts *int, op func(context.Context) error, retryable func(error) bool) error {
	return retry.Do(ctx, s.policy(), retryable, func(err error, attempt int, _ time.Duration) {
		*attempts++
		s.stats.retries.Add(1)
		s.pause()
		if what == "dlq write" {
			s.m.st().DLQWriteError()
		}
		s.log.Warn("clickhouse sink: retrying", "op", what, "attempt", attempt, "err", err)
	}, func() error {
		err := op(ctx)
		if err != nil && ctx.Err() == nil {
			s.m.st().SinkError(errorClass(err))
		}
		return err
	})
}

// policy is how the sink waits out an outage: BackoffMin doubling up to BackoffMax, jittered.
func (s *Sink) policy() retry.Policy {
	return retry.Policy{Min: s.cfg.BackoffMin, Max: s.cfg.BackoffMax}
}

func (s *Sink) pause() {
	s.pmu.Lock() // the inserts of a flush retry at once
	defer s.pmu.Unlock()
	if !s.paused && s.cl != nil {
		s.cl.PauseFetchTopics(s.cfg.Topic)
		s.paused = true
	}
}

func (s *Sink) resume() {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	if s.paused {
		s.cl.ResumeFetchTopics(s.cfg.Topic)
		s.paused = false
	}
}

// isKafkaRetryable: a DLQ write or commit failure is an outage of Kafka (or a rebalance in
// progress); it is retried unless the sink is stopping.
func isKafkaRetryable(err error) bool {
	return !errors.Is(err, context.Canceled) && !errors.Is(err, dlq.ErrUnsafeClient) && !errors.Is(err, dlq.ErrInvalidEntry) &&
		!errors.Is(err, dlq.ErrTooLarge)
}

// Run builds a sink from cfg and rc and runs it until ctx ends; see Sink.
func Run(ctx context.Context, cfg Config, rc RunConfig) error {
	s, err := New(cfg, rc)
	if err != nil {
		return err
	}
	return s.Run(ctx)
}
