// Package procstat reads a process's CPU time and memory from Linux's /proc, for the
// benchmark harness and the fault-injection suite, which sample their child processes.
package procstat

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat. Linux fixes it at 100
// on every architecture Go supports here.
const clockTicks = 100

// Sample is one reading of /proc/<pid>: CPU seconds used so far (user + system), and the
// resident set now and at its peak (VmHWM).
type Sample struct {
	CPU     float64
	RSS     int64
	PeakRSS int64
}

// Read reads pid's CPU time and memory from /proc.
func Read(pid int) (Sample, error) {
	var s Sample
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
