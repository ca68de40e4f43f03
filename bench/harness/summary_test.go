package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// sampleResults is a small complete run: three peers, a latency run, ratios as the harness
// computes them.
func sampleResults() *results {
	svc := func(cpu ...float64) []procMeasure {
		names := []string{"clickhouse", "kafka-1", "redis"}
		var out []procMeasure
		for i, c := range cpu {
			out = append(out, procMeasure{Name: names[i], CPUPerMillion: c})
		}
		return out
	}
	r := &results{
		Commit:  "abc1234",
		Machine: machine{Cores: 2, MemoryGiB: "23.5", CPU: "AMD EPYC", Go: "go1.26.8", LoadStart: "4.00 5.41 4.30"},
		Started: time.Date(2026, 12, 1, 19, 13, 32, 538056050, time.UTC),
		Options: options{records: 300_000, runs: 3, layout: layoutStages, latencyFor: 30 * time.Second}.summary(),
		Peers: map[string]*peerResults{
			peerBackflow: {Median: peerMeasure{Records: 308_838, Seconds: 54.41, RecordsPerSec: 6000.4, CPUPerMillion: 200.04,
				PeakRSSMB: 332.16, Rows: 300_000, RowsFinal: 300_000, RowsExpected: 300_000, Services: svc(40.74, 41.68, 18.49)}},
			peerCeiling: {Median: peerMeasure{Records: 308_838, RecordsPerSec: 24001.6, CPUPerMillion: 12.5016,
				PeakRSSMB: 140.5, Rows: 301_518, RowsFinal: 300_765, RowsExpected: 300_000, Services: svc(26.19, 1.75)}},
			peerBenthos: {Median: peerMeasure{Records: 308_838, RecordsPerSec: 4000.2667, CPUPerMillion: 320.064,
				PeakRSSMB: 613.25, Rows: 300_000, RowsFinal: 300_000, RowsExpected: 300_000}},
		},
		Latency: &latencyResults{RateRequests: 918.93, Runs: []latencyResult{{Run: 1}},
			Median: latencyResult{P50: 683.4, P95: 1267, P99: 1681.6}},
	}
	r.ratios()
	return r
}

func TestSummarize(t *testing.T) {
	s, err := summarize(sampleResults())
	if err != nil {
		t.Fatal(err)
	}
	want := &summary{
		Started:        "2026-12-01T19:13:32Z",
		Commit:         "abc1234",
		Machine:        summaryMachine{Cores: 2, CPU: "AMD EPYC", LoadStart: "4.00 5.41 4.30"},
		Options:        summaryOptions{Records: 300_000, Runs: 3, Layout: "stages"},
		BacklogRecords: 308_838,
		RowsExpected:   300_000,
		Peers: map[string]summaryPeer{
			"backflow": {RecordsPerSec: 6000, CPUPerRecord: 200, ServicesCPU: 100.9, PeakRSSMB: 332, Rows: 300_000, RowsFinal: 300_000,
				Latency: &summaryLatency{RateRequests: 919, P50: 683, P99: 1682}},
			"ceiling": {RecordsPerSec: 24002, CPUPerRecord: 12.5, ServicesCPU: 27.9, PeakRSSMB: 141, Rows: 301_518, RowsFinal: 300_765},
			"benthos": {RecordsPerSec: 4000, CPUPerRecord: 320.1, PeakRSSMB: 613, Rows: 300_000, RowsFinal: 300_000},
		},
		// 6000.4/24001.6 = 0.25, 200.04/12.5016 = 16.001, 6000.4/4000.2667 = 1.5, 200.04/320.064 = 0.625
		Ratios: &summaryRatios{CeilingRecordsPerSec: 0.25, CeilingCPU: 16.001, BenthosRecordsPerSec: 1.5, BenthosCPU: 0.625},
	}
	if !reflect.DeepEqual(s, want) {
		got, _ := s.json()
		exp, _ := want.json()
		t.Fatalf("summary:\n%s\nwant:\n%s", got, exp)
	}

	b, err := s.json()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) >= 4096 {
		t.Fatalf("summary is %d bytes, want < 4 KB", len(b))
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	bf := m["peers"].(map[string]any)["backflow"].(map[string]any)
	for _, k := range []string{"records_per_sec", "cpu_us_per_record", "services_cpu_us_per_record", "peak_rss_mb", "clickhouse_rows", "clickhouse_rows_final", "latency"} {
		if _, ok := bf[k]; !ok {
			t.Errorf("peers.backflow has no %q: %v", k, bf)
		}
	}
	if _, ok := m["peers"].(map[string]any)["ceiling"].(map[string]any)["latency"]; ok {
		t.Error("the ceiling has a latency, but only backflow's is measured")
	}
	if _, ok := m["drains"]; ok {
		t.Error("a run's own summary has drains")
	}
	if r := m["ratios"].(map[string]any); r["backflow_benthos_records_per_sec"] != 1.5 {
		t.Errorf("ratios %v", r)
	}
}

func TestSummarizeFiles(t *testing.T) {
	dir := t.TempDir()
	put := func(name string, r *results) string {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	run := sampleResults()
	run.Commit = "" // as in files from before the harness recorded it
	drain := &results{
		Started: time.Date(2026, 12, 1, 19, 48, 59, 0, time.UTC),
		Options: options{records: 10_000_000, runs: 1, layout: layoutRun}.summary(),
		Peers: map[string]*peerResults{peerBackflow: {Median: peerMeasure{Records: 10_298_703, Seconds: 2669.81,
			RecordsPerSec: 3857.46, CPUPerMillion: 308.056, PeakRSSMB: 286.117, Rows: 10_000_002}}},
	}
	b, err := summarizeFiles([]string{put("run.json", run), put("drain.json", drain)}, "3fd8857")
	if err != nil {
		t.Fatal(err)
	}
	var s summary
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if s.Commit != "3fd8857" || s.Peers["backflow"].RecordsPerSec != 6000 || len(s.Drains) != 1 {
		t.Fatalf("summary %s", b)
	}
	wantDrain := summaryDrain{Started: "2026-12-01T19:48:59Z", Commit: "3fd8857", Layout: "run", Records: 10_298_703,
		Seconds: 2670, RecordsPerSec: 3857, CPUPerRecord: 308.1, PeakRSSMB: 286, Rows: 10_000_002}
	if s.Drains[0] != wantDrain {
		t.Fatalf("drain %+v, want %+v", s.Drains[0], wantDrain)
	}

	partial := sampleResults()
	partial.Partial = true
	if _, err := summarizeFiles([]string{put("partial.json", partial)}, ""); err == nil || !strings.Contains(err.Error(), "partial") {
		t.Fatalf("a partial run's summary: err %v, want one saying it is partial", err)
	}
	delete(drain.Peers, peerBackflow)
	drain.Peers[peerCeiling] = &peerResults{}
	if _, err := summarizeFiles([]string{put("run2.json", run), put("nobackflow.json", drain)}, ""); err == nil {
		t.Fatal("a drain without backflow's figures was summarized")
	}
}
