package main

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
)

// conditions are what could put a run in the slow mode, recorded for every run: on a shared
// 2-core machine the same binary measured 47 and 75 µs a record within the hour, and a figure
// alone cannot say which of the two it is.
type conditions struct {
	LoadStart float64 `json:"load1_start"` // 1-minute load average when the run started
	LoadEnd   float64 `json:"load1_end"`
	// StealPct and IOWaitPct are the shares of the machine's CPU time the hypervisor took
	// (steal) and spent waiting on I/O during the run (/proc/stat).
	StealPct  float64 `json:"steal_pct"`
	IOWaitPct float64 `json:"iowait_pct"`
	// OthersCores is the CPU the rest of the machine used during the run, in cores: all busy
	// time less the peer's processes and the stack's services (other sessions' builds and tests).
	OthersCores float64 `json:"others_cores"`
	// GC of the peer's Go processes (GODEBUG=gctrace=1 in their logs): cycles, the sum of their
	// stop-the-world pauses, and the collector's CPU, per million source records.
	GCCycles      int     `json:"gc_cycles,omitempty"`
	GCPauseMs     float64 `json:"gc_pause_ms,omitempty"`
	GCCPUPerMilli float64 `json:"gc_cpu_seconds_per_million,omitempty"`
	// Mode is fast or slow: slow when the run's own CPU per record is 1.25 times its peer's
	// fastest run in this sitting or more; Why names the recorded conditions that differ
	// most from that fastest run's.
	Mode string `json:"mode,omitempty"`
	Why  string `json:"why,omitempty"`
}

// cpuTimes is the machine's CPU time by kind, in clock ticks (/proc/stat's first line).
type cpuTimes struct{ total, idle, iowait, steal float64 }

func readCPUTimes() cpuTimes {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return cpuTimes{}
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return cpuTimes{}
	}
	fields := strings.Fields(sc.Text()) // cpu user nice system idle iowait irq softirq steal guest guest_nice
	var v []float64
	for _, s := range fields[1:] {
		x, _ := strconv.ParseFloat(s, 64)
		v = append(v, x)
	}
	if len(v) < 8 {
		return cpuTimes{}
	}
	var t cpuTimes
	for _, x := range v[:8] { // guest time is already in user
		t.total += x
	}
	t.idle, t.iowait, t.steal = v[3], v[4], v[7]
	return t
}

// clockTicks is USER_HZ, the unit of /proc/stat (100 on Linux).
const clockTicks = 100

func load1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	x, _ := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	return x
}

// machineDuring fills the run's machine conditions from the CPU times before and after, the
// peer's and the services' CPU seconds, over seconds of drain.
func (c *conditions) machineDuring(before, after cpuTimes, peerCPU, servicesCPU, seconds float64) {
	d := after.total - before.total
	if d <= 0 || seconds <= 0 {
		return
	}
	c.StealPct = 100 * (after.steal - before.steal) / d
	c.IOWaitPct = 100 * (after.iowait - before.iowait) / d
	busy := (d - (after.idle - before.idle) - (after.iowait - before.iowait) - (after.steal - before.steal)) / clockTicks
	c.OthersCores = math.Max(0, (busy-peerCPU-servicesCPU)/seconds)
}

// gcTrace sums the gctrace lines of a Go process's log:
//
//	gc 12 @3.1s 2%: 0.020+1.5+0.031 ms clock, 0.040+0.8/1.2/0.3+0.062 ms cpu, …
//
// The first and last clock terms are the stop-the-world phases; the cpu terms are the
// collector's CPU (assist, background and idle marking included).
func gcTrace(path string) (cycles int, pauseMs, cpuMs float64) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "gc ") {
			continue
		}
		_, rest, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		clock, rest, ok := strings.Cut(rest, " ms clock, ")
		if !ok {
			continue
		}
		cpu, _, ok := strings.Cut(rest, " ms cpu")
		if !ok {
			continue
		}
		ct := splitTerms(clock)
		if len(ct) != 3 {
			continue
		}
		cycles++
		pauseMs += ct[0] + ct[2]
		for _, x := range splitTerms(cpu) {
			cpuMs += x
		}
	}
	return cycles, pauseMs, cpuMs
}

// splitTerms reads "a+b/c/d+e" as its numbers.
func splitTerms(s string) []float64 {
	var out []float64
	for _, t := range strings.FieldsFunc(s, func(r rune) bool { return r == '+' || r == '/' }) {
		x, err := strconv.ParseFloat(t, 64)
		if err != nil {
			return nil
		}
		out = append(out, x)
	}
	return out
}

// slowFactor is how much more CPU per record than its peer's fastest run in the sitting makes
// a run slow.
const slowFactor = 1.25

// classify marks each run fast or slow against the peer's fastest run, and says what differs.
func classify(runs []peerMeasure) {
	if len(runs) == 0 {
		return
	}
	best := 0
	for i, r := range runs {
		if r.CPUPerMillion > 0 && (runs[best].CPUPerMillion <= 0 || r.CPUPerMillion < runs[best].CPUPerMillion) {
			best = i
		}
	}
	b := runs[best]
	for i := range runs {
		r := &runs[i]
		if b.CPUPerMillion <= 0 || r.CPUPerMillion <= 0 {
			continue
		}
		ratio := r.CPUPerMillion / b.CPUPerMillion
		r.Cond.Mode = "fast"
		if ratio >= slowFactor {
			r.Cond.Mode = "slow"
		}
		if i == best {
			r.Cond.Why = "the fastest run of this peer in the sitting"
			continue
		}
		r.Cond.Why = fmt.Sprintf("%.2f× the CPU per record of run %d; ", ratio, b.Run) + differences(r.Cond, b.Cond, r.Records)
	}
}

// differences names the recorded conditions of a run that differ from the reference run's,
// largest first.
func differences(c, ref conditions, records int64) string {
	type diff struct {
		weight float64
		text   string
	}
	var ds []diff
	add := func(weight float64, format string, a ...any) {
		if weight > 0 {
			ds = append(ds, diff{weight, fmt.Sprintf(format, a...)})
		}
	}
	add(c.OthersCores-ref.OthersCores-0.1, "the rest of the machine used %.2f cores (%.2f)", c.OthersCores, ref.OthersCores)
	add((c.StealPct-ref.StealPct-1)/20, "steal %.1f %% (%.1f %%)", c.StealPct, ref.StealPct)
	add((c.LoadStart-ref.LoadStart-0.5)/4, "load %.1f at the start (%.1f)", c.LoadStart, ref.LoadStart)
	if ref.GCCycles > 0 {
		add(float64(c.GCCycles)/float64(ref.GCCycles)-1.2, "%d GC cycles (%d), %.1f s of GC CPU per million records (%.1f)", c.GCCycles, ref.GCCycles, c.GCCPUPerMilli, ref.GCCPUPerMilli)
	}
	add((c.IOWaitPct-ref.IOWaitPct-2)/20, "iowait %.1f %% (%.1f %%)", c.IOWaitPct, ref.IOWaitPct)
	if len(ds) == 0 {
		return "no recorded condition differs much from that run's"
	}
	slices.SortFunc(ds, func(a, b diff) int { return -compareFloat(a.weight, b.weight) })
	var parts []string
	for _, d := range ds {
		parts = append(parts, d.text)
	}
	return strings.Join(parts, "; ") + " (that run's in brackets)"
}

func compareFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// pairRatio is one ratio of two peers measured in pairs: run r of one against run r of the
// other, drained one after the other.
type pairRatio struct {
	Pairs  []float64 `json:"pairs"`
	Median float64   `json:"median"`
	Min    float64   `json:"min"`
	Max    float64   `json:"max"`
}

// pairRatios compares peer a with peer b run by run (pair r: a's run r and b's run r, drained
// back to back), for records/s and CPU per record.
func pairRatios(a, b *peerResults) map[string]pairRatio {
	out := map[string]pairRatio{}
	n := min(len(a.Runs), len(b.Runs))
	if n == 0 {
		return out
	}
	for name, f := range map[string]func(peerMeasure) float64{
		"records_per_sec":         func(m peerMeasure) float64 { return m.RecordsPerSec },
		"cpu_seconds_per_million": func(m peerMeasure) float64 { return m.CPUPerMillion },
	} {
		var pr pairRatio
		for i := range n {
			if y := f(b.Runs[i]); y > 0 {
				pr.Pairs = append(pr.Pairs, f(a.Runs[i])/y)
			}
		}
		if len(pr.Pairs) == 0 {
			continue
		}
		pr.Median, pr.Min, pr.Max = med(pr.Pairs), slices.Min(pr.Pairs), slices.Max(pr.Pairs)
		out[name] = pr
	}
	return out
}

func (c conditions) line() string {
	s := fmt.Sprintf("load %.1f→%.1f, steal %.1f %%, iowait %.1f %%, the rest of the machine %.2f cores", c.LoadStart, c.LoadEnd, c.StealPct, c.IOWaitPct, c.OthersCores)
	if c.GCCycles > 0 {
		s += fmt.Sprintf(", GC %d cycles, %.0f ms paused, %.1f s CPU per million records", c.GCCycles, c.GCPauseMs, c.GCCPUPerMilli)
	}
	if c.Mode != "" {
		s += fmt.Sprintf("; %s mode (%s)", c.Mode, c.Why)
	}
	return s
}
