package ingest_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/dlq"
	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/internal/moderation"
	"github.com/backflowhq/backflow/processors/ingest"
	"github.com/backflowhq/backflow/test/testenv"
	"github.com/backflowhq/backflow/tools/loadgen"
)

// stage is one test's private set of topics and group on the real stack.
type stage struct {
	t     *testing.T
	kcfg  kafka.Conn
	reg   *sr.Client
	cfg   ingest.Config
	admin *kgo.Client
	// running yields the result of an in-process ingest.Run started by run, if any.
	running chan error
}

func newStage(t *testing.T, partitions int32) *stage {
	t.Helper()
	testenv.Integration(t)
	s := &stage{t: t, kcfg: kafka.Conn{Brokers: kafka.ParseBrokers(testenv.Get(testenv.KafkaBrokers)), ClientID: "ingest-test"}}
	var err error
	if s.reg, err = avro.NewRegistryClient(avro.RegistryConn{URL: testenv.Get(testenv.RegistryURL)}); err != nil {
		t.Fatal(err)
	}
	if s.admin, err = s.kcfg.NewClient(); err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("it%d", time.Now().UnixNano())
	s.cfg = ingest.Config{Group: "ingest-" + id, InferenceTopic: "inf-" + id, GatewayTopic: "gw-" + id,
		EnrichedTopic: "enriched-" + id, DLQTopic: "dlq-" + id, ControlTopic: "control-" + id,
		BackoffMin: 20 * time.Millisecond, BackoffMax: 500 * time.Millisecond, BreakerOpen: time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := loadgen.EnsureTopics(ctx, s.admin, partitions, 1, s.cfg.InferenceTopic, s.cfg.GatewayTopic); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		kadm.NewClient(s.admin).DeleteTopics(ctx, s.cfg.InferenceTopic, s.cfg.GatewayTopic, s.cfg.EnrichedTopic, s.cfg.DLQTopic,
			s.cfg.ControlTopic, s.cfg.LoopTopic(), s.cfg.TableTopic())
		kadm.NewClient(s.admin).DeleteGroup(ctx, s.cfg.Group)
		for _, sub := range []string{s.cfg.InferenceTopic + "-value", s.cfg.GatewayTopic + "-value", s.cfg.EnrichedTopic + "-value"} {
			s.reg.DeleteSubject(ctx, sub, sr.SoftDelete)
		}
		s.admin.Close()
	})
	return s
}

// load sends traffic with loadgen and returns its manifest.
func (s *stage) load(cfg loadgen.Config) *loadgen.Manifest {
	s.t.Helper()
	cfg.InferenceTopic, cfg.GatewayTopic = s.cfg.InferenceTopic, s.cfg.GatewayTopic
	prod, err := s.kcfg.NewClient(loadgen.ProducerOpts()...)
	if err != nil {
		s.t.Fatal(err)
	}
	defer prod.Close()
	var buf bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := loadgen.Run(ctx, cfg, prod, s.reg, loadgen.Options{RunID: s.cfg.Group, Manifest: &buf})
	if err != nil || st.Failed != 0 {
		s.t.Fatalf("loadgen: %v (%v)", err, st)
	}
	m, err := loadgen.ParseManifest(&buf)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Logf("loadgen: %v", st)
	return m
}

// run starts ingest with checker until ctx ends. The returned channel yields Run's result;
// a Run that ends early fails the test at once instead of leaving collect to time out.
func (s *stage) run(ctx context.Context, checker ingest.Checker) <-chan error {
	done := make(chan error, 1)
	s.running = make(chan error, 1)
	go func() {
		err := ingest.Run(ctx, s.cfg, ingest.RunConfig{Kafka: s.kcfg, Registry: s.reg, Checker: checker,
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
	dec, _ := avro.NewDecoder[avro.EnrichedRecord](s.reg, avro.EnrichedSchema, avro.DecoderConfig{})
	cl, err := s.kcfg.NewClient(kgo.ConsumeTopics(s.cfg.EnrichedTopic, s.cfg.DLQTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
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
			if r.Topic == s.cfg.DLQTopic {
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
	adm := kadm.NewClient(s.admin)
	for {
		ends, err1 := adm.ListEndOffsets(ctx, s.cfg.InferenceTopic, s.cfg.GatewayTopic)
		offs, err2 := adm.FetchOffsets(ctx, s.cfg.Group)
		if err1 == nil && err2 == nil {
			behind := 0
			ends.Each(func(e kadm.ListedOffset) {
				if c, ok := offs.Lookup(e.Topic, e.Partition); !ok || c.At != e.Offset {
					behind++
				}
			})
			if behind == 0 {
				return
			}
		}
		if ctx.Err() != nil {
			s.t.Fatalf("group did not commit the end of every source partition: %v %v", err1, err2)
		}
		time.Sleep(200 * time.Millisecond)
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
	want := 3000 + 90
	res := s.collect(ctx, want, 2*time.Second)
	s.check(m, res, false)
	s.committedAll(ctx)
	stop()
	if err := <-done; err != nil {
		t.Fatalf("ingest: %v", err)
	}
}

// build compiles one of the project's binaries once per test run.
var (
	buildMu  sync.Mutex
	builtDir string
)

func build(t *testing.T, pkg string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if builtDir == "" {
		dir, err := os.MkdirTemp("", "backflow-ingest-test")
		if err != nil {
			t.Fatal(err)
		}
		builtDir = dir
	}
	out := filepath.Join(builtDir, filepath.Base(pkg))
	if _, err := os.Stat(out); err == nil {
		return out
	}
	cmd := exec.Command("go", "build", "-o", out, "github.com/backflowhq/backflow/"+pkg)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// freePort returns a loopback port nothing listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// ingestProcess runs `backflow ingest` for the stage as a child process, so a test can
// SIGKILL it.
func (s *stage) ingestProcess(bin, sensitiveURL string) *exec.Cmd {
	s.t.Helper()
	cmd := exec.Command(bin, "ingest", "--group", s.cfg.Group, "--inference-topic", s.cfg.InferenceTopic,
		"--gateway-topic", s.cfg.GatewayTopic, "--enriched-topic", s.cfg.EnrichedTopic, "--dlq-topic", s.cfg.DLQTopic,
		"--control-topic", s.cfg.ControlTopic, "--storage-dir", filepath.Join(s.t.TempDir(), "goka"),
		"--metrics-addr", "127.0.0.1:0") // a free port: runs in parallel never collide
	cmd.Env = append(os.Environ(),
		"BACKFLOW_KAFKA_BROKERS="+strings.Join(s.kcfg.Brokers, ","),
		"BACKFLOW_REGISTRY_URL="+testenv.Get(testenv.RegistryURL),
		"BACKFLOW_SENSITIVE_URL="+sensitiveURL)
	cmd.Stderr = &prefixWriter{t: s.t, prefix: "ingest: "}
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	return cmd
}

// prefixWriter logs a child's warnings and errors through the test log.
type prefixWriter struct {
	t      *testing.T
	prefix string
}

func (w *prefixWriter) Write(b []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			w.t.Log(w.prefix + line)
		}
	}
	return len(b), nil
}

// TestIngestSurvivesSIGKILL kills the ingest process with SIGKILL three times while traffic
// flows. Redelivered records may be emitted again (sinks collapse them), but every valid
// original must land, no record with another origin may pass as its key, and the DLQ must
// hold exactly the poison.
func TestIngestSurvivesSIGKILL(t *testing.T) {
	s := newStage(t, 3)
	bin := build(t, "cmd/backflow")
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
		if err := proc.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		proc.Wait()
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
	proc.Process.Signal(syscall.SIGTERM)
	if err := proc.Wait(); err != nil {
		t.Fatalf("ingest after SIGTERM: %v", err)
	}
	t.Logf("%d records landed for %d expected (repeats from redelivery: %d)", res.total, want, res.total-want)
}

// TestIngestModerationOutage stops a private sensitive-word service for a while mid-run: with
// the block policy nothing is dead-lettered or dropped, and once the service is back every
// record lands exactly once.
func TestIngestModerationOutage(t *testing.T) {
	s := newStage(t, 3)
	svc := build(t, "tools/sensitive-words/cmd/sensitive-words")
	port := freePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	dict, _ := filepath.Abs("../../deploy/sensitive-words/sample.tsv")
	startSvc := func() *exec.Cmd {
		cmd := exec.Command(svc, "--addr", fmt.Sprintf("127.0.0.1:%d", port), "--dictionary", dict)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 100; i++ {
			if r, err := http.Get(url + "/healthz"); err == nil {
				r.Body.Close()
				return cmd
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatal("sensitive-words did not start")
		return nil
	}
	svcCmd := startSvc()
	m := s.load(loadgen.Config{Requests: 1500, DuplicateRate: 0.03, PoisonRate: 0.02, SensitiveShare: 0.2, Seed: 44})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	done := s.run(runCtx, moderationClient(t, url))
	time.Sleep(300 * time.Millisecond)
	svcCmd.Process.Kill()
	svcCmd.Wait()
	time.Sleep(3 * time.Second) // outage
	svcCmd = startSvc()
	defer svcCmd.Process.Kill()
	want := 4500 + 90
	res := s.collect(ctx, want, 2*time.Second)
	s.check(m, res, false)
	s.committedAll(ctx)
	stop()
	if err := <-done; err != nil {
		t.Fatalf("ingest: %v", err)
	}
}
