package ingest_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/dlq"
	"github.com/backflowhq/backflow/internal/moderation"
	"github.com/backflowhq/backflow/processors/ingest"
	"github.com/backflowhq/backflow/test/pipelinetest"
	"github.com/backflowhq/backflow/test/proc"
	"github.com/backflowhq/backflow/test/testenv"
	"github.com/backflowhq/backflow/tools/loadgen"
)

// stage is one test's private set of topics and group on the real stack.
type stage struct {
	*pipelinetest.Env
	t *testing.T
	// running yields the result of an in-process ingest.Run started by run, if any.
	running chan error
}

func newStage(t *testing.T, partitions int32) *stage {
	t.Helper()
	s := &stage{Env: pipelinetest.NewEnv(t, "it"), t: t}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s.SourceTopics(t, ctx, partitions)
	return s
}

// load sends traffic with loadgen and returns its manifest.
func (s *stage) load(cfg loadgen.Config) *loadgen.Manifest {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return s.Load(s.t, ctx, cfg)
}

// run starts ingest with checker until ctx ends. The returned channel yields Run's result;
// a Run that ends early fails the test at once instead of leaving collect to time out.
func (s *stage) run(ctx context.Context, checker ingest.SensitiveWords) <-chan error {
	done := make(chan error, 1)
	s.running = make(chan error, 1)
	go func() {
		err := ingest.Run(ctx, s.Ingest, ingest.RunConfig{Kafka: s.Kafka, Registry: s.Registry, SensitiveWords: checker,
			StorageDir: s.t.TempDir(), Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))})
		s.running <- err
		done <- err
	}()
	return done
}

type key struct{ topic, requestID, phase string }

// result is what landed: enriched records and DLQ entries by origin.
type result struct {
	enriched map[key][]avro.EnrichedRecord
	dlq      map[loadgen.Location][]dlq.Entry
	total    int
}

// collect reads the enriched and DLQ topics until want records arrived and nothing more came
// for quiet, or the deadline passed.
func (s *stage) collect(ctx context.Context, want int, quiet time.Duration) result {
	s.t.Helper()
	dec, _ := avro.NewDecoder[avro.EnrichedRecord](s.Registry, avro.EnrichedSchema, avro.DecoderConfig{})
	cl, err := s.Kafka.NewClient(kgo.ConsumeTopics(s.Ingest.EnrichedTopic, s.Ingest.DLQTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		s.t.Fatal(err)
	}
	defer cl.Close()
	res := result{enriched: map[key][]avro.EnrichedRecord{}, dlq: map[loadgen.Location][]dlq.Entry{}}
	last := time.Now()
	for {
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			s.t.Fatalf("timed out with %d of %d records", res.total, want)
		}
		select {
		case err := <-s.running:
			s.t.Fatalf("ingest stopped early with %d of %d records: %v", res.total, want, err)
		default:
		}
		fs.EachRecord(func(r *kgo.Record) {
			last = time.Now()
			res.total++
			if r.Topic == s.Ingest.DLQTopic {
				e, err := dlq.Decode(r)
				if err != nil {
					s.t.Fatalf("dlq record: %v", err)
				}
				loc := loadgen.Location{Topic: e.Origin.Topic, Partition: e.Origin.Partition, Offset: e.Origin.Offset}
				res.dlq[loc] = append(res.dlq[loc], e)
				return
			}
			e, _, err := dec.Decode(ctx, r.Value)
			if err != nil {
				s.t.Fatalf("enriched record: %v", err)
			}
			k := key{e.SourceTopic, e.RequestID, ""}
			if e.Gateway != nil {
				k.phase = e.Gateway.Phase
			}
			res.enriched[k] = append(res.enriched[k], e)
		})
		if res.total >= want && time.Since(last) > quiet {
			return res
		}
	}
}

// check compares what landed with the manifest: exactly one enriched record per valid
// (topic, requestId, phase) whose origin is a copy of it (the original or a duplicate, see the
// winner rule), more only as redeliveries of that same origin (allowRepeats), and exactly the
// poison records in the DLQ with their classes.
func (s *stage) check(m *loadgen.Manifest, res result, allowRepeats bool) {
	s.t.Helper()
	originals := map[key]loadgen.Entry{}
	copies := map[key]map[[2]int64]bool{} // partition/offset of the original and its duplicates
	poison := map[loadgen.Location]loadgen.Entry{}
	for _, e := range m.Entries {
		k := key{e.Topic, e.RequestID, e.Phase}
		switch e.Kind {
		case loadgen.KindOriginal, loadgen.KindDuplicate:
			if e.Kind == loadgen.KindOriginal {
				originals[k] = e
			}
			if copies[k] == nil {
				copies[k] = map[[2]int64]bool{}
			}
			copies[k][[2]int64{int64(e.Partition), e.Offset}] = true
		case loadgen.KindPoison:
			poison[loadgen.Location{Topic: e.Topic, Partition: e.Partition, Offset: e.Offset}] = e
		}
	}
	for k, recs := range res.enriched {
		orig, ok := originals[k]
		if !ok {
			s.t.Fatalf("enriched record for %+v, which the manifest has no original for", k)
		}
		if len(recs) > 1 && !allowRepeats {
			s.t.Fatalf("%d enriched records for %+v", len(recs), k)
		}
		first := recs[0]
		for _, r := range recs {
			if r.SourcePartition != first.SourcePartition || r.SourceOffset != first.SourceOffset {
				s.t.Fatalf("%+v emitted for two different source records: %d/%d and %d/%d (a duplicate got through)",
					k, first.SourcePartition, first.SourceOffset, r.SourcePartition, r.SourceOffset)
			}
		}
		// The winner is whichever copy reached the key's home partition first: the original, or a
		// byte-identical duplicate forwarded from another partition.
		if !copies[k][[2]int64{int64(first.SourcePartition), first.SourceOffset}] {
			s.t.Fatalf("%+v emitted from %d/%d, which holds no copy of it", k, first.SourcePartition, first.SourceOffset)
		}
		if orig.Sensitive && (first.Moderation.Status != "CHECKED" || len(first.Moderation.Hits) == 0) {
			s.t.Fatalf("%+v has a planted word but moderation %+v", k, first.Moderation)
		}
	}
	if len(res.enriched) != len(originals) {
		s.t.Fatalf("enriched records for %d keys, manifest has %d originals (lost %d)", len(res.enriched), len(originals), len(originals)-len(res.enriched))
	}
	for loc, entries := range res.dlq {
		p, ok := poison[loc]
		if !ok {
			s.t.Fatalf("DLQ holds %+v, which is not poison (misrouted): %s", loc, entries[0].Message)
		}
		if len(entries) > 1 && !allowRepeats {
			s.t.Fatalf("DLQ holds %+v %d times", loc, len(entries))
		}
		if entries[0].Class != p.Class || entries[0].Stage != "ingest" {
			s.t.Fatalf("DLQ entry for %s poison has class %s stage %s, want %s", p.Poison, entries[0].Class, entries[0].Stage, p.Class)
		}
	}
	if len(res.dlq) != len(poison) {
		s.t.Fatalf("DLQ holds %d records, manifest has %d poison", len(res.dlq), len(poison))
	}
}

// committedAll waits until the group committed the end offset of every source partition.
func (s *stage) committedAll(ctx context.Context) {
	s.t.Helper()
	testenv.WaitCommitted(s.t, ctx, s.Admin, s.Ingest.Group, s.Ingest.InferenceTopic, s.Ingest.GatewayTopic)
}

// landedExactly collects want records and checks them against m (no repeats allowed), waits
// until every source offset is committed, then stops the in-process ingest (stop, done: see
// run) and checks what it returned.
func (s *stage) landedExactly(ctx context.Context, m *loadgen.Manifest, want int, stop context.CancelFunc, done <-chan error) {
	s.t.Helper()
	res := s.collect(ctx, want, 2*time.Second)
	s.check(m, res, false)
	s.committedAll(ctx)
	stop()
	if err := <-done; err != nil {
		s.t.Fatalf("ingest: %v", err)
	}
}

func moderationClient(t *testing.T, url string) *moderation.Client {
	t.Helper()
	if url == "" {
		url = testenv.Get(testenv.SensitiveURL)
	}
	c, err := moderation.New(moderation.Conn{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestIngestExact: loadgen traffic with duplicates (half of them on another partition) and
// every kind of poison; ingest must emit exactly one enriched record per valid original, put
// exactly the poison in the DLQ, and commit every source offset.
func TestIngestExact(t *testing.T) {
	s := newStage(t, 3)
	m := s.load(loadgen.Config{Requests: 1000, DuplicateRate: 0.05, CrossPartitionShare: 0.5, PoisonRate: 0.03, SensitiveShare: 0.2, Seed: 21})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	done := s.run(runCtx, moderationClient(t, ""))
	s.landedExactly(ctx, m, 3000+90, stop, done)
}

// ingestProcess runs `backflow ingest` for the stage as a child process, so a test can
// SIGKILL it; its warnings and errors go to the test log.
func (s *stage) ingestProcess(bin, sensitiveURL string) *proc.Proc {
	s.t.Helper()
	return testenv.Start(s.t, "ingest", bin, proc.Options{
		Args: []string{"ingest", "--group", s.Ingest.Group, "--inference-topic", s.Ingest.InferenceTopic,
			"--gateway-topic", s.Ingest.GatewayTopic, "--enriched-topic", s.Ingest.EnrichedTopic, "--dlq-topic", s.Ingest.DLQTopic,
			"--control-topic", s.Ingest.ControlTopic, "--storage-dir", filepath.Join(s.t.TempDir(), "goka"),
			"--metrics-addr", "127.0.0.1:0"}, // a free port: runs in parallel never collide
		Env: map[string]string{"BACKFLOW_KAFKA_BROKERS": strings.Join(s.Kafka.Brokers, ","),
			"BACKFLOW_REGISTRY_URL": testenv.Get(testenv.RegistryURL), "BACKFLOW_SENSITIVE_WORDS_URL": sensitiveURL},
		OnLine: func(line string) {
			if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
				s.t.Log("ingest: " + line)
			}
		},
	})
}

// TestIngestSurvivesSIGKILL kills the ingest process with SIGKILL three times while traffic
// flows. Redelivered records may be emitted again (sinks collapse them), but every valid
// original must land, no record with another origin may pass as its key, and the DLQ must
// hold exactly the poison.
func TestIngestSurvivesSIGKILL(t *testing.T) {
	s := newStage(t, 3)
	bin := testenv.Build(t, "cmd/backflow")
	sensitive := testenv.Get(testenv.SensitiveURL)
	ctx, cancel := context.WithTimeout(context.Background(), 240*time.Second)
	defer cancel()

	var m *loadgen.Manifest
	loaded := make(chan struct{})
	go func() {
		defer close(loaded)
		m = s.load(loadgen.Config{Requests: 6000, Rate: 1500, DuplicateRate: 0.03, CrossPartitionShare: 0.5, PoisonRate: 0.01, Seed: 33})
	}()
	proc := s.ingestProcess(bin, sensitive)
	for kill := 0; kill < 3; kill++ {
		time.Sleep(time.Duration(1000+kill*300) * time.Millisecond)
		if !proc.Running() {
			t.Fatalf("ingest exited before the kill: %v\n%s", proc.Err(), proc.Tail(20))
		}
		proc.Kill()
		proc = s.ingestProcess(bin, sensitive)
	}
	<-loaded
	want := 0
	for _, e := range m.Entries {
		if e.Kind != loadgen.KindDuplicate {
			want++
		}
	}
	res := s.collect(ctx, want, 3*time.Second)
	s.check(m, res, true)
	s.committedAll(ctx)
	if code, _, err := proc.Stop(syscall.SIGTERM, 2*time.Minute); err != nil || code != 0 {
		t.Fatalf("ingest after SIGTERM: exit code %d, %v", code, err)
	}
	t.Logf("%d records landed for %d expected (repeats from redelivery: %d)", res.total, want, res.total-want)
}

// TestIngestModerationOutage stops a private sensitive-word service for a while mid-run: with
// the block policy nothing is dead-lettered or dropped, and once the service is back every
// record lands exactly once.
func TestIngestModerationOutage(t *testing.T) {
	s := newStage(t, 3)
	svc := testenv.StartSensitive(t)
	m := s.load(loadgen.Config{Requests: 1500, DuplicateRate: 0.03, PoisonRate: 0.02, SensitiveShare: 0.2, Seed: 44})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	done := s.run(runCtx, moderationClient(t, svc.URL))
	time.Sleep(300 * time.Millisecond)
	svc.Stop()
	time.Sleep(3 * time.Second) // outage
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	s.landedExactly(ctx, m, 4500+90, stop, done)
}

// TestIngestWaitsForItsSourceTopics (issue 27.9): ingest started before its source topics
// exist used to give up after a 5 s grace ("source topic does not exist") and end, which
// ended the whole process; right after a broker restart that happened even to a topic that
// did exist. It waits now, says which topic and which config key it waits for, and once the
// topics are created processes what is written to them: every record, offsets committed.
func TestIngestWaitsForItsSourceTopics(t *testing.T) {
	s := &stage{Env: pipelinetest.NewEnv(t, "wt"), t: t}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	waiting := make(chan string, 1)
	log := slog.New(&waitSpotter{Handler: slog.NewTextHandler(os.Stderr, nil), seen: waiting})
	var waits atomic.Int64
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	s.running = make(chan error, 1)
	go func() {
		err := ingest.Run(runCtx, s.Ingest, ingest.RunConfig{Kafka: s.Kafka, Registry: s.Registry, SensitiveWords: moderationClient(t, ""),
			StorageDir: t.TempDir(), Logger: log, Waiting: func(error) { waits.Add(1) }})
		s.running <- err
		done <- err
	}()
	var line string
	select {
	case line = <-waiting:
	case err := <-done:
		t.Fatalf("ingest ended while its source topics did not exist: %v", err)
	case <-ctx.Done():
		t.Fatal("ingest never said it waits for its source topics")
	}
	if !strings.Contains(line, "topic="+s.Ingest.InferenceTopic) || !strings.Contains(line, "key=ingest.inference_topic") {
		t.Fatalf("waiting line %q does not name the inference topic and its key", line)
	}
	s.SourceTopics(t, ctx, 3)
	m := s.load(loadgen.Config{Requests: 200, Seed: 27})
	s.landedExactly(ctx, m, 600+6, stop, done) // 600 originals, 6 poison (the seed's)
	// The failed look that logged the line told Waiting before the next look found the topics.
	if n := waits.Load(); n < 1 {
		t.Fatalf("Waiting reported %d times while the topics were missing, want at least 1", n)
	}
}

// TestIngestStopsCleanlyWhileWaiting: a stop that comes while ingest still waits for its source
// topics is a clean stop (nil), as a stop at any other time is, not an error exit.
func TestIngestStopsCleanlyWhileWaiting(t *testing.T) {
	env := pipelinetest.NewEnv(t, "ws")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	waiting := make(chan string, 1)
	log := slog.New(&waitSpotter{Handler: slog.NewTextHandler(os.Stderr, nil), seen: waiting})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- ingest.Run(runCtx, env.Ingest, ingest.RunConfig{Kafka: env.Kafka, Registry: env.Registry, SensitiveWords: moderationClient(t, ""),
			StorageDir: t.TempDir(), Logger: log})
	}()
	select {
	case <-waiting:
	case err := <-done:
		t.Fatalf("ingest ended while its source topics did not exist: %v", err)
	case <-ctx.Done():
		t.Fatal("ingest never said it waits for its source topics")
	}
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ingest stopped while waiting for its topics returned %v, want nil (a clean stop)", err)
		}
	case <-ctx.Done():
		t.Fatal("ingest did not return after its stop while waiting for its topics")
	}
}

// waitSpotter passes every line on and sends the first "waiting for topic" line, as
// "msg topic=... key=...", to seen.
type waitSpotter struct {
	slog.Handler
	seen chan string
}

func (w *waitSpotter) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "waiting for topic to be created" {
		line := r.Message
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "topic" || a.Key == "key" {
				line += " " + a.Key + "=" + a.Value.String()
			}
			return true
		})
		select {
		case w.seen <- line:
		default: // the first one is enough
		}
	}
	return w.Handler.Handle(ctx, r)
}

func (w *waitSpotter) WithAttrs(as []slog.Attr) slog.Handler {
	return &waitSpotter{Handler: w.Handler.WithAttrs(as), seen: w.seen}
}
