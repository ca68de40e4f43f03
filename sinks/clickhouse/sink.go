package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	"github.com/backflowhq/backflow/internal/rollup"
	"github.com/backflowhq/backflow/sinks"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
)

// Stage is the DLQ stage name of the sink.
const Stage = "sink-clickhouse"

// RunConfig holds what the sink talks to.
type RunConfig struct {
	Kafka      kafka.Conn
	Registry   avro.Registry
	ClickHouse chschema.Conn
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

// Sink is the one loop from Kafka into ClickHouse: one member of a Kafka consumer group over
// one topic, whose records its mapping (mapping.go) turns into rows. New builds it for the
// built-in tables, NewStream for a declared stream, and NewLoop around a mapping of another
// package (dlqmirror.New for the DLQ mirror, rollups.New for the rollup loop); then call Run
// once. Stats may be called at any time from
// any goroutine.
//
// Run polls records into a buffer bounded by BatchRows, maps each as it comes, and flushes the
// buffer when it is full or BatchInterval after its first record. A flush (flush.go):
//  1. hands the rows to the mapping, which inserts them (Insert; the built-in tables at once,
//     one PrepareBatch each with named columns, on connections of their own); a retryable error
//     (IsRetryable) pauses fetching and retries the same insert with backoff until it succeeds
//     or the sink stops; a rejected batch (IsRejected) is inserted in halves down to single
//     rows, and the records whose rows are rejected go to the DLQ once; a fatal error (IsFatal)
//     stops Run without committing;
//  2. writes the records that did not map (a permanent decode error) or were rejected to the
//     DLQ (deadLetter);
//  3. inserts one sink_ledger row per flushed partition (account);
//  4. writes the rollup marks of the tables and hours it wrote into to Config.RollupTopic
//     (mark), for the rollup loop;
//  5. commits, per partition, the offset after the last flushed record (commit).
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
	cfg Config
	rc  RunConfig
	log *slog.Logger
	m   Mapping
	// dlqStage is the stage the sink's dead letters name; "" (the DLQ mirror): it has no DLQ,
	// and a record it cannot land stops it.
	dlqStage string
	ledger   bool // writes sink_ledger rows (the DLQ mirror does not)
	// marks is the topic each flush marks the minutes it wrote into on, for the rollup loop
	// (rollup_marks.go); "": no marks (rollups off, a declared stream, the rollup loop itself).
	marks string
	// abandonOnStop: at a stop, the flush under way is cancelled and no last flush is made;
	// what they held stays uncommitted and is read again by the partition's next owner. For
	// the rollup loop, whose flush re-aggregates minutes (safe to repeat) and can take seconds
	// on a loaded server: finishing it held every stop of the process for up to InsertTimeout.
	abandonOnStop bool
	retry         *retrier
	w             sinks.BatchWriter[Batch] // ClickHouse, once Run has connected (set before: a test's)
	stmts         rollup.Conn              // the same connection's statements (the rollups'); nil with a test's writer
	cl            *kgo.Client
	dlqw          *dlq.Writer
	pcl           *kgo.Client

	mu       sync.Mutex
	buf      map[int32][]pending
	n        int
	inflight int // records of the batch being flushed
	first    time.Time

	runID   string
	seq     int
	pmu     sync.Mutex // guards paused
	paused  bool
	metrics *metrics
	stats   struct{ records, rows, hitRows, dlq, flushes, retries, dropped atomic.Int64 }
}

// pending is a buffered record: its row, or the fault that sends it to the DLQ.
type pending struct {
	rec   *kgo.Record
	row   Row
	fault error
}

// New validates cfg and builds the sink of the built-in tables; it does not contact any
// service.
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
	return newSink(cfg, rc, &enrichedMapping{dec: dec, log: logger(rc.Logger)}, Stage), nil
}

// newSink builds the loop around m. Its dead letters name the stage dlqStage; "" means it has
// no DLQ (see Sink.dlqStage).
func newSink(cfg Config, rc RunConfig, m Mapping, dlqStage string) *Sink {
	cfg = cfg.withDefaults()
	s := &Sink{cfg: cfg, rc: rc, log: logger(rc.Logger), m: m, dlqStage: dlqStage, ledger: true, marks: cfg.MarksTopic(), buf: map[int32][]pending{},
		runID: fmt.Sprintf("%s-%d", cfg.Group, time.Now().UnixNano()), metrics: newMetrics(rc.Metrics, cfg.Group)}
	s.retry = &retrier{policy: s.policy(), log: s.log, retries: &s.stats.retries, metrics: s.metrics, pause: s.pause}
	return s
}

// logger is l, or slog.Default() for none.
func logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.Default()
	}
	return l
}

// UseWriter makes the loop write through w, and run its statements on stmts (nil: none),
// instead of connecting to ClickHouse: a writer of the caller's own, a test's in memory. Call
// it before Run.
func (s *Sink) UseWriter(w sinks.BatchWriter[Batch], stmts rollup.Conn) { s.w, s.stmts = w, stmts }

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
	if err := s.connect(ctx); err != nil {
		return err
	}
	defer s.disconnect()

	// Flushes run on lctx, which outlives ctx by InsertTimeout: a flush that is under way when
	// the sink is stopped finishes its inserts, ledger row and commit instead of being cut off
	// between them (which left rows and a ledger row landed but uncommitted, written a second
	// time by the partition's next owner).
	lctx, lcancel := afterStop(ctx, s.cfg.InsertTimeout)
	defer lcancel()
	if s.abandonOnStop {
		lctx = ctx
	}
	var fl *flight // the flush under way; nil: none
	for {
		if ctx.Err() != nil {
			return s.stopAfter(lctx, fl)
		}
		if fl != nil && fl.over() {
			if fl.err != nil {
				return s.failed(ctx, fl.err)
			}
			fl = nil
		}
		if fl == nil {
			// No flush under way: a rebalance held since the last poll may run now.
			s.cl.AllowRebalance()
		}
		closed, err := s.poll(ctx, fl)
		switch {
		case closed || (err != nil && ctx.Err() != nil):
			return s.stopAfter(lctx, fl)
		case err != nil:
			fl.wait(context.Background())
			s.cl.AllowRebalance()
			return err
		}
		if s.due() {
			if fl != nil {
				fl.wait(ctx) // due while the last batch is still landing: it goes first
			} else {
				fl = s.startFlush(lctx)
			}
		}
	}
}

// connect opens what Run writes to and reads from: ClickHouse (waiting out an outage), the
// consumer, and the DLQ's producer when the sink has one.
func (s *Sink) connect(ctx context.Context) error {
	if s.w == nil {
		conn, err := s.openClickHouse(ctx)
		if err != nil {
			return err
		}
		w := NewWriter(conn, s.cfg.InsertTimeout).forCluster(s.rc.ClickHouse)
		s.w, s.stmts = w, w
	}
	reset := kgo.NewOffset().AtEnd()
	if s.cfg.FromStart {
		reset = kgo.NewOffset().AtStart()
	}
	var err error
	s.cl, err = s.rc.Kafka.NewClient(append(s.rc.Kafka.GroupOpts(),
		kgo.ConsumerGroup(s.cfg.Group),
		kgo.ConsumeTopics(s.cfg.Topic),
		kgo.ConsumeResetOffset(reset),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			// One line per new assignment: the group's rebalances, as goka's "setup generation"
			// lines show the table stages'.
			s.log.Info("clickhouse sink: partitions assigned", "group", s.cfg.Group, "partitions", fmt.Sprint(m[s.cfg.Topic]))
			s.assigned(true)
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { s.drop(m) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			s.drop(m)
			s.assigned(false)
		}),
	)...)
	if err != nil {
		return err
	}
	if s.dlqStage == "" {
		return nil
	}
	if s.pcl, err = s.rc.Kafka.NewClient(); err != nil {
		return err
	}
	s.dlqw, err = dlq.NewWriter(s.pcl, dlq.Config{Topic: s.cfg.DLQTopic, Stage: s.dlqStage})
	return err
}

// openClickHouse connects to ClickHouse, waiting out an outage.
func (s *Sink) openClickHouse(ctx context.Context) (driver.Conn, error) {
	var conn driver.Conn
	err := s.retry.Await(ctx, "clickhouse", IsRetryable, func() (err error) {
		conn, err = chschema.Open(ctx, s.rc.ClickHouse)
		return err
	})
	return conn, err
}

// disconnect closes what connect opened.
func (s *Sink) disconnect() {
	if s.pcl != nil {
		s.pcl.Close()
	}
	if s.cl != nil {
		s.cl.Close()
	}
	s.w.Close()
}

// failed is how Run ends after the flush under way failed: with the error, or cleanly when
// the sink was stopped meanwhile (the flush's records stay uncommitted).
func (s *Sink) failed(ctx context.Context, err error) error {
	s.cl.AllowRebalance()
	if ctx.Err() != nil {
		s.log.Warn("clickhouse sink: flush under way at the stop failed; its records stay uncommitted and are read again", "err", err)
		return nil
	}
	return err
}

// poll waits for records until the batch is due (BatchInterval after its first record) or the
// flush under way ends, asking for no more than the room BatchRows leaves besides what is
// buffered and in flight, and maps and buffers each. With no room left it waits for the flush
// under way instead. closed: the client was closed.
func (s *Sink) poll(ctx context.Context, fl *flight) (closed bool, err error) {
	s.mu.Lock()
	room, n, first := s.cfg.BatchRows-s.n-s.inflight, s.n, s.first
	s.mu.Unlock()
	if room <= 0 {
		fl.wait(ctx) // full: the batch being landed must make room first
		return false, nil
	}
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
		return true, nil
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
			return false, err
		}
	}
	return false, nil
}

// add maps r and buffers it. An outage met while mapping (the registry) is retried, holding up
// polling.
func (s *Sink) add(ctx context.Context, r *kgo.Record) error {
	row, fault, err := s.m.Map(ctx, s.retry, r)
	if err != nil {
		return err
	}
	s.mu.Lock()
	if s.n == 0 {
		s.first = time.Now()
	}
	s.buf[r.Partition] = append(s.buf[r.Partition], pending{rec: r, row: row, fault: fault})
	s.n++
	s.metrics.setBuffered(s.n + s.inflight)
	s.mu.Unlock()
	s.metrics.st().In(1)
	return nil
}

// due reports whether the buffer is to be flushed: full, or BatchInterval old.
func (s *Sink) due() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n >= s.cfg.BatchRows || (s.n > 0 && time.Since(s.first) >= s.cfg.BatchInterval)
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
			s.metrics.drop(k)
			s.log.Info("clickhouse sink: partition revoked, dropping its buffered records", "partition", p, "records", k)
		}
		delete(s.buf, p)
	}
}

// policy is how the sink waits out an outage: BackoffMin doubling up to BackoffMax, jittered.
func (s *Sink) policy() retry.Policy {
	return retry.Policy{Min: s.cfg.BackoffMin, Max: s.cfg.BackoffMax}
}

// pause stops fetching while a flush retries; the flush resumes it when it ends.
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

// Run builds a sink from cfg and rc and runs it until ctx ends; see Sink.
func Run(ctx context.Context, cfg Config, rc RunConfig) error {
	s, err := New(cfg, rc)
	if err != nil {
		return err
	}
	return s.Run(ctx)
}
