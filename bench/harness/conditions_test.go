package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGCTrace: the cycles, stop-the-world pauses and GC CPU of a log's gctrace lines, other
// lines ignored.
func TestGCTrace(t *testing.T) {
	log := filepath.Join(t.TempDir(), "stage.log")
	os.WriteFile(log, []byte(strings.Join([]string{
		`time=2026-12-05T23:00:00Z level=INFO msg="ingest ready"`,
		`gc 1 @0.012s 2%: 0.020+1.5+0.030 ms clock, 0.040+0.8/1.2/0.3+0.060 ms cpu, 4->4->1 MB, 4 MB goal, 0 MB stacks, 0 MB globals, 2 P`,
		`gc 2 @0.500s 3%: 0.100+2.0+0.200 ms clock, 0.200+1/2/3+0.400 ms cpu, 8->9->2 MB, 9 MB goal, 0 MB stacks, 0 MB globals, 2 P`,
		`gc 3 @0.9s 3%: garbled`,
	}, "\n")), 0o644)
	n, pause, cpu := gcTrace(log)
	if n != 2 || !near(pause, 0.35) || !near(cpu, 0.04+0.8+1.2+0.3+0.06+0.2+1+2+3+0.4) {
		t.Fatalf("cycles %d, pause %.3f ms, cpu %.3f ms", n, pause, cpu)
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// TestClassifyNamesTheCause: a run with 1.6 times the CPU per record of the fastest is slow, and
// its reasons start with what differs most (here the rest of the machine's CPU); a run within
// the factor is fast.
func TestClassifyNamesTheCause(t *testing.T) {
	runs := []peerMeasure{
		{Run: 1, Records: 1e6, CPUPerMillion: 75, Cond: conditions{OthersCores: 0.9, LoadStart: 5, GCCycles: 100}},
		{Run: 2, Records: 1e6, CPUPerMillion: 47, Cond: conditions{OthersCores: 0.1, LoadStart: 2, GCCycles: 95}},
		{Run: 3, Records: 1e6, CPUPerMillion: 52, Cond: conditions{OthersCores: 0.2, LoadStart: 2, GCCycles: 96}},
	}
	classify(runs)
	if runs[0].Cond.Mode != "slow" || runs[1].Cond.Mode != "fast" || runs[2].Cond.Mode != "fast" {
		t.Fatalf("modes %s %s %s", runs[0].Cond.Mode, runs[1].Cond.Mode, runs[2].Cond.Mode)
	}
	if w := runs[0].Cond.Why; !strings.HasPrefix(w, "1.60× the CPU per record of run 2; the rest of the machine used 0.90 cores (0.10)") || strings.Contains(w, "GC") {
		t.Fatalf("why: %s", w)
	}
}

// TestPairRatios: run r against run r, with the median and the spread of the pairs.
func TestPairRatios(t *testing.T) {
	a := &peerResults{Runs: []peerMeasure{{RecordsPerSec: 20, CPUPerMillion: 50}, {RecordsPerSec: 15, CPUPerMillion: 70}, {RecordsPerSec: 22, CPUPerMillion: 45}}}
	b := &peerResults{Runs: []peerMeasure{{RecordsPerSec: 40, CPUPerMillion: 50}, {RecordsPerSec: 20, CPUPerMillion: 50}, {RecordsPerSec: 44, CPUPerMillion: 50}}}
	pr := pairRatios(a, b)
	r := pr["records_per_sec"]
	if len(r.Pairs) != 3 || r.Median != 0.5 || r.Min != 0.5 || r.Max != 0.75 {
		t.Fatalf("records/s pairs %+v", r)
	}
	if c := pr["cpu_seconds_per_million"]; c.Median != 1 || c.Min != 0.9 || c.Max != 1.4 {
		t.Fatalf("cpu pairs %+v", c)
	}
}

// TestMachineDuring: steal, iowait and the rest of the machine's cores from /proc/stat deltas.
func TestMachineDuring(t *testing.T) {
	var c conditions
	// 10 s on 2 cores = 2,000 ticks: 200 idle, 100 steal, 100 iowait, so 16 s busy; the peer
	// used 9 s and the services 3, so the rest 4 s: 0.4 cores.
	c.machineDuring(cpuTimes{}, cpuTimes{total: 2000, idle: 200, steal: 100, iowait: 100}, 9, 3, 10)
	if !near(c.StealPct, 5) || !near(c.IOWaitPct, 5) || !near(c.OthersCores, 0.4) {
		t.Fatalf("%+v", c)
	}
}
