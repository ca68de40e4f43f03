package chaos

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/backflowhq/backflow/test/proc"
	"github.com/backflowhq/backflow/test/procstat"
)

// Bins are the binaries the children run: backflow and sensitive-words, built as shipped
// (no -race).
type Bins struct {
	Backflow, Sensitive string
}

// Build compiles both binaries of the module rooted at repo into dir.
func Build(ctx context.Context, repo, dir string) (Bins, error) {
	bins, err := proc.Build(ctx, repo, dir, "./cmd/backflow", "./tools/sensitive-words/cmd/sensitive-words")
	if err != nil {
		return Bins{}, err
	}
	return Bins{Backflow: bins[0], Sensitive: bins[1]}, nil
}

// Service is the private sensitive-word service of one Env, started with --test-faults so a
// scenario can make it slow or wrong (POST /debug/faults), and stopped (SIGKILL: down, not
// shutting down) and started again on its port.
type Service struct {
	*proc.Service
}

// StartSensitive starts the service on a free port with the sample dictionary; its output goes
// to dir/sensitive-words.log.
func StartSensitive(ctx context.Context, bin, dir string) (*Service, error) {
	dict, err := filepath.Abs(filepath.Join(repoRoot(), "deploy/sensitive-words/sample.tsv"))
	if err != nil {
		return nil, err
	}
	svc, err := proc.NewService("sensitive-words", bin, func(addr string) []string {
		return []string{"--addr", addr, "--dictionary", dict, "--test-faults"}
	}, proc.Options{Stdout: true, Log: filepath.Join(dir, "sensitive-words.log")})
	if err != nil {
		return nil, err
	}
	s := &Service{svc}
	return s, s.Start(ctx)
}

// Faults sets the service's injected faults: a JSON object as POST /debug/faults takes it
// ({"latency":"2s","errorRate":1,"rate429":0,"wrongCountRate":0,"wrongOrderRate":0}); "{}"
// clears them.
func (s *Service) Faults(body string) error {
	r, err := http.Post(s.URL+"/debug/faults", "application/json", strings.NewReader(body))
	if err != nil {
		return fmt.Errorf("sensitive-words faults: %w", err)
	}
	defer r.Body.Close()
	if r.StatusCode != 200 {
		return fmt.Errorf("sensitive-words faults %s: HTTP %d", body, r.StatusCode)
	}
	return nil
}

// keepLog is how much of a child's log (over all its starts) Log keeps in memory; the file
// has all of it.
const keepLog = 64 << 20

// Proc is one `backflow` child process (a `run` with some stages, usually), with its JSON log
// kept in memory and in a file, and its metrics address read from the log.
type Proc struct {
	Name string
	Args []string
	env  *Env

	mu      sync.Mutex
	cur     *proc.Proc   // the latest start
	earlier bytes.Buffer // the log of the starts before it
	starts  int
}

// Start starts `backflow args...` as child name, with the env's variables plus vars (which
// win). The child inherits no BACKFLOW_* variable of this process.
func (e *Env) Start(name string, vars map[string]string, args ...string) (*Proc, error) {
	p := &Proc{Name: name, Args: args, env: e}
	if err := p.start(vars); err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.procs = append(e.procs, p)
	e.mu.Unlock()
	return p, nil
}

// StartRun writes a config for stages and starts `backflow run --config` with it.
func (e *Env) StartRun(name, stages string, extra map[string]string) (*Proc, error) {
	cfg, err := e.Config(name, stages, extra)
	if err != nil {
		return nil, err
	}
	return e.Start(name, nil, "run", "--config", cfg)
}

func (p *Proc) start(vars map[string]string) error {
	all := p.env.Vars()
	for k, v := range vars {
		all[k] = v
	}
	c, err := proc.Start(p.Name, p.env.Bins.Backflow, proc.Options{Args: p.Args, Env: all, Isolate: true,
		Log: filepath.Join(p.env.Dir, p.Name+".log"), Keep: keepLog})
	if err != nil {
		return err
	}
	p.mu.Lock()
	if p.cur != nil && p.earlier.Len() < keepLog {
		p.earlier.WriteString(p.cur.Output())
	}
	p.cur = c
	p.starts++
	p.mu.Unlock()
	p.env.sampler.add(p.Name, c.Pid())
	go func() {
		<-c.Done()
		p.env.sampler.remove(c.Pid())
	}()
	return nil
}

func (p *Proc) current() *proc.Proc {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur
}

// Restart starts the child again with the same arguments after it exited.
func (p *Proc) Restart() error {
	if p.Running() {
		return fmt.Errorf("%s is still running", p.Name)
	}
	return p.start(nil)
}

// Running reports whether the child is alive.
func (p *Proc) Running() bool { return p.current().Running() }

// Pid of the running child.
func (p *Proc) Pid() int { return p.current().Pid() }

// Kill sends SIGKILL and waits for the exit.
func (p *Proc) Kill() { p.current().Kill() }

// Terminate sends SIGTERM and waits up to grace for the exit, then SIGKILL: the end of a
// scenario, so that the child leaves its consumer groups and they can be deleted at once.
func (p *Proc) Terminate(grace time.Duration) { p.current().Terminate(grace) }

// Quit sends SIGQUIT: the Go runtime writes every goroutine's stack to the child's log and
// exits. For finding where a stop hangs.
func (p *Proc) Quit() { p.current().Signal(syscall.SIGQUIT) }

// Signal sends sig and waits up to guard for the exit; it returns the exit code, or an error
// (the child is then killed).
func (p *Proc) Signal(sig os.Signal, guard time.Duration) (int, time.Duration, error) {
	c := p.current()
	if !c.Running() {
		return -1, 0, fmt.Errorf("%s is not running", p.Name)
	}
	return c.Stop(sig, guard)
}

// Wait waits up to d for the child to exit by itself and returns its exit code.
func (p *Proc) Wait(d time.Duration) (int, error) { return p.current().Wait(d) }

// Log is everything the child wrote to stderr, over all its starts.
func (p *Proc) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.earlier.String() + p.cur.Output()
}

// MetricsURL waits until the child logged its metrics address and returns the base URL.
func (p *Proc) MetricsURL(ctx context.Context) (string, error) {
	base, err := p.current().WaitLine(ctx, proc.MetricsLine)
	if err != nil {
		return "", fmt.Errorf("%s: no metrics address: %w", p.Name, err)
	}
	return base, nil
}

// Ready waits until the child's /readyz answers 200.
func (p *Proc) Ready(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	base, err := p.MetricsURL(ctx)
	if err != nil {
		return err
	}
	last := ""
	for {
		if r, err := http.Get(base + "/readyz"); err == nil {
			var b bytes.Buffer
			b.ReadFrom(r.Body)
			r.Body.Close()
			if r.StatusCode == 200 {
				return nil
			}
			last = b.String()
		}
		if !p.Running() {
			return fmt.Errorf("%s exited before it was ready:\n%s", p.Name, tail(p.Log(), 3000))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %s", p.Name, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Metrics scrapes the child's /metrics.
func (p *Proc) Metrics(ctx context.Context) (Metrics, error) {
	base, err := p.MetricsURL(ctx)
	if err != nil {
		return nil, err
	}
	r, err := http.Get(base + "/metrics")
	if err != nil {
		return nil, err
	}
	defer r.Body.Close()
	tp := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := tp.TextToMetricFamilies(r.Body)
	return Metrics(mfs), err
}

// Metrics are one scrape.
type Metrics map[string]*dto.MetricFamily

// Sum adds up the series of name whose labels include want; -1 when there is none.
func (m Metrics) Sum(name string, want map[string]string) float64 {
	mf, ok := m[name]
	if !ok {
		return -1
	}
	total, n := 0.0, 0
series:
	for _, s := range mf.GetMetric() {
		for _, l := range s.GetLabel() {
			if v, ok := want[l.GetName()]; ok && v != l.GetValue() {
				continue series
			}
		}
		n++
		switch {
		case s.Counter != nil:
			total += s.Counter.GetValue()
		case s.Gauge != nil:
			total += s.Gauge.GetValue()
		case s.Histogram != nil:
			total += float64(s.Histogram.GetSampleCount())
		}
	}
	if n == 0 {
		return -1
	}
	return total
}

// Count is Sum for counters that may not have a series yet: 0 instead of -1.
func (m Metrics) Count(name string, want map[string]string) float64 {
	if v := m.Sum(name, want); v > 0 {
		return v
	}
	return 0
}

// rssSampler reads the resident set size of every live child every 200 ms and keeps the peak
// per child name.
type rssSampler struct {
	mu   sync.Mutex
	pids map[int]string
	peak map[string]int64 // bytes
	quit chan struct{}
	once sync.Once
}

func newRSSSampler() *rssSampler {
	return &rssSampler{pids: map[int]string{}, peak: map[string]int64{}, quit: make(chan struct{})}
}

func (s *rssSampler) add(name string, pid int) {
	s.mu.Lock()
	s.pids[pid] = name
	s.mu.Unlock()
}

func (s *rssSampler) remove(pid int) {
	s.mu.Lock()
	delete(s.pids, pid)
	s.mu.Unlock()
}

func (s *rssSampler) run() {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
		}
		s.mu.Lock()
		for pid, name := range s.pids {
			if st, err := procstat.Read(pid); err == nil && st.RSS > s.peak[name] {
				s.peak[name] = st.RSS
			}
		}
		s.mu.Unlock()
	}
}

func (s *rssSampler) stop() { s.once.Do(func() { close(s.quit) }) }

// Peak returns the highest RSS seen of any child, and which.
func (e *Env) PeakRSS() (int64, string) {
	e.sampler.mu.Lock()
	defer e.sampler.mu.Unlock()
	var max int64
	who := ""
	for n, v := range e.sampler.peak {
		if v > max {
			max, who = v, n
		}
	}
	return max, who
}

// repoRoot finds the module root from the working directory (tests run in their package's
// folder, the command in the repository).
func repoRoot() string {
	dir, _ := os.Getwd()
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "."
		}
		dir = parent
	}
}

// RepoRoot is the module root the harness runs in.
func RepoRoot() string { return repoRoot() }
