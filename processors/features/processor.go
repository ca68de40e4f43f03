package features

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/codec"
	"github.com/lovoo/goka/storage"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/dlq"
	"github.com/backflowhq/backflow/internal/feast"
	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/internal/ops"
	"github.com/backflowhq/backflow/internal/retry"
)

// Stats counts what the processor did.
type Stats struct {
	Records    atomic.Int64 // enriched records applied
	Undecoded  atomic.Int64 // enriched records that could not be decoded (sent to the DLQ)
	Deltas     atomic.Int64 // loopback deltas applied
	Duplicates atomic.Int64 // loopback deltas that were re-sends (no-ops)
	Swept      atomic.Int64 // request entries deleted by the sweep
}

// DeadLetters writes a bad record to the DLQ and returns once it is acknowledged.
type DeadLetters interface {
	Write(ctx context.Context, o dlq.Origin, err error) error
}

// Store is where the processor's feature rows go: sinks/redis.Writer in production.
//
// Lifecycle: Run sends what Submit queued until its ctx ends; the processor's Run starts it
// and waits for it before returning. Submit is called from goka's partition goroutines,
// concurrently; it blocks while the store holds Cap records, and calls done exactly once
// per call, in submission order, when the ops are written (nil) or can no longer be (the
// error). The counters may be read at any time.
type Store interface {
	Run(ctx context.Context) error
	Submit(ctx context.Context, ops []feast.Op, done func(error)) error
	Pending() int64   // records whose writes are not acknowledged yet
	Cap() int64       // the most records Pending reaches
	Retries() int64   // writes that failed and were retried
	Written() int64   // ops acknowledged
	Coalesced() int64 // ops folded into another op on the same key
}

// Processor is the feature sink's goka callback side.
type Processor struct {
	cfg    Config
	dead   DeadLetters
	dec    *avro.Decoder[avro.EnrichedRecord]
	w      Store
	log    *slog.Logger
	runCtx context.Context
	Stats  Stats
	// Metrics records records in, applied (out) and dead-lettered (stage sink-features); set
	// it before the processor runs. Nil records nothing.
	Metrics *ops.Stage
	m       *metrics

	fold  *folder  // sends the aggregates' deltas (fold.go); set by Run
	ents  *entries // decoded table entries (entries.go)
	seqMu sync.Mutex
	seqs  map[int32]*sequencer // per enriched partition: records complete in order
}

// NewProcessor returns the processor; runCtx bounds decode retries.
func NewProcessor(runCtx context.Context, cfg Config, reg avro.Registry, dead DeadLetters, w Store, log *slog.Logger) (*Processor, error) {
	cfg = cfg.withDefaults()
	dec, err := avro.NewDecoder[avro.EnrichedRecord](reg, avro.EnrichedSchema, avro.DecoderConfig{})
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Processor{cfg: cfg, dead: dead, dec: dec, w: w, log: log, runCtx: runCtx, ents: newEntries()}, nil
}

// StorageBuilder wraps the group table's storage builder (goka.WithStorageBuilder) so that
// the processor decodes each table entry once and then keeps it (entries.go). Without it, the
// processor reads entries through goka's ctx.Value.
func (p *Processor) StorageBuilder(inner storage.Builder) storage.Builder {
	return p.ents.Storage(inner)
}

// RedisRetries is how many Redis pipelines failed and were retried so far.
func (p *Processor) RedisRetries() int64 { return p.w.Retries() }

// RedisWritten is how many ops Redis acknowledged so far.
func (p *Processor) RedisWritten() int64 { return p.w.Written() }

// Pending is how many records' Redis writes are not acknowledged yet (their offsets are not
// committed); at most PendingCap.
func (p *Processor) Pending() int64 { return p.w.Pending() }

// PendingCap is the most records the processor holds uncommitted: the writer's Cap.
func (p *Processor) PendingCap() int64 { return p.w.Cap() }

// Graph is the goka group: the enriched topic in, deltas through the loopback (sent by the
// folder, read by goka), one table.
func (p *Processor) Graph() *goka.GroupGraph {
	return goka.DefineGroup(goka.Group(p.cfg.Group),
		goka.Input(goka.Stream(p.cfg.EnrichedTopic), new(codec.Bytes), p.consume),
		goka.Loop(DeltaCodec{}, p.consumeDelta),
		goka.Persist(EntryCodec{}),
		goka.Visitor(visitSweep, p.sweep),
	)
}

const visitSweep = "sweep"

// sweep deletes a request entry not seen for RequestWindow; tenant, user and model entries stay.
func (p *Processor) sweep(gctx goka.Context, _ any) {
	e, ok := gctx.Value().(*Entry)
	if !ok || e == nil || e.Request == nil {
		return
	}
	if time.Since(e.Request.Seen) > p.cfg.RequestWindow {
		gctx.Delete()
		p.Stats.Swept.Add(1)
	}
}

// submit hands ops to the writer and commits the record once they are written. Every record
// goes through here, even one that writes nothing (ops nil): goka marks a partition's offset
// forward when a record is done, so a record done ahead of an earlier one still waiting for
// Redis would commit past it. The writer finishes jobs in submission order. (Loopback records;
// enriched records go through record, in their partition's sequencer.)
func (p *Processor) submit(gctx goka.Context, ops []feast.Op) {
	done := gctx.DeferCommit()
	if err := p.w.Submit(p.runCtx, ops, done); err != nil {
		done(err)
	}
}

// sequencer is the enriched partition's.
func (p *Processor) sequencer(part int32) *sequencer {
	p.seqMu.Lock()
	defer p.seqMu.Unlock()
	if p.seqs == nil {
		p.seqs = map[int32]*sequencer{}
	}
	s := p.seqs[part]
	if s == nil {
		s = &sequencer{}
		p.seqs[part] = s
	}
	return s
}

// record commits an enriched record once ops are written and its deltas (none: nil) are sent,
// after every record before it in its partition (fold.go).
func (p *Processor) record(gctx goka.Context, ops []feast.Op, keys []string, deltas map[string]*Delta, onWritten func()) {
	parts := 1
	if len(keys) > 0 {
		parts = 2
	}
	t := p.sequencer(gctx.Partition()).ticket(gctx.DeferCommit(), parts)
	if len(keys) > 0 {
		p.fold.add(gctx.Partition(), keys, deltas, t)
	}
	if err := p.w.Submit(p.runCtx, ops, func(err error) {
		if err == nil && onWritten != nil {
			onWritten()
		}
		t.finish(err)
	}); err != nil {
		t.finish(err)
	}
}

func (p *Processor) consume(gctx goka.Context, msg any) {
	p.Metrics.In(1)
	raw, _ := msg.([]byte)
	if raw == nil {
		p.record(gctx, nil, nil, nil, nil) // tombstone: nothing to apply
		return
	}
	var rec avro.EnrichedRecord
	err := retry.Do(p.runCtx, outagePolicy, avro.IsRetryable, func(err error, _ int, wait time.Duration) {
		p.log.Warn("registry unavailable; retrying", "err", err, "backoff", wait)
	}, func() (err error) {
		rec, _, err = p.dec.Decode(p.runCtx, raw)
		return err
	})
	switch {
	case err == nil:
	case !avro.IsRetryable(err):
		if p.deadLetter(gctx, raw, err) {
			p.record(gctx, nil, nil, nil, nil) // committed in order behind the records before it
		}
		return
	default: // the processor is stopping; goka's Fail returns once its own context ended
		gctx.Fail(p.runCtx.Err())
		return
	}
	e := entry(gctx)
	st, deltas := ApplyRecord(e.Request, &rec, Pos{Partition: gctx.Partition(), Offset: gctx.Offset()})
	st.Seen = time.Now().UTC()
	gctx.SetValue(&Entry{Request: st})
	keys := make([]string, 0, len(deltas))
	for k := range deltas {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	p.Stats.Records.Add(1)
	p.record(gctx, []feast.Op{RequestOp(p.cfg.Project, gctx.Key(), st, p.cfg.RequestTTL)}, keys, deltas, func() { p.Metrics.Out(1) })
}

// deadLetter writes an undecodable enriched record to the DLQ, retrying until the brokers
// acknowledge it; the record's offset is committed only after that. False: the processor
// stopped first, and the record stays uncommitted.
func (p *Processor) deadLetter(gctx goka.Context, raw []byte, cause error) bool {
	var headers []kgo.RecordHeader
	for k, v := range gctx.Headers() {
		headers = append(headers, kgo.RecordHeader{Key: k, Value: v})
	}
	sort.Slice(headers, func(i, j int) bool { return headers[i].Key < headers[j].Key })
	o := dlq.Origin{Topic: string(gctx.Topic()), Partition: gctx.Partition(), Offset: gctx.Offset(), Timestamp: gctx.Timestamp(),
		Key: []byte(gctx.Key()), Value: raw, Headers: headers}
	err := retry.Do(p.runCtx, outagePolicy, nil, func(err error, _ int, wait time.Duration) {
		p.Metrics.DLQWriteError()
		p.log.Warn("DLQ write failed; retrying", "err", err, "backoff", wait)
	}, func() error { return p.dead.Write(p.runCtx, o, cause) })
	if err != nil { // the processor is stopping
		gctx.Fail(p.runCtx.Err())
		return false
	}
	p.Stats.Undecoded.Add(1)
	p.Metrics.DLQ(dlq.ClassOf(cause), 1)
	p.log.Warn("undecodable enriched record dead-lettered", "partition", o.Partition, "offset", o.Offset, "class", dlq.ClassOf(cause))
	return true
}

// outagePolicy is how the processor waits out a registry or Kafka outage: 100ms doubling up to
// 5s, jittered, until it ends or the processor stops.
var outagePolicy = retry.Policy{Min: 100 * time.Millisecond, Max: 5 * time.Second}

// consumeDelta applies a loopback message, a DeltaBatch for one aggregate key, delta by
// delta, and writes the aggregate's row once.
func (p *Processor) consumeDelta(gctx goka.Context, msg any) {
	ds, _ := msg.(DeltaBatch)
	if len(ds) == 0 {
		p.submit(gctx, nil)
		return
	}
	h, err := p.ents.load(gctx)
	if err != nil {
		gctx.Fail(err)
		return
	}
	kind, id := splitKey(gctx.Key())
	var tenant, user string
	switch kind {
	case "tenant", "model":
	case "user":
		var ok bool
		if tenant, user, ok = splitUser(id); !ok {
			p.log.Error("delta for a malformed user key", "key", gctx.Key())
			p.submit(gctx, nil)
			return
		}
	default:
		p.log.Error("delta for an unknown key kind", "key", gctx.Key())
		p.submit(gctx, nil)
		return
	}
	p.applyDeltas(gctx, h, kind, ds)
	p.ents.keep(gctx, h)
	e := h.e
	var op feast.Op
	switch kind {
	case "tenant":
		op = TenantOp(p.cfg.Project, id, e.Tenant)
	case "user":
		op = UserOp(p.cfg.Project, tenant, user, e.User)
	case "model":
		op = ModelOp(p.cfg.Project, id, e.Model)
	}
	// Written even when unchanged: a crash may have come between the table update and Redis.
	// The entry stays in memory and the next batch changes it: the row is built under its lock.
	p.submit(gctx, []feast.Op{guarded(op, &h.mu)})
}

// applyDeltas applies a batch to the held entry and stores it once if it changed, holding the
// entry's lock (released even when goka's SetValue fails the callback).
func (p *Processor) applyDeltas(gctx goka.Context, h *held, kind string, ds DeltaBatch) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.e
	applied := 0
	for _, d := range ds {
		var changed bool
		switch kind {
		case "tenant":
			e.Tenant, changed = ApplyTenant(e.Tenant, d)
		case "user":
			e.User, changed = ApplyUser(e.User, d)
		case "model":
			e.Model, changed = ApplyModel(e.Model, d)
		}
		if changed {
			applied++
			p.Stats.Deltas.Add(1)
		} else {
			p.Stats.Duplicates.Add(1)
		}
		p.m.delta(changed)
	}
	if applied > 0 {
		gctx.SetValue(e)
	}
}

// guarded is op with its row built under mu, the lock of the entry it reads (held).
func guarded(op feast.Op, mu *sync.Mutex) feast.Op {
	build := op.Build
	op.Build = func(dst []any) []any {
		mu.Lock()
		defer mu.Unlock()
		return build(dst)
	}
	return op
}

// RunConfig is what Run needs besides Config.
type RunConfig struct {
	Kafka    kafka.Conn
	Registry avro.Registry
	// Store receives the feature rows (sinks/redis.Writer); Run runs it.
	Store Store
	// StorageDir holds goka's local table storage. Default <temp>/backflow-goka-features.
	StorageDir string
	// Standby keeps a warm copy of every table partition this instance does not own (goka's
	// hot standby, kafka.Tables). Default false.
	Standby bool
	Logger  *slog.Logger
	// OnReady, if set, is called once goka is consuming.
	OnReady func(*Processor)
	// Metrics is the stage's handle on the process's metrics (ops.Metrics.Stage); nil
	// records nothing.
	Metrics *ops.Stage
	// Waiting, if set, is told why the stage cannot start yet while it waits for its source
	// topic or for Kafka (see kafka.SourceWait).
	Waiting func(error)
}

// Prepare waits until the enriched topic exists (kafka.AwaitSources: for as long as ctx
// allows; it is ingest's output, and make demo starts every stage at once) and creates the
// loopback, DLQ and table topics with its partition count. It returns that count.
func Prepare(ctx context.Context, kc kafka.Conn, cfg Config) (int, error) {
	return prepare(ctx, kc, cfg, kafka.SourceWait{})
}

func prepare(ctx context.Context, kc kafka.Conn, cfg Config, w kafka.SourceWait) (int, error) {
	cfg = cfg.withDefaults()
	cl, err := kc.NewClient()
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	td, err := kafka.AwaitSources(ctx, cl, w, kafka.Source{Topic: cfg.EnrichedTopic, Key: "sink_features.enriched_topic"})
	if err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		return 0, fmt.Errorf("features: source topic: %w", err)
	}
	n := len(td[cfg.EnrichedTopic].Partitions)
	repl := kc.TableReplication
	if repl < 1 {
		repl = 1
	}
	// The table's changelog too, which goka would create itself and then at once ask each
	// partition's leader for offsets: on a cluster of several brokers that leader may not be
	// known yet (NOT_LEADER_FOR_PARTITION), and the stage stopped at start-up. EnsureTopics
	// waits until every partition of a topic it created has a leader.
	if err := kafka.EnsureTopics(ctx, cl,
		kafka.TopicSpec{Name: cfg.LoopTopic(), Partitions: int32(n), Replication: int16(repl)},
		kafka.TopicSpec{Name: cfg.DLQTopic, Partitions: int32(n), Replication: int16(repl)},
		kafka.TopicSpec{Name: cfg.Group + "-table", Partitions: int32(n), Replication: int16(repl), Configs: map[string]string{"cleanup.policy": "compact"}},
	); err != nil {
		return 0, fmt.Errorf("features: %w", err)
	}
	return n, nil
}

// Run runs the feature sink until ctx ends: the goka group and the Redis writer. Records in
// flight at the end stay uncommitted and are redelivered to the next run.
func Run(ctx context.Context, cfg Config, rc RunConfig) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if rc.Store == nil {
		return errors.New("features: RunConfig.Store is nil")
	}
	cfg = cfg.withDefaults()
	log := rc.Logger
	if log == nil {
		log = slog.Default()
	}
	partitions, err := prepare(ctx, rc.Kafka, cfg, kafka.SourceWait{Log: log.With("stage", "sink-features"), Waiting: rc.Waiting})
	if err != nil && ctx.Err() != nil {
		return nil // stopped while waiting for the source topics: a clean stop
	}
	if err != nil {
		return err
	}
	life := kafka.NewGokaLife(ctx)
	defer life.Close()
	runCtx := life.Ctx
	w := rc.Store
	wdone := make(chan error, 1)
	go func() { wdone <- w.Run(runCtx) }()
	cl, err := rc.Kafka.NewClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	dw, err := dlq.NewWriter(cl, dlq.Config{Topic: cfg.DLQTopic, Stage: "sink-features"})
	if err != nil {
		return err
	}
	p, err := NewProcessor(runCtx, cfg, rc.Registry, dw, w, log)
	if err != nil {
		return err
	}
	p.Metrics, p.m = rc.Metrics, newMetrics(rc.Metrics, cfg.Group)
	// The folder writes the loopback topic (goka only reads it) with a goka producer of its own.
	prod, err := rc.Kafka.GokaProducerBuilder()(rc.Kafka.Brokers, "", kafka.Murmur2Hasher)
	if err != nil {
		return err
	}
	defer prod.Close()
	p.fold = newFolder(prod, cfg.LoopTopic(), cfg.FoldInterval, cfg.FoldRecords)
	go p.fold.run(runCtx)
	cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
	kafka.FlagTableChangelog(cctx, cl, rc.Metrics.Registerer(), log, cfg.Group+"-table")
	ccancel()
	dir := rc.StorageDir
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "backflow-goka-features")
	}
	tables := kafka.NewTables(Storage(dir, kafka.GokaStorage(dir), requestStoreWindow(cfg)), rc.Standby)
	defer func() {
		if err := tables.Close(); err != nil {
			log.Warn("sink-features: close table storage", "error", err)
		}
	}()
	opts := append(rc.Kafka.ProcessorOptions(runCtx),
		goka.WithHasher(kafka.Murmur2Hasher),
		goka.WithLogger(kafka.GokaLogger(log)),
	)
	opts = append(opts, tables.Options(p.StorageBuilder)...)
	opts = append(opts, goka.WithUpdateCallback(Update(requestStoreWindow(cfg), time.Now)))
	proc, err := kafka.NewGokaProcessor(runCtx, rc.Kafka.Brokers, p.Graph(), opts...)
	if err != nil {
		return fmt.Errorf("features: processor: %w", err)
	}
	log.Info("sink-features starting", "group", cfg.Group, "input", cfg.EnrichedTopic, "partitions", partitions, "project", cfg.Project,
		"instance_id", rc.Kafka.InstanceID, "standby", rc.Standby)
	err = life.Run(proc, kafka.GokaRun{Name: "sink-features", Log: log, Visitor: visitSweep, Every: cfg.SweepEvery,
		Metrics: rc.Metrics, Waiting: rc.Waiting,
		// Records whose deltas wait in the folder stay uncommitted; goka's shutdown waits for them.
		OnStopping: func() { p.fold.close(errFolderClosed) },
		OnReady: func() {
			if rc.OnReady != nil {
				rc.OnReady(p)
			}
		}})
	<-wdone
	log.Info("sink-features stopped", "records", p.Stats.Records.Load(), "deltas", p.Stats.Deltas.Load(),
		"resent_deltas", p.Stats.Duplicates.Load(), "dead_lettered", p.Stats.Undecoded.Load(), "redis_ops", w.Written(), "redis_coalesced", w.Coalesced(), "redis_retries", w.Retries())
	if err != nil && ctx.Err() != nil {
		// A requested stop: what goka reports while shutting down (cancelled contexts, the
		// writer stopping under in-flight records) is not a failure; records not written stay
		// uncommitted and are redelivered.
		log.Info("sink-features shutdown", "detail", err)
		return nil
	}
	return err
}
