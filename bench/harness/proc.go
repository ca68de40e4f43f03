package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/backflowhq/backflow/tools/procstat"
)

// child is a stage run as a child process of the harness, so that its /proc entry can be read
// until the moment it is stopped. Lifecycle: startChild, then sample (any goroutine), then stop
// once.
type child struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error // valid after done is closed

	mu   sync.Mutex
	last procstat.Sample
}

// startChild runs bin with args and env added to the harness's environment; stdout and stderr
// go to logPath.
func startChild(name, bin string, args, env []string, logPath string) (*child, error) {
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, err
	}
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		lf.Close()
		close(c.done)
	}()
	return c, nil
}

// exited reports whether the process ended, with its error.
func (c *child) exited() (bool, error) {
	select {
	case <-c.done:
		return true, c.err
	default:
		return false, nil
	}
}

// sample reads the process's /proc entry and keeps it as the latest reading.
func (c *child) sample() procstat.Sample {
	s, err := procstat.Read(c.cmd.Process.Pid)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		c.last = s
	}
	return c.last
}

// stop takes a last sample, then SIGTERMs the process and waits up to grace before SIGKILL.
// It returns that last sample: CPU time and peak RSS up to the moment it was asked to stop.
func (c *child) stop(grace time.Duration) procstat.Sample {
	s := c.sample()
	if ok, _ := c.exited(); !ok {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(grace):
			_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
			<-c.done
		}
	}
	return s
}

// tail returns the last n lines of the child's log.
func (c *child) tail(n int) string {
	b, _ := os.ReadFile(c.log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// servicePids returns the pids of the stack's services (deploy/local/stack records them in
// .stack/run/NAME.pid), for the CPU they spend on a peer's behalf.
func servicePids(stackDir string) map[string]int {
	out := map[string]int{}
	files, _ := filepath.Glob(filepath.Join(stackDir, "run", "*.pid"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || syscall.Kill(pid, 0) != nil {
			continue
		}
		out[strings.TrimSuffix(filepath.Base(f), ".pid")] = pid
	}
	return out
}
