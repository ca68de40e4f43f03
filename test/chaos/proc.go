package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/backflowhq/backflow/tools/procstat"
)

// Bins are the binaries the children run: backflow and sensitive-words, built as shipped
// (no -race).
type Bins struct {
	Backflow, Sensitive string
}

// Build compiles both binaries of the module rooted at repo into dir.
func Build(ctx context.Context, repo, dir string) (Bins, error) {
	b := Bins{Backflow: filepath.Join(dir, "backflow"), Sensitive: filepath.Join(dir, "sensitive-words")}
	for pkg, out := range map[string]string{"./cmd/backflow": b.Backflow, "./tools/sensitive-words/cmd/sensitive-words": b.Sensitive} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
		cmd.Dir = repo
		if o, err := cmd.CombinedOutput(); err != nil {
			return b, fmt.Errorf("go build %s: %w\n%s", pkg, err, o)
		}
	}
	return b, nil
}

// Service is the private sensitive-word service of one Env, started with --test-faults so a
// scenario can make it slow or wrong (POST /debug/faults), and stopped and started by pid.
type Service struct {
	URL  string
	bin  string
	port int
	dir  string
	mu   sync.Mutex
	cmd  *exec.Cmd
}

// StartSensitive starts the service on a free port with the sample dictionary.
func StartSensitive(ctx context.Context, bin, dir string) (*Service, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &Service{bin: bin, port: port, dir: dir, URL: fmt.Sprintf("http://127.0.0.1:%d", port)}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return s, s.Start(ctx)
}

// Start starts the service (again) and waits until /healthz answers.
func (s *Service) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return nil
	}
	dict, err := filepath.Abs(filepath.Join(repoRoot(), "deploy/sensitive-words/sample.tsv"))
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(s.dir, "sensitive-words.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.bin, "--addr", fmt.Sprintf("127.0.0.1:%d", s.port), "--dictionary", dict, "--test-faults")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	go func() { cmd.Wait(); logf.Close() }()
	s.cmd = cmd
	for i := 0; i < 200; i++ {
		if r, err := http.Get(s.URL + "/healthz"); err == nil {
			r.Body.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("sensitive-words did not answer on %s", s.URL)
}

// Stop kills the service (SIGKILL: it is down, not shutting down).
func (s *Service) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		s.cmd.Process.Kill()
		for i := 0; i < 100 && s.cmd.Process.Signal(syscall.Signal(0)) == nil; i++ {
			time.Sleep(20 * time.Millisecond)
		}
		s.cmd = nil
	}
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

// Proc is one `backflow` child process (a `run` with some stages, usually), with its JSON log
// kept in memory and in a file, and its metrics address read from the log.
type Proc struct {
	Name string
	Args []string
	env  *Env

	mu      sync.Mutex
	cmd     *exec.Cmd
	logs    bytes.Buffer
	metrics string
	done    chan struct{}
	exit    int
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
	cmd := exec.Command(p.env.Bins.Backflow, p.Args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BACKFLOW_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	all := p.env.Vars()
	for k, v := range vars {
		all[k] = v
	}
	for k, v := range all {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(p.env.Dir, p.Name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	done := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.done, p.metrics = cmd, done, ""
	p.starts++
	p.mu.Unlock()
	p.env.sampler.add(p.Name, cmd.Process.Pid)
	go func() {
		defer close(done)
		defer logf.Close()
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			var rec struct{ Msg, Metrics, Level string }
			p.mu.Lock()
			if p.logs.Len() < 64<<20 {
				p.logs.WriteString(line + "\n")
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "serving metrics and health" {
				p.metrics = strings.TrimSuffix(rec.Metrics, "/metrics")
			}
			p.mu.Unlock()
		}
		cmd.Wait()
		p.env.sampler.remove(cmd.Process.Pid)
		p.mu.Lock()
		p.exit = cmd.ProcessState.ExitCode()
		p.mu.Unlock()
	}()
	return nil
}

// Restart starts the child again with the same arguments after it exited.
func (p *Proc) Restart() error {
	if p.Running() {
		return fmt.Errorf("%s is still running", p.Name)
	}
	return p.start(nil)
}

// Running reports whether the child is alive.
func (p *Proc) Running() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// Pid of the running child.
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Pid
}

// Kill sends SIGKILL and waits for the exit.
func (p *Proc) Kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	<-done
}

// Quit sends SIGQUIT: the Go runtime writes every goroutine's stack to the child's log and
// exits. For finding where a stop hangs.
func (p *Proc) Quit() {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	cmd.Process.Signal(syscall.SIGQUIT)
}

// Signal sends sig and waits up to guard for the exit; it returns the exit code, or an error
// (the child is then killed).
func (p *Proc) Signal(sig os.Signal, guard time.Duration) (int, time.Duration, error) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	start := time.Now()
	if err := cmd.Process.Signal(sig); err != nil {
		return -1, 0, err
	}
	select {
	case <-done:
	case <-time.After(guard):
		cmd.Process.Kill()
		<-done
		return -1, time.Since(start), fmt.Errorf("%s did not exit within %v of %v", p.Name, guard, sig)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exit, time.Since(start), nil
}

// Wait waits up to d for the child to exit by itself and returns its exit code.
func (p *Proc) Wait(d time.Duration) (int, error) {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	select {
	case <-done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.exit, nil
	case <-time.After(d):
		return -1, fmt.Errorf("%s still running after %v", p.Name, d)
	}
}

// Log is everything the child wrote to stderr, over all its starts.
func (p *Proc) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// MetricsURL waits until the child logged its metrics address and returns the base URL.
func (p *Proc) MetricsURL(ctx context.Context) (string, error) {
	for {
		p.mu.Lock()
		m := p.metrics
		p.mu.Unlock()
		if m != "" {
			return m, nil
		}
		if !p.Running() {
			return "", fmt.Errorf("%s exited before serving metrics:\n%s", p.Name, tail(p.Log(), 3000))
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("%s: no metrics address: %w", p.Name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
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

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
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
