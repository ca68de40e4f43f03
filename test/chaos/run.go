package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/backflowhq/backflow/tools/loadgen"
)

// Options are how a suite runs.
type Options struct {
	Stack       Stack // the plain stack
	SecureStack Stack // the secured stack (scenario 19); nil: that scenario is skipped, and said so
	Script      StackScript
	Bins        Bins
	Dir         string // scratch folder; each scenario gets a sub-folder
	// Scale multiplies every fault's duration (1: reliability.md's durations; the fast subset
	// uses less), Records overrides each scenario's record count when set.
	Scale   float64
	Records int
	// SoakDuration is how long scenario 20 runs. Default: 10 minutes.
	SoakDuration time.Duration
	// RSSCap is the memory cap of each backflow process. Default: 768 MiB.
	RSSCap int64
	Logf   func(format string, args ...any)
}

func (o Options) withDefaults() Options {
	if o.Scale == 0 {
		o.Scale = 1
	}
	if o.SoakDuration == 0 {
		o.SoakDuration = 10 * time.Minute
	}
	if o.RSSCap == 0 {
		o.RSSCap = 768 << 20
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return o
}

// Run is one scenario in progress: its private pipeline, the manifests of its loads, and what
// it noted.
type Run struct {
	*Env
	Scenario *Scenario
	Opts     Options
	Records  int // the record count to generate
	Script   StackScript
	Measure  MeasureOptions

	// measure, when set, counts against the manifests in place of Env.Measure (a scenario
	// whose records are not the built-in streams').
	measure func(ctx context.Context, ms []*loadgen.Manifest) (Counts, error)

	mu        sync.Mutex
	afters    []func(*Counts)
	manifests []*loadgen.Manifest
	healed    time.Time
	notes     []string
	failures  []string
}

// Note records a figure or an observation in the result.
func (r *Run) Note(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
	r.Logf("  "+format, args...)
}

// Fail records a failed check; the scenario goes on and fails at the end.
func (r *Run) Fail(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
	r.Logf("  FAIL "+format, args...)
}

// after adds a check that runs once the run is measured.
func (r *Run) after(f func(*Counts)) {
	r.mu.Lock()
	r.afters = append(r.afters, f)
	r.mu.Unlock()
}

// Healed marks the end of the fault: time to recover counts from here.
func (r *Run) Healed() {
	r.mu.Lock()
	r.healed = time.Now()
	r.mu.Unlock()
	r.Logf("  fault healed")
}

// Dur scales a fault's duration.
func (r *Run) Dur(d time.Duration) time.Duration { return time.Duration(float64(d) * r.Opts.Scale) }

// AddManifest adds a load's manifest to the oracle.
func (r *Run) AddManifest(m *loadgen.Manifest) {
	r.mu.Lock()
	r.manifests = append(r.manifests, m)
	r.mu.Unlock()
}

// Traffic is the default traffic of a scenario: Records records over about seconds, with
// duplicates (a quarter of them to another partition), 1 % poison of every kind and 10 %
// planted words.
func (r *Run) Traffic(seconds float64) loadgen.Config {
	req := r.Records * 100 / 309 // about 3.09 records a request with these rates
	if req < 10 {
		req = 10
	}
	cfg := loadgen.Config{Requests: req, DuplicateRate: 0.02, CrossPartitionShare: 0.25, PoisonRate: 0.01,
		SensitiveShare: 0.1, Seed: uint64(100 + r.Scenario.ID)}
	if seconds > 0 {
		cfg.Rate = float64(req) / (seconds * r.Opts.Scale)
	}
	return cfg
}

// Load runs a load in the background; Wait returns its manifest (added to the oracle).
func (r *Run) Load(ctx context.Context, cfg loadgen.Config, suffix string) *Pending {
	return &Pending{r: r, ch: r.LoadAsync(ctx, cfg, suffix)}
}

// Pending is a load in progress.
type Pending struct {
	r    *Run
	ch   <-chan Loaded
	done *Loaded
}

// Wait waits for the load to end.
func (p *Pending) Wait() (*loadgen.Manifest, error) {
	if p.done == nil {
		l := <-p.ch
		p.done = &l
		if l.Err == nil {
			p.r.AddManifest(l.Manifest)
			p.r.Logf("  loadgen: %v", l.Stats)
		}
	}
	return p.done.Manifest, p.done.Err
}

// CaughtUp waits for the load to end, then (5 minutes at most) until every group caught up.
func (p *Pending) CaughtUp(ctx context.Context) error {
	if _, err := p.Wait(); err != nil {
		return err
	}
	_, err := p.r.WaitCaughtUp(ctx, 5*time.Minute)
	return err
}

// Done reports whether the load has ended, without waiting.
func (p *Pending) Done() bool {
	if p.done != nil {
		return true
	}
	select {
	case l := <-p.ch:
		p.done = &l
		if l.Err == nil {
			p.r.AddManifest(l.Manifest)
		}
		return true
	default:
		return false
	}
}

// Pipeline is the usual layout: ingest in one process, both sinks (and the DLQ mirror) in
// another, so a fault to one leaves the other running.
type Pipeline struct {
	Ingest, Sinks *Proc
}

// StartPipeline starts both processes with extra config keys and waits until both are ready.
func (r *Run) StartPipeline(ctx context.Context, ingestExtra, sinkExtra map[string]string) (*Pipeline, error) {
	in, err := r.StartRun("ingest", "ingest", ingestExtra)
	if err != nil {
		return nil, err
	}
	sk, err := r.StartRun("sinks", "sink-clickhouse, sink-features", sinkExtra)
	if err != nil {
		return nil, err
	}
	for _, p := range []*Proc{in, sk} {
		if err := p.Ready(ctx, 3*time.Minute); err != nil {
			return nil, err
		}
	}
	return &Pipeline{Ingest: in, Sinks: sk}, nil
}

// Watch polls f every interval until stop is closed; it is how a scenario samples a gauge
// during a fault.
func Watch(interval time.Duration, f func()) (stop func()) {
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			f()
			select {
			case <-quit:
				return
			case <-t.C:
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(quit); <-done }) }
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// Result is one scenario's line in the table.
type Result struct {
	ID           int      `json:"id"`
	Name         string   `json:"name"`
	Fault        string   `json:"fault"`
	Records      int      `json:"records"`
	Lost         int      `json:"lost"`
	DupDedup     int      `json:"dupDedup"`
	DupRaw       int      `json:"dupRaw"`
	Misrouted    int      `json:"misrouted"`
	PeakRSSMiB   float64  `json:"peakRssMiB"`
	PeakRSSOf    string   `json:"peakRssOf"`
	RSSCapMiB    float64  `json:"rssCapMiB"`
	RecoverSec   float64  `json:"recoverSeconds"` // fault healed (or last load ended) -> every group at lag 0
	CaughtUp     bool     `json:"caughtUp"`
	ElapsedSec   float64  `json:"elapsedSeconds"`
	Pass         bool     `json:"pass"`
	Skipped      string   `json:"skipped,omitempty"` // why it did not run; a skipped scenario never passes
	Counts       *Counts  `json:"counts,omitempty"`
	Failures     []string `json:"failures,omitempty"`
	Notes        []string `json:"notes,omitempty"`
	ScratchDir   string   `json:"scratchDir,omitempty"`
	StartedAt    string   `json:"startedAt"`
	BrokersCount int      `json:"brokers"`
}

// Execute runs one scenario from a fresh private pipeline to its verdict.
func Execute(ctx context.Context, s *Scenario, o Options) Result {
	o = o.withDefaults()
	start := time.Now()
	res := Result{ID: s.ID, Name: s.Name, Fault: s.Fault, RSSCapMiB: float64(o.RSSCap) / (1 << 20), StartedAt: start.UTC().Format(time.RFC3339)}
	stack := o.Stack
	if s.Secure {
		stack = o.SecureStack
		if stack == nil {
			res.Skipped = "the secured stack is not running (deploy/local/stack --secure up)"
			return res
		}
	}
	res.BrokersCount = len(strings.Split(stack.Get("BACKFLOW_KAFKA_BROKERS"), ","))
	if s.Brokers > res.BrokersCount {
		res.Skipped = fmt.Sprintf("needs a %d-broker Kafka (deploy/local/stack down kafka && deploy/local/stack up --brokers %d); the stack has %d", s.Brokers, s.Brokers, res.BrokersCount)
		return res
	}
	dir := filepath.Join(o.Dir, fmt.Sprintf("%02d-%s", s.ID, s.Name))
	res.ScratchDir = dir
	o.Logf("scenario %d %s: %s", s.ID, s.Name, s.Fault)
	env, err := NewEnv(ctx, EnvOptions{Stack: stack, Bins: o.Bins, Dir: dir, Logf: o.Logf, NoProxies: s.Secure})
	if err != nil {
		res.Failures = append(res.Failures, "set-up: "+err.Error())
		return res
	}
	defer env.Close()
	r := &Run{Env: env, Scenario: s, Opts: o, Records: s.Records, Script: o.Script}
	if s.Secure {
		r.Script.Secure = true
		r.Script.Args = []string{"--secure"}
	}
	if o.Records > 0 {
		r.Records = o.Records
	}
	if err := env.CreateSourceTopics(ctx); err != nil {
		r.Fail("source topics: %v", err)
	} else if err := s.Run(ctx, r); err != nil {
		r.Fail("%v", err)
	}
	r.mu.Lock()
	healed := r.healed
	r.mu.Unlock()
	if healed.IsZero() {
		healed = time.Now()
	}
	if _, err := env.WaitCaughtUp(ctx, 5*time.Minute); err != nil {
		r.Fail("%v", err)
	} else {
		res.CaughtUp = true
		res.RecoverSec = time.Since(healed).Seconds()
	}
	r.mu.Lock()
	ms := r.manifests
	r.mu.Unlock()
	measure := func(ctx context.Context, ms []*loadgen.Manifest) (Counts, error) {
		return env.Measure(ctx, ms, r.Measure)
	}
	if r.measure != nil {
		measure = r.measure
	}
	if len(ms) == 0 {
		r.Fail("no load completed: nothing to measure")
	} else if c, err := measure(ctx, ms); err != nil {
		r.Fail("measure: %v", err)
	} else {
		res.Counts = &c
		res.Records, res.Lost, res.DupDedup, res.DupRaw, res.Misrouted = c.Records, c.Lost, c.DupDedup, c.DupRaw, c.Misrouted
		if c.UnmoderatedRows > 0 {
			r.Fail("%d rows sunk unmoderated (UNAVAILABLE) under --policy block", c.UnmoderatedRows)
		}
		if c.WrongVerdicts > 0 {
			r.Fail("%d rows whose hits disagree with the planted words", c.WrongVerdicts)
		}
		if s.ExactlyOnceDLQ && c.PoisonTwice > 0 {
			r.Fail("%d poison records dead-lettered more than once", c.PoisonTwice)
		}
		for _, f := range r.afters {
			f(&c)
		}
	}
	peak, who := env.PeakRSS()
	res.PeakRSSMiB, res.PeakRSSOf = float64(peak)/(1<<20), who
	switch {
	case peak == 0:
		// The cap holds only if something was measured.
		r.Fail("no RSS sample of any stage: the memory check saw nothing")
	case peak > o.RSSCap:
		r.Fail("%s peaked at %.0f MiB RSS, over the %.0f MiB cap", who, res.PeakRSSMiB, res.RSSCapMiB)
	}
	r.mu.Lock()
	res.Failures, res.Notes = append(res.Failures, r.failures...), r.notes
	r.mu.Unlock()
	res.ElapsedSec = time.Since(start).Seconds()
	res.Pass = len(res.Failures) == 0 && res.Counts != nil && res.Lost == 0 && res.DupDedup == 0 && res.Misrouted == 0 && res.CaughtUp
	if !res.Pass {
		keepLogs(env, dir)
	}
	o.Logf("scenario %d %s: pass=%v records=%d lost=%d dup=%d/%d misrouted=%d rss=%.0fMiB recover=%.1fs",
		s.ID, s.Name, res.Pass, res.Records, res.Lost, res.DupDedup, res.DupRaw, res.Misrouted, res.PeakRSSMiB, res.RecoverSec)
	return res
}

// keepLogs marks a failed scenario's folder so that it is not mistaken for a clean one; the
// children's logs are already there (<name>.log).
func keepLogs(e *Env, dir string) {
	os.WriteFile(filepath.Join(dir, "FAILED"), []byte(e.ID+"\n"), 0o644)
}

// Term stops a process with SIGTERM and checks the exit code is 0.
func (r *Run) Term(p *Proc) {
	if !p.Running() {
		return
	}
	code, took, err := p.Signal(syscall.SIGTERM, 2*time.Minute)
	if err != nil || code != 0 {
		r.Fail("%s: SIGTERM: exit %d after %v (%v)", p.Name, code, took.Round(time.Millisecond), err)
	}
}
