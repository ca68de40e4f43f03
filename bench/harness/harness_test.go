package main

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestSteadyRate(t *testing.T) {
	// 1,000 records: 10 % committed at 2 s, 90 % at 6 s → 800 records in 4 s.
	series := []point{{time.Second, 0}, {2 * time.Second, 100}, {4 * time.Second, 500}, {6 * time.Second, 900}, {7 * time.Second, 1000}}
	if got := steadyRate(series, 1000); got != 200 {
		t.Fatalf("steady rate %v, want 200", got)
	}
	if got := steadyRate(series[:3], 1000); got != 0 {
		t.Fatalf("steady rate before 90 %% %v, want 0", got)
	}
	if got := steadyRate(nil, 0); got != 0 {
		t.Fatalf("steady rate of nothing %v, want 0", got)
	}
}

func TestMedian(t *testing.T) {
	if m := med([]float64{3, 1, 2}); m != 2 {
		t.Fatalf("median %v, want 2", m)
	}
	if m := med([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Fatalf("median %v, want 2.5", m)
	}
	runs := []peerMeasure{
		{RecordsPerSec: 100, Stages: []stageMeasure{{RecordsPerSec: 10}}, Procs: []procMeasure{{CPUSeconds: 5}}},
		{RecordsPerSec: 300, Stages: []stageMeasure{{RecordsPerSec: 30}}, Procs: []procMeasure{{CPUSeconds: 1}}},
		{RecordsPerSec: 200, Stages: []stageMeasure{{RecordsPerSec: 20}}, Procs: []procMeasure{{CPUSeconds: 3}}},
	}
	m := median(runs)
	if m.RecordsPerSec != 200 || m.Stages[0].RecordsPerSec != 20 || m.Procs[0].CPUSeconds != 3 {
		t.Fatalf("median %+v", m)
	}
	if runs[0].Stages[0].RecordsPerSec != 10 {
		t.Fatal("median changed the first run's stages")
	}
}

// TestReadProc reads the test process's own /proc entry after burning some CPU and memory.
func TestReadProc(t *testing.T) {
	buf := make([]byte, 64<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	for start := time.Now(); time.Since(start) < 200*time.Millisecond; {
	}
	s, err := readProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if s.CPU < 0.1 || s.RSS < 64<<20 || s.PeakRSS < s.RSS {
		t.Fatalf("sample %+v: want CPU >= 0.1 s and RSS >= 64 MiB <= peak", s)
	}
	_ = buf[len(buf)-1]
}

// TestPeerRunsDoNotShare: two runs of a peer, and two peers, never share a group, a topic or a
// database, so one run's state cannot leak into another's figures.
func TestPeerRunsDoNotShare(t *testing.T) {
	h := &harness{opt: options{backflow: "bin/backflow", ceiling: "bin/bench-ceiling", benthos: "benthos", benthosConfig: "c.yaml", redisDB: 9}, tmp: t.TempDir()}
	h.conn.Kafka.Brokers = []string{"127.0.0.1:1"}
	bl := backlog{tag: "b1", inference: "b1.inf", gateway: "b1.gw"}
	seen := map[string]string{}
	for _, p := range allPeers {
		for run := 1; run <= 2; run++ {
			pr := h.newPeerRun(p, run, bl, bl.tag, "")
			if len(pr.stages) == 0 || pr.db == "" || strings.ContainsAny(pr.db, "-.") {
				t.Fatalf("%s run %d: %+v", p, run, pr)
			}
			names := append(append([]string{pr.db}, pr.groups...), pr.topics...)
			for _, n := range names {
				if prev, dup := seen[n]; dup {
					t.Fatalf("%q used by %s and %s run %d", n, prev, p, run)
				}
				seen[n] = p
			}
			for _, s := range pr.stages {
				if s.group == "" || len(s.topics) == 0 {
					t.Fatalf("%s/%s: no group or topics to measure progress on", p, s.name)
				}
			}
		}
	}
}
