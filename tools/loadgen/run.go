package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/time/rate"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/internal/retry"
)

// Stats summarises a run: what the brokers acknowledged, by kind.
type Stats struct {
	Requests       int
	Records        int            // acknowledged records, all kinds
	PerTopic       map[string]int // acknowledged records per topic
	Originals      int
	Duplicates     int
	CrossPartition int // duplicates sent to another partition than the key's
	Poison         map[PoisonKind]int
	Sensitive      int // records whose text has a planted dictionary word
	InferenceV1    int
	InferenceV2    int
	Failed         int // records the brokers did not acknowledge (not in the manifest)
	Elapsed        time.Duration
}

// Options are the run-time parts of a run that are not traffic shape.
type Options struct {
	// RunID prefixes every requestId, so runs never collide. Required.
	RunID string
	// Manifest receives the manifest; nil discards it.
	Manifest io.Writer
	// Progress, when set, is called after each request with the number of requests planned.
	Progress func(requests int)
}

// RegisterWait is the longest a run waits for the registry to take its schemas.
const RegisterWait = 2 * time.Minute

// ProducerOpts are the franz-go options Run needs on its client: it picks partitions itself
// (Kafka's murmur2 key hash, or another partition for cross-partition duplicates).
func ProducerOpts() []kgo.Opt {
	return []kgo.Opt{
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5 * time.Millisecond),
		kgo.ProducerBatchMaxBytes(1 << 20),
	}
}

// Run generates cfg's traffic and sends it with cl, which must be built with ProducerOpts. It
// returns when the generation limit is reached (or ctx ends) and every record sent is
// acknowledged or failed. The manifest lists exactly the acknowledged records. A ctx that
// ends stops generation early; Run still flushes and returns the stats with ctx's error.
func Run(ctx context.Context, cfg Config, cl *kgo.Client, reg avro.Registry, opts Options) (Stats, error) {
	if err := cfg.Validate(); err != nil {
		return Stats{}, err
	}
	cfg = cfg.withDefaults()
	gen, err := NewGenerator(cfg, opts.RunID, reg)
	if err != nil {
		return Stats{}, err
	}
	return run(ctx, gen, limits{requests: cfg.Requests, duration: cfg.Duration, rate: cfg.Rate}, cl, opts,
		Header{RunID: opts.RunID, Seed: cfg.Seed, InferenceTopic: cfg.InferenceTopic, GatewayTopic: cfg.GatewayTopic},
		cfg.InferenceTopic, cfg.GatewayTopic)
}

// planner plans the records to send, one request (or stream record) at a time: Generator,
// StreamGenerator.
type planner interface {
	// Register registers the schemas the run writes with, before anything is sent.
	Register(ctx context.Context) error
	Next(ctx context.Context) ([]Planned, error)
	Drain() []Planned
}

// limits are when a run stops: after requests (0: no count limit) or duration (0: none), sent
// at rate per second (0: flat out).
type limits struct {
	requests int
	duration time.Duration
	rate     float64
}

// run sends what gen plans to topics until lim is reached, and writes the manifest.
func run(ctx context.Context, gen planner, lim limits, cl *kgo.Client, opts Options, h Header, topics ...string) (Stats, error) {
	partitions, err := partitionCounts(ctx, cl, topics...)
	if err != nil {
		return Stats{}, err
	}
	// A registry that is overloaded or restarting as the run starts (an HTTP 5xx, a refused
	// connection) is waited for, up to RegisterWait, rather than failing the run.
	rctx, cancel := context.WithTimeout(ctx, RegisterWait)
	err = retry.Do(rctx, retry.Policy{Min: 200 * time.Millisecond, Max: 5 * time.Second}, avro.IsRetryable, nil,
		func() error { return gen.Register(rctx) })
	cancel()
	if err != nil {
		return Stats{}, fmt.Errorf("loadgen: register the schemas: %w", err)
	}
	out := opts.Manifest
	if out == nil {
		out = io.Discard
	}
	h.Started = time.Now().UTC()
	mw, err := newManifestWriter(out, h)
	if err != nil {
		return Stats{}, fmt.Errorf("loadgen: manifest: %w", err)
	}

	st := Stats{PerTopic: map[string]int{}, Poison: map[PoisonKind]int{}}
	var (
		mu       sync.Mutex
		firstErr error
		inflight sync.WaitGroup
	)
	hashers := map[string]kgo.TopicPartitioner{}
	for t := range partitions {
		hashers[t] = kgo.StickyKeyPartitioner(nil).ForTopic(t)
	}
	send := func(p Planned) {
		n := partitions[p.Topic]
		rec := &kgo.Record{Topic: p.Topic, Key: p.Key, Value: p.Value}
		part := hashers[p.Topic].Partition(rec, n) // keyed: Kafka's murmur2, as Java producers do
		if p.OtherPartition && n > 1 {
			part = (part + 1) % n
		}
		rec.Partition = int32(part)
		inflight.Add(1)
		cl.Produce(context.WithoutCancel(ctx), rec, func(r *kgo.Record, err error) {
			defer inflight.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				st.Failed++
				if firstErr == nil {
					firstErr = fmt.Errorf("loadgen: produce to %s: %w", r.Topic, err)
				}
				return
			}
			e := Entry{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, RequestID: p.RequestID, Phase: p.Phase,
				Kind: p.Kind, SchemaVersion: p.SchemaVersion, SchemaID: p.SchemaID, Sensitive: p.Sensitive, CrossPartition: p.OtherPartition && n > 1}
			if p.Kind == KindPoison {
				e.Poison, e.Class = string(p.Poison), p.Poison.Class()
			}
			if err := mw.add(e); err != nil && firstErr == nil {
				firstErr = fmt.Errorf("loadgen: manifest: %w", err)
			}
			st.count(e)
		})
	}

	var limiter *rate.Limiter
	if lim.rate > 0 {
		limiter = rate.NewLimiter(rate.Limit(lim.rate), max(1, int(lim.rate/20)))
	}
	start := time.Now()
	var deadline time.Time
	if lim.duration > 0 {
		deadline = start.Add(lim.duration)
	}
	var runErr error
	for lim.requests == 0 || st.Requests < lim.requests {
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			break
		}
		if err := ctx.Err(); err != nil {
			runErr = err
			break
		}
		if limiter != nil {
			if err := limiter.Wait(ctx); err != nil {
				runErr = ctx.Err()
				break
			}
		}
		planned, err := gen.Next(ctx)
		if err != nil {
			runErr = fmt.Errorf("loadgen: %w", err)
			break
		}
		for _, p := range planned {
			send(p)
		}
		st.Requests++
		if opts.Progress != nil {
			opts.Progress(st.Requests)
		}
	}
	if runErr == nil || errors.Is(runErr, context.Canceled) || errors.Is(runErr, context.DeadlineExceeded) {
		for _, p := range gen.Drain() {
			send(p)
		}
	}
	inflight.Wait()
	st.Elapsed = time.Since(start)
	mu.Lock()
	defer mu.Unlock()
	if err := mw.flush(); err != nil && firstErr == nil {
		firstErr = fmt.Errorf("loadgen: manifest: %w", err)
	}
	return st, errors.Join(runErr, firstErr)
}

func (st *Stats) count(e Entry) {
	st.Records++
	st.PerTopic[e.Topic]++
	switch e.Kind {
	case KindOriginal:
		st.Originals++
	case KindDuplicate:
		st.Duplicates++
		if e.CrossPartition {
			st.CrossPartition++
		}
	case KindPoison:
		st.Poison[PoisonKind(e.Poison)]++
	}
	if e.Sensitive {
		st.Sensitive++
	}
	if e.Kind == KindOriginal && e.Phase == "" && e.SchemaVersion > 0 {
		if e.SchemaVersion == 1 {
			st.InferenceV1++
		} else {
			st.InferenceV2++
		}
	}
}

// PoisonTotal is the number of poison records acknowledged.
func (st Stats) PoisonTotal() int {
	n := 0
	for _, v := range st.Poison {
		n += v
	}
	return n
}

// String is a one-paragraph summary for people.
func (st Stats) String() string {
	s := fmt.Sprintf("%d requests → %d records in %s (%.0f records/s): %d originals, %d duplicates (%d cross-partition), %d poison",
		st.Requests, st.Records, st.Elapsed.Round(time.Millisecond), float64(st.Records)/max(st.Elapsed.Seconds(), 1e-9),
		st.Originals, st.Duplicates, st.CrossPartition, st.PoisonTotal())
	if len(st.Poison) > 0 {
		s += " ("
		for i, k := range slices.Sorted(maps.Keys(st.Poison)) {
			if i > 0 {
				s += ", "
			}
			s += fmt.Sprintf("%s %d", k, st.Poison[k])
		}
		s += ")"
	}
	s += fmt.Sprintf("; inference v1/v2 %d/%d; %d with planted words", st.InferenceV1, st.InferenceV2, st.Sensitive)
	if st.Failed > 0 {
		s += fmt.Sprintf("; %d NOT acknowledged", st.Failed)
	}
	return s
}

// missingTopicGrace is how long partitionCounts looks again for a topic missing from the
// metadata: one created a moment ago (EnsureTopics, --create-topics) can take seconds to appear
// on a loaded machine.
const missingTopicGrace = 5 * time.Second

// partitionCounts asks the cluster how many partitions each topic has; a missing topic is an
// error that says how to create it.
func partitionCounts(ctx context.Context, cl *kgo.Client, topics ...string) (map[string]int, error) {
	var td kadm.TopicDetails
	deadline := time.Now().Add(missingTopicGrace)
	for {
		var err error
		td, err = kadm.NewClient(cl).ListTopics(ctx, topics...)
		if err != nil {
			return nil, fmt.Errorf("loadgen: topic metadata: %w", err)
		}
		all := true
		for _, t := range topics {
			all = all && len(td[t].Partitions) > 0
		}
		if all || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	out := map[string]int{}
	for _, t := range topics {
		d, ok := td[t]
		if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			return nil, fmt.Errorf("loadgen: topic %q does not exist (create it, or pass --create-topics)", t)
		}
		if d.Err != nil {
			return nil, fmt.Errorf("loadgen: topic %q: %w", t, d.Err)
		}
		out[t] = len(d.Partitions)
	}
	return out, nil
}

// EnsureTopics creates the topics that do not exist yet, with the given partitions and
// replication factor, and leaves existing ones as they are. It returns once the brokers list
// them all: a topic created a moment ago can be missing from the metadata for a while.
func EnsureTopics(ctx context.Context, cl *kgo.Client, partitions int32, replication int16, topics ...string) error {
	specs := make([]kafka.TopicSpec, len(topics))
	for i, t := range topics {
		specs[i] = kafka.TopicSpec{Name: t, Partitions: partitions, Replication: replication}
	}
	if err := kafka.EnsureTopics(ctx, cl, specs...); err != nil {
		return fmt.Errorf("loadgen: %w", err)
	}
	if err := kafka.WaitForTopics(ctx, cl, slog.New(slog.DiscardHandler), topics...); err != nil {
		return fmt.Errorf("loadgen: waiting for the created topics: %w", err)
	}
	return nil
}
