package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat. Linux fixes it at 100
// on every architecture Go supports here.
const clockTicks = 100

// procSample is one reading of /proc/<pid>: CPU seconds used so far (user + system), and the
// resident set now and at its peak (VmHWM).
type procSample struct {
	CPU     float64
	RSS     int64
	PeakRSS int64
}

// readProc reads pid's CPU time and memory from /proc.
func readProc(pid int) (procSample, error) {
	var s procSample
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	// The command name (field 2) may hold spaces; the fields after its closing ')' start at
	// field 3 (state), so utime (14) and stime (15) are the 12th and 13th of them.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return s, fmt.Errorf("/proc/%d/stat: no ')'", pid)
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return s, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return s, fmt.Errorf("/proc/%d/stat: utime %q stime %q", pid, f[11], f[12])
	}
	s.CPU = float64(ut+st) / clockTicks
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "VmRSS":
			s.RSS = kb << 10
		case "VmHWM":
			s.PeakRSS = kb << 10
		}
	}
	return s, nil
}

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
	last procSample
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
func (c *child) sample() procSample {
	s, err := readProc(c.cmd.Process.Pid)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		c.last = s
	}
	return c.last
}

// stop takes a last sample, then SIGTERMs the process and waits up to grace before SIGKILL.
// It returns that last sample: CPU time and peak RSS up to the moment it was asked to stop.
func (c *child) stop(grace time.Duration) procSample {
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
