package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/codec"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/dlq"
	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/internal/retry"
)

// Producer sends records asynchronously; *kgo.Client implements it. promise runs once the
// brokers acknowledged the record (err nil) or gave up on it.
type Producer interface {
	Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error))
}

// DeadLetters writes bad records to the DLQ and returns once they are acknowledged;
// *dlq.Writer implements it.
type DeadLetters interface {
	Write(ctx context.Context, o dlq.Origin, err error) error
}

// Headers of records forwarded through the loopback topic: where the record was first written.
const (
	headerFwdTopic     = "backflow.forwarded.topic"
	headerFwdPartition = "backflow.forwarded.partition"
	headerFwdOffset    = "backflow.forwarded.offset"
)

// Stats counts what the processor did; read with Snapshot.
type Stats struct {
	Read, Forwarded, Claimed, Redelivered, Duplicates, DeadLettered, Emitted, Unmoderated atomic.Int64
	// ModerationTexts counts the records' texts put in moderation batches; ModerationItems the
	// items sent for them (a text repeated in one batch is sent once).
	ModerationTexts, ModerationItems atomic.Int64
}

// StatsSnapshot is a copy of Stats.
type StatsSnapshot struct {
	Read, Forwarded, Claimed, Redelivered, Duplicates, DeadLettered, Emitted, Unmoderated int64
	ModerationTexts, ModerationItems                                                      int64
}

// Snapshot copies the counters.
func (s *Stats) Snapshot() StatsSnapshot {
	return StatsSnapshot{s.Read.Load(), s.Forwarded.Load(), s.Claimed.Load(), s.Redelivered.Load(),
		s.Duplicates.Load(), s.DeadLettered.Load(), s.Emitted.Load(), s.Unmoderated.Load(),
		s.ModerationTexts.Load(), s.ModerationItems.Load()}
}

// Processor is the ingest stage: it consumes the source topics (and its loopback), decodes,
// dedupes in its group table, moderates in batches and emits enriched records. Build it with
// NewProcessor, run its Graph with goka, and call Close when goka's Run returned.
//
// Per record, in the partition's goroutine: the record takes a place in its partition's
// commit queue (blocking at MaxInFlight); a record on a partition that is not its key's home
// partition is forwarded through the loopback topic (so all records of a requestId meet in one
// table partition); it is decoded (registry outages retried, bad records dead-lettered),
// deduplicated, and handed to the partition's batcher. The batcher moderates and emits. A
// record that does not decode is dead-lettered in the background. A record's commit is
// released, in order, once it was emitted, dropped as a duplicate, or dead-lettered, and
// acknowledged.
type Processor struct {
	cfg        Config
	loopTopic  string // cfg.LoopTopic(), which builds the name anew on each call
	partitions int    // of the source topics (co-partitioned)
	epoch      int32
	infDec     *avro.Decoder[avro.InferenceResult]
	gwDec      *avro.Decoder[avro.GatewayLog]
	enc        *avro.Encoder[avro.EnrichedRecord]
	prod       Producer
	dead       DeadLetters
	mod        *moderator
	fail       func(error) // Deps.Fail
	log        *slog.Logger
	metrics    *Metrics
	now        func() time.Time

	runCtx   context.Context
	queues   *commitQueues
	claims   *claims
	mu       sync.Mutex
	batchers map[int32]*batcher
	// deadQueues feed each partition's dead-letter writer (deadLetterAsync).
	deadQueues map[int32]chan deadJob
	wg         sync.WaitGroup // batchers and dead-letter writers

	Stats Stats
}

// Deps are the collaborators of a Processor.
type Deps struct {
	Registry       avro.Registry
	Producer       Producer
	DeadLetters    DeadLetters
	SensitiveWords SensitiveWords
	Logger         *slog.Logger // default: slog.Default()
	// Fail stops the stage with err: called once a record can never be processed for a reason
	// that is not the record's fault (our own enriched record does not encode), so the stage
	// exits with an error instead of holding the partition's commits forever. Default: log only.
	Fail func(err error)
	// Metrics records what the processor does (NewMetrics); nil records nothing.
	Metrics *Metrics
}

// NewProcessor builds the processor for source topics with the given partition count, in
// replay epoch epoch. Work stops when ctx ends.
func NewProcessor(ctx context.Context, cfg Config, partitions int, epoch int32, d Deps) (*Processor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if partitions < 1 {
		return nil, fmt.Errorf("ingest: %d source partitions", partitions)
	}
	if d.Registry == nil || d.Producer == nil || d.DeadLetters == nil || d.SensitiveWords == nil {
		return nil, errors.New("ingest: registry, producer, dead letters and checker are required")
	}
	log := d.Logger
	if log == nil {
		log = slog.Default()
	}
	p := &Processor{cfg: cfg, partitions: partitions, epoch: epoch, prod: d.Producer, dead: d.DeadLetters,
		fail: d.Fail, log: log.With("stage", "ingest"), now: time.Now, runCtx: ctx, queues: newCommitQueues(cfg.MaxInFlight),
		batchers: map[int32]*batcher{}, deadQueues: map[int32]chan deadJob{}, metrics: d.Metrics, claims: newClaims(cfg.TableTopic()),
		loopTopic: cfg.LoopTopic()}
	var err error
	if p.infDec, err = avro.NewDecoder[avro.InferenceResult](d.Registry, avro.InferenceResultSchema, cfg.Decoder); err != nil {
		return nil, err
	}
	if p.gwDec, err = avro.NewDecoder[avro.GatewayLog](d.Registry, avro.GatewayLogSchema, cfg.Decoder); err != nil {
		return nil, err
	}
	if p.enc, err = avro.NewEncoder[avro.EnrichedRecord](d.Registry, avro.EnrichedSchema, avro.TopicName.Subject(cfg.EnrichedTopic, avro.EnrichedSchema)); err != nil {
		return nil, err
	}
	p.mod = newModerator(d.SensitiveWords, cfg, p.log, d.Metrics)
	return p, nil
}

// Graph is the group's topology: both source topics and the loopback in, the dedupe table
// persisted. Expired claims are dropped by the table's storage (Run: claimstore), a time
// segment at a time, not visited key by key. Enriched records and DLQ entries are produced by the
// processor's own producer (goka's Emit cannot be called after a callback returns, and
// batching needs that), so they do not appear as goka outputs.
func (p *Processor) Graph() *goka.GroupGraph {
	return goka.DefineGroup(goka.Group(p.cfg.Group),
		goka.Input(goka.Stream(p.cfg.InferenceTopic), new(codec.Bytes), p.consume),
		goka.Input(goka.Stream(p.cfg.GatewayTopic), new(codec.Bytes), p.consume),
		goka.Loop(new(codec.Bytes), p.consume),
		goka.Persist(StateCodec{}),
	)
}

// ProducerOption is the goka option that lets the processor see when each dedupe claim is
// durable (see claims); inner is the producer builder goka would use otherwise. Pass it after
// the cluster's options. Without it, enriched records do not wait for their claims.
func (p *Processor) ProducerOption(inner goka.ProducerBuilder) goka.ProcessorOption {
	return p.claims.Option(inner)
}

// GokaOptions are the processor options the graph needs on top of the cluster's: Kafka's
// murmur2 partitioning (so table and loopback agree with ordinary producers on every key's
// partition) and delivery of null values (a tombstone on a source topic is bad input).
func GokaOptions() []goka.ProcessorOption {
	return []goka.ProcessorOption{goka.WithHasher(kafka.Murmur2Hasher), goka.WithNilHandling(goka.NilProcess)}
}

// job is a record on its way through moderation and emission.
type job struct {
	origin   dlq.Origin // where the record was first written, raw key/value/headers
	schemaID int
	enriched avro.EnrichedRecord
	text     string
	pc       *pendingCommit
	// claim is the table write this record claimed its requestId with (nil: none, or no
	// watching producer); the enriched record is produced only once it is acknowledged.
	claim *goka.Promise
}

func (p *Processor) consume(gctx goka.Context, msg any) {
	raw, _ := msg.([]byte)
	p.Stats.Read.Add(1)
	if string(gctx.Topic()) != p.loopTopic {
		p.metrics.st().In(1)
	}
	pc, err := p.queues.get(string(gctx.Topic()), gctx.Partition()).Add(p.runCtx, gctx.DeferCommit())
	if err != nil {
		return // stopping: the record stays uncommitted
	}
	origin := dlq.Origin{Topic: string(gctx.Topic()), Partition: gctx.Partition(), Offset: gctx.Offset(),
		Timestamp: gctx.Timestamp(), Key: []byte(gctx.Key()), Value: raw}
	for k, v := range gctx.Headers() {
		origin.Headers = append(origin.Headers, kgo.RecordHeader{Key: k, Value: v})
	}
	if origin.Topic == p.loopTopic {
		if fwd, ok := forwardedFrom(gctx.Headers()); ok {
			origin.Topic, origin.Partition, origin.Offset = fwd.Topic, fwd.Partition, fwd.Offset
		}
	} else if home := kafka.KeyPartition(origin.Key, p.partitions); home != gctx.Partition() {
		p.forward(origin, pc)
		return
	}
	p.process(gctx, origin, pc)
}

// forward sends a record that arrived on a foreign partition to its key's home partition
// through the loopback topic, so dedupe sees every record of a requestId in one place.
func (p *Processor) forward(o dlq.Origin, pc *pendingCommit) {
	r := &kgo.Record{Topic: p.loopTopic, Key: o.Key, Value: o.Value, Headers: append(append([]kgo.RecordHeader{}, o.Headers...),
		kgo.RecordHeader{Key: headerFwdTopic, Value: []byte(o.Topic)},
		kgo.RecordHeader{Key: headerFwdPartition, Value: []byte(strconv.Itoa(int(o.Partition)))},
		kgo.RecordHeader{Key: headerFwdOffset, Value: []byte(strconv.FormatInt(o.Offset, 10))})}
	p.produce(r, func() {
		p.Stats.Forwarded.Add(1)
		p.metrics.forward()
		pc.Done()
	})
}

func forwardedFrom(h goka.Headers) (Origin, bool) {
	part, err1 := strconv.Atoi(string(h[headerFwdPartition]))
	off, err2 := strconv.ParseInt(string(h[headerFwdOffset]), 10, 64)
	t := string(h[headerFwdTopic])
	if t == "" || err1 != nil || err2 != nil {
		return Origin{}, false
	}
	return Origin{Topic: t, Partition: int32(part), Offset: off}, true
}

// process decodes, dedupes and queues a record of its key's home partition.
func (p *Processor) process(gctx goka.Context, o dlq.Origin, pc *pendingCommit) {
	j := &job{origin: o, pc: pc}
	slot := o.Topic
	err := retry.Do(p.runCtx, p.policy(), avro.IsRetryable, func(err error, _ int, _ time.Duration) {
		p.log.Warn("schema registry unavailable; retrying", "topic", o.Topic, "partition", o.Partition, "offset", o.Offset, "error", err)
	}, func() error {
		var derr error
		switch o.Topic {
		case p.cfg.InferenceTopic:
			var v avro.InferenceResult
			v, j.schemaID, derr = p.infDec.Decode(p.runCtx, o.Value)
			j.enriched.Inference, j.text = &v, v.OutputText
		default:
			var v avro.GatewayLog
			v, j.schemaID, derr = p.gwDec.Decode(p.runCtx, o.Value)
			j.enriched.Gateway, j.text = &v, v.PromptText+v.ResponseText
			slot = o.Topic + "/" + v.Phase
		}
		return derr
	})
	if p.runCtx.Err() != nil {
		return
	}
	if err != nil {
		p.deadLetterAsync(gctx.Partition(), o, err, pc)
		return
	}
	var st *State
	if v := gctx.Value(); v != nil {
		st = v.(*State)
	}
	decision, next := Decide(st, slot, Origin{o.Topic, o.Partition, o.Offset}, p.epoch, p.now(), p.cfg.DedupeWindow)
	switch decision {
	case DecideDuplicate:
		p.Stats.Duplicates.Add(1)
		p.metrics.duplicate()
		pc.Done()
		return
	case DecideClaim:
		gctx.SetValue(next)
		j.claim = p.claims.take(gctx.Key())
		p.Stats.Claimed.Add(1)
	case DecideRedelivery:
		// The claimer read again. Its claim is written again (moved to this epoch when it was
		// re-read in a newer one): the claim may be only in the local store, its changelog write
		// lost in the crash that caused the redelivery, and the record must not go out again
		// before the changelog has it.
		if next == nil {
			next = st
		}
		gctx.SetValue(next)
		j.claim = p.claims.take(gctx.Key())
		p.Stats.Redelivered.Add(1)
	}
	e := &j.enriched
	e.RequestID, e.SourceTopic, e.SourcePartition, e.SourceOffset = gctx.Key(), o.Topic, o.Partition, o.Offset
	e.SchemaID, e.Epoch = int32(j.schemaID), p.epoch
	if j.text == "" {
		p.emit(j, outcome{})
		return
	}
	p.batcherFor(gctx.Partition()).add(j)
}

// emit encodes and produces the enriched record once its claim is durable; the record's commit
// is released once the brokers acknowledged it.
func (p *Processor) emit(j *job, o outcome) {
	j.enriched.Moderation = o.verdict()
	j.enriched.IngestTime = p.now().UTC().Truncate(time.Millisecond)
	if o.unavailable {
		p.Stats.Unmoderated.Add(1)
	}
	var value []byte
	err := retry.Do(p.runCtx, p.policy(), avro.IsRetryable, func(err error, _ int, _ time.Duration) {
		p.log.Warn("schema registry unavailable while encoding; retrying", "error", err)
	}, func() (err error) {
		value, err = p.enc.Encode(p.runCtx, j.enriched)
		return err
	})
	if err != nil {
		if p.runCtx.Err() == nil {
			// Our own record does not encode, or the registry refuses its schema: not the data's
			// fault, so no DLQ. Stop loudly; the record stays uncommitted for the next run.
			p.log.Error("cannot encode enriched record; stopping", "requestId", j.enriched.RequestID, "error", err)
			if p.fail != nil {
				p.fail(fmt.Errorf("ingest: encode enriched record: %w", err))
			}
		}
		return
	}
	r := &kgo.Record{Topic: p.cfg.EnrichedTopic, Key: j.origin.Key, Value: value}
	send := func() {
		p.produce(r, func() {
			p.Stats.Emitted.Add(1)
			p.metrics.st().Out(1)
			j.pc.Done()
		})
	}
	if j.claim == nil {
		send()
		return
	}
	// Usually acknowledged already (moderation takes longer than the table write); if not, the
	// record goes out from goka's producer callback once it is.
	j.claim.Then(func(err error) {
		if err != nil {
			// goka fails the processor for it; the record stays uncommitted and is read again.
			p.log.Warn("dedupe claim not written; the record is not emitted", "requestId", j.enriched.RequestID, "error", err)
			return
		}
		send()
	})
}

// outagePolicy is how ingest retries an outage (registry, moderation, Kafka): BackoffMin
// doubling up to BackoffMax, jittered, until it ends or the processor stops.
func outagePolicy(cfg Config) retry.Policy {
	return retry.Policy{Min: cfg.BackoffMin, Max: cfg.BackoffMax}
}

func (p *Processor) policy() retry.Policy { return outagePolicy(p.cfg) }

// produce sends r and calls done once it is acknowledged, re-sending after failures (franz-go
// already retries what is retryable; what reaches us is retried with backoff until the
// processor stops).
func (p *Processor) produce(r *kgo.Record, done func()) {
	b := p.policy().Backoff()
	var promise func(*kgo.Record, error)
	promise = func(r *kgo.Record, err error) {
		if err == nil {
			done()
			return
		}
		if p.runCtx.Err() != nil {
			return
		}
		p.log.Warn("produce failed; retrying", "topic", r.Topic, "error", err)
		go func() {
			if b.Wait(p.runCtx) {
				p.prod.Produce(p.runCtx, r, promise)
			}
		}()
	}
	p.prod.Produce(p.runCtx, r, promise)
}

// deadLetter writes a bad record to the DLQ, retrying until it is acknowledged (never
// silent: the record's commit waits for it). It returns false only when the processor stops
// first: the record then stays uncommitted.
func (p *Processor) deadLetter(o dlq.Origin, cause error) bool {
	err := retry.Do(p.runCtx, p.policy(), nil, func(err error, _ int, _ time.Duration) {
		p.metrics.st().DLQWriteError()
		p.log.Warn("DLQ write failed; retrying", "topic", o.Topic, "offset", o.Offset, "error", err)
	}, func() error { return p.dead.Write(p.runCtx, o, cause) })
	if err == nil {
		p.Stats.DeadLettered.Add(1)
		p.metrics.st().DLQ(dlq.ClassOf(cause), 1)
	}
	return err == nil
}

// deadLetterAsync hands o to the partition's dead-letter writer, so a burst of poison does not
// hold the partition's goroutine one produce round trip per record. The writer writes the
// partition's entries one at a time, in the order they came, and releases each record's commit
// once its entry is written (in order, through the commit queue, as emits are). Its queue holds
// dlqQueue records; a full queue holds the partition back.
func (p *Processor) deadLetterAsync(partition int32, o dlq.Origin, cause error, pc *pendingCommit) {
	select {
	case p.deadWriterFor(partition) <- deadJob{origin: o, cause: cause, pc: pc}:
	case <-p.runCtx.Done(): // stopping: the record stays uncommitted
	}
}

// dlqQueue is how many bad records of one partition may wait for their DLQ write.
const dlqQueue = 256

// deadJob is a bad record waiting for its DLQ write.
type deadJob struct {
	origin dlq.Origin
	cause  error
	pc     *pendingCommit
}

// deadWriterFor returns the queue of the partition's dead-letter writer, starting it on first
// use.
func (p *Processor) deadWriterFor(partition int32) chan<- deadJob {
	p.mu.Lock()
	defer p.mu.Unlock()
	q, ok := p.deadQueues[partition]
	if !ok {
		q = make(chan deadJob, dlqQueue)
		p.deadQueues[partition] = q
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for {
				select {
				case j := <-q:
					if p.deadLetter(j.origin, j.cause) {
						j.pc.Done()
					}
				case <-p.runCtx.Done():
					return
				}
			}
		}()
	}
	return q
}

// Close releases every record still in flight uncommitted (they will be redelivered) and
// waits for the batchers. Call it after goka's Run returned, or concurrently once ctx ended.
func (p *Processor) Close() {
	p.queues.closeAll()
	p.wg.Wait()
}

// InFlight is the number of records read but not yet committed.
func (p *Processor) InFlight() int { return p.queues.InFlight() }
