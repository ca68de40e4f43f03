package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	childproc "github.com/backflowhq/backflow/test/proc"
	"github.com/backflowhq/backflow/test/procstat"
)

// child is a stage run as a child process of the harness, so that its /proc entry can be read
// until the moment it is stopped. Lifecycle: startChild, then sample (any goroutine), then stop
// once.
type child struct {
	name string
	log  string
	p    *childproc.Proc

	mu   sync.Mutex
	last procstat.Sample
}

// startChild runs bin with args and env added to the harness's environment, in a process group
// of its own; stdout and stderr go to logPath (a fresh file).
func startChild(name, bin string, args, env []string, logPath string) (*child, error) {
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(logPath, nil, 0o644); err != nil {
		return nil, err
	}
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	p, err := childproc.Start(name, bin, childproc.Options{Args: args, Env: vars, Stdout: true, Log: logPath, Keep: -1, Group: true})
	if err != nil {
		return nil, err
	}
	return &child{name: name, log: logPath, p: p}, nil
}

// exited reports whether the process ended, with its error.
func (c *child) exited() (bool, error) { return c.p.Exited() }

// sample reads the process's /proc entry and keeps it as the latest reading.
func (c *child) sample() procstat.Sample {
	s, err := procstat.Read(c.p.Pid())
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		c.last = s
	}
	return c.last
}

// stop takes a last sample, then SIGTERMs the process and waits up to grace before SIGKILL
// (of its whole group). It returns that last sample: CPU time and peak RSS up to the moment it
// was asked to stop.
func (c *child) stop(grace time.Duration) procstat.Sample {
	s := c.sample()
	c.p.Terminate(grace)
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
// .stack/run/NAME.pid, the cluster stack's in .stack/cluster/run), for the CPU they spend on a
// peer's behalf.
func servicePids(stackDirs ...string) map[string]int {
	out := map[string]int{}
	var files []string
	for _, d := range stackDirs {
		f, _ := filepath.Glob(filepath.Join(d, "run", "*.pid"))
		files = append(files, f...)
	}
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
