// Package proc runs the child processes of the integration tests, the fault-injection suite
// and the benchmark harness: a backflow stage, the sensitive-word service, a peer of the
// benchmark. A child's output is read line by line into memory (and a log file), its
// environment can be cut loose from this process's BACKFLOW_* variables, and it is stopped
// with a signal and a grace period before SIGKILL.
package proc

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// DefaultKeep is how much of a child's output is kept in memory unless Options.Keep says.
const DefaultKeep = 64 << 20

// Options say how to start a child.
type Options struct {
	Args []string
	// Env is added to the environment; its values win over inherited ones.
	Env map[string]string
	// Isolate keeps every BACKFLOW_* variable of this process from the child, so that only
	// Env's reach it (the settings of one stack never leak into a run meant for another).
	Isolate bool
	// Stdout also reads the child's stdout into the output (stderr always is); without it
	// stdout is discarded.
	Stdout bool
	// Log, if set, is a file every output line is appended to.
	Log string
	// OnLine is called with every output line, in order, from the reading goroutine.
	OnLine func(line string)
	// Keep is how many bytes of output Output keeps (DefaultKeep when 0, none when negative);
	// later lines still reach Log and OnLine.
	Keep int
	// Group starts the child in a process group of its own; Kill then kills the whole group.
	Group bool
	Dir   string
}

// Proc is one started child.
type Proc struct {
	Name string
	cmd  *exec.Cmd
	grp  bool
	keep int
	done chan struct{}
	err  error // cmd.Wait's, once done is closed

	mu      sync.Mutex
	lines   []string
	kept    int
	changed chan struct{} // closed and replaced at every new line
}

// Start starts bin as child name.
func Start(name, bin string, o Options) (*Proc, error) {
	cmd := exec.Command(bin, o.Args...)
	cmd.Dir = o.Dir
	cmd.Env = Environ(o.Isolate, o.Env)
	if o.Group {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	p := &Proc{Name: name, cmd: cmd, grp: o.Group, keep: o.Keep, done: make(chan struct{}), changed: make(chan struct{})}
	if p.keep == 0 {
		p.keep = DefaultKeep
	}
	var logf *os.File
	if o.Log != "" {
		if err := os.MkdirAll(filepath.Dir(o.Log), 0o755); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(o.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		logf = f
	}
	closeLog := func() {
		if logf != nil {
			logf.Close()
		}
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		closeLog()
		return nil, err
	}
	cmd.Stderr = pw
	if o.Stdout {
		cmd.Stdout = pw
	}
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		closeLog()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	pw.Close() // the child holds its end; EOF comes when it (and any grandchild) lets go
	read := make(chan struct{})
	go func() {
		defer close(read)
		defer closeLog()
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if logf != nil {
				fmt.Fprintln(logf, line)
			}
			if o.OnLine != nil {
				o.OnLine(line)
			}
			p.add(line)
		}
		io.Copy(io.Discard, pr) // a line over 1 MiB: drain the rest so the child never blocks
		pr.Close()
	}()
	go func() {
		err := cmd.Wait()
		// A grandchild may keep the pipe open after the child exited: wait for the reader
		// a little, not forever.
		select {
		case <-read:
		case <-time.After(10 * time.Second):
			pr.Close()
		}
		p.err = err
		close(p.done)
	}()
	return p, nil
}

func (p *Proc) add(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.kept < p.keep {
		p.lines = append(p.lines, line)
		p.kept += len(line) + 1
	}
	close(p.changed)
	p.changed = make(chan struct{})
}

// Environ is this process's environment (without its BACKFLOW_* variables when isolate) with
// vars on top.
func Environ(isolate bool, vars map[string]string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if _, over := vars[k]; over || isolate && strings.HasPrefix(k, "BACKFLOW_") {
			continue
		}
		env = append(env, kv)
	}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	return env
}

// Pid is the child's process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the child exited and its output was read.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Running reports whether the child has not exited yet.
func (p *Proc) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Exited reports whether the child exited, and if so what exec's Wait said.
func (p *Proc) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// ExitCode is the child's exit code once it exited: -1 while it runs or when a signal ended it.
func (p *Proc) ExitCode() int {
	if p.Running() {
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

// Err is what exec's Wait said (nil for exit code 0), once the child exited.
func (p *Proc) Err() error {
	<-p.done
	return p.err
}

// Signal sends sig to the child.
func (p *Proc) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Kill sends SIGKILL (to the whole group with Options.Group) and waits for the exit.
func (p *Proc) Kill() {
	if p.grp {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Stop sends sig and waits up to grace for the exit; a child still running then is killed and
// Stop returns an error. It returns the exit code and how long the exit took.
func (p *Proc) Stop(sig os.Signal, grace time.Duration) (int, time.Duration, error) {
	start := time.Now()
	if !p.Running() {
		return p.ExitCode(), 0, nil
	}
	if err := p.Signal(sig); err != nil && p.Running() {
		return -1, 0, err
	}
	select {
	case <-p.done:
		return p.ExitCode(), time.Since(start), nil
	case <-time.After(grace):
		p.Kill()
		return -1, time.Since(start), fmt.Errorf("%s did not exit within %v of %v", p.Name, grace, sig)
	}
}

// Terminate stops the child politely (SIGTERM, then SIGKILL after grace), for the end of a
// test: a stage that leaves its consumer groups lets them be deleted at once, where a killed
// one keeps them until its session times out.
func (p *Proc) Terminate(grace time.Duration) {
	_, _, _ = p.Stop(syscall.SIGTERM, grace)
}

// Wait waits up to d for the child to exit by itself and returns its exit code.
func (p *Proc) Wait(d time.Duration) (int, error) {
	select {
	case <-p.done:
		return p.ExitCode(), nil
	case <-time.After(d):
		return -1, fmt.Errorf("%s still running after %v", p.Name, d)
	}
}

// Output is the output kept so far, a line each.
func (p *Proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.lines) == 0 {
		return ""
	}
	return strings.Join(p.lines, "\n") + "\n"
}

// Tail is the last n lines of the output kept.
func (p *Proc) Tail(n int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines[max(0, len(p.lines)-n):], "\n")
}

// WaitLine waits until a line of the output makes match return true, and returns what match
// took from it. It fails when ctx ends or the child exits first.
func (p *Proc) WaitLine(ctx context.Context, match func(line string) (string, bool)) (string, error) {
	seen := 0
	for {
		p.mu.Lock()
		lines, changed := p.lines[seen:], p.changed
		seen = len(p.lines)
		p.mu.Unlock()
		for _, l := range lines {
			if v, ok := match(l); ok {
				return v, nil
			}
		}
		select {
		case <-changed:
		case <-p.done:
			p.mu.Lock()
			more := len(p.lines) > seen
			p.mu.Unlock()
			if !more {
				return "", fmt.Errorf("%s exited (%v); its output ends:\n%s", p.Name, p.err, p.Tail(30))
			}
		case <-ctx.Done():
			return "", fmt.Errorf("%s: %w", p.Name, ctx.Err())
		}
	}
}

// MetricsLine matches the line of backflow's JSON log that says where it serves /metrics,
// /healthz and /readyz, and returns that server's base URL.
func MetricsLine(line string) (string, bool) {
	var rec struct{ Msg, Metrics string }
	if json.Unmarshal([]byte(line), &rec) != nil || rec.Msg != "serving metrics and health" || rec.Metrics == "" {
		return "", false
	}
	return strings.TrimSuffix(rec.Metrics, "/metrics"), true
}

// FreePort returns a loopback port nothing listens on right now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Build compiles packages of the module rooted at repo (e.g. "./cmd/backflow") into dir, each
// binary named after its folder, without -race: the children are the product as shipped. It
// returns the binaries' paths in the order of pkgs.
func Build(ctx context.Context, repo, dir string, pkgs ...string) ([]string, error) {
	out := make([]string, len(pkgs))
	for i, pkg := range pkgs {
		out[i] = filepath.Join(dir, filepath.Base(pkg))
		cmd := exec.CommandContext(ctx, "go", "build", "-o", out[i], pkg)
		cmd.Dir = repo
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
		}
	}
	return out, nil
}
