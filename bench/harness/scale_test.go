package main

import (
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseSizes(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []int
		wantErr string
	}{
		{name: "suffixes", in: "100k,1M,10M", want: []int{100_000, 1_000_000, 10_000_000}},
		{name: "plain and spaces", in: " 20000 , 50k ", want: []int{20_000, 50_000}},
		{name: "not increasing", in: "1M,100k", wantErr: "must increase"},
		{name: "not a number", in: "100k,lots", wantErr: `"lots"`},
		{name: "zero", in: "0", wantErr: "positive"},
		{name: "empty", in: ",", wantErr: "no size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseSizes(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseSizes(%q) = %v, %v; want an error with %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("parseSizes(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
}

// scaleResults is a scale run over two backlog sizes, backflow and the ceiling at each, as
// scaleRuns leaves it.
func scaleResults() *results {
	pm := func(records int64, rps, cpu float64, svc ...float64) *peerResults {
		m := peerMeasure{Records: records, Seconds: float64(records) / rps, RecordsPerSec: rps, CPUPerMillion: cpu, PeakRSSMB: 300,
			Rows: uint64(records) * 97 / 100, RowsFinal: uint64(records) * 97 / 100}
		for i, s := range svc {
			m.Services = append(m.Services, procMeasure{Name: []string{"clickhouse", "kafka-1"}[i], CPUPerMillion: s})
		}
		return &peerResults{Runs: []peerMeasure{m}, Median: m}
	}
	r := &results{
		Commit:  "abc1234",
		Machine: machine{Cores: 2, CPU: "AMD EPYC"},
		Started: time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC),
		Options: options{records: 1_000_000, runs: 1, layout: layoutStages, scale: []int{20_000, 50_000}}.summary(),
		Scale: []scalePoint{
			{Asked: 20_000, Backlog: map[string]any{"records": int64(20_600), "requests": 6_667},
				Peers: map[string]*peerResults{peerBackflow: pm(20_600, 8000, 120.04, 40, 20), peerCeiling: pm(20_600, 30000, 7, 10)}},
			{Asked: 50_000, Backlog: map[string]any{"records": int64(51_500), "requests": 16_667},
				Peers: map[string]*peerResults{peerBackflow: pm(51_500, 7500, 130, 41, 22.26), peerCeiling: pm(51_500, 32000, 6.5, 9)}},
		},
	}
	r.pickScalePoint(1_000_000)
	return r
}

func TestScaleSummary(t *testing.T) {
	r := scaleResults()
	// --records (1M) is not a size of the run, so the largest backlog stands for the run.
	if got := number(r.Backlog["records"]); got != 51_500 {
		t.Fatalf("picked the backlog of %v records, want the largest (51500)", got)
	}
	if got := r.Ratios["backflow/ceiling records_per_sec"]; got != 7500.0/32000 {
		t.Fatalf("ratio from the picked backlog = %v, want %v", got, 7500.0/32000)
	}
	s, err := summarize(r)
	if err != nil {
		t.Fatal(err)
	}
	want := []summaryScale{
		{Records: 20_600, Peers: map[string]summaryScalePeer{
			peerBackflow: {RecordsPerSec: 8000, Seconds: 3, CPUPerRecord: 120, ServicesCPU: 60, PeakRSSMB: 300, Rows: 19_982, RowsFinal: 19_982},
			peerCeiling:  {RecordsPerSec: 30000, Seconds: 1, CPUPerRecord: 7, ServicesCPU: 10, PeakRSSMB: 300, Rows: 19_982, RowsFinal: 19_982},
		}},
		{Records: 51_500, Peers: map[string]summaryScalePeer{
			peerBackflow: {RecordsPerSec: 7500, Seconds: 7, CPUPerRecord: 130, ServicesCPU: 63.3, PeakRSSMB: 300, Rows: 49_955, RowsFinal: 49_955},
			peerCeiling:  {RecordsPerSec: 32000, Seconds: 2, CPUPerRecord: 6.5, ServicesCPU: 9, PeakRSSMB: 300, Rows: 49_955, RowsFinal: 49_955},
		}},
	}
	if !reflect.DeepEqual(s.Scale, want) {
		t.Fatalf("scale summary:\n got %+v\nwant %+v", s.Scale, want)
	}
	if s.Options.Scale != "20000,50000" {
		t.Fatalf("options.scale = %q, want the sizes asked for", s.Options.Scale)
	}
	if s.BacklogRecords != 51_500 || s.Peers[peerBackflow].RecordsPerSec != 7500 {
		t.Fatalf("summary peers are not the picked backlog's: backlog %d, backflow %+v", s.BacklogRecords, s.Peers[peerBackflow])
	}
	b, err := s.json()
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if n := len(back["scale"].([]any)); n != 2 {
		t.Fatalf("latest.json has %d scale entries, want 2:\n%s", n, b)
	}
	// A results file read back from JSON (numbers as float64) gives the same summary.
	var rt results
	raw, _ := json.Marshal(r)
	if err := json.Unmarshal(raw, &rt); err != nil {
		t.Fatal(err)
	}
	if got := summarizeScale(&rt); !reflect.DeepEqual(got, want) {
		t.Fatalf("after a JSON round trip:\n got %+v\nwant %+v", got, want)
	}
	if got := rt.recordsPerRequest(); got != 51_500.0/16_667 {
		t.Fatalf("recordsPerRequest after a JSON round trip = %v", got)
	}
}

func TestScalePickNamedSize(t *testing.T) {
	r := scaleResults()
	r.pickScalePoint(20_000)
	if got := number(r.Backlog["records"]); got != 20_600 {
		t.Fatalf("--records 20000 picked the backlog of %v records, want 20600", got)
	}
}

func TestPlotScale(t *testing.T) {
	path := filepath.Join(t.TempDir(), "docs", "scale.png")
	if err := plotScale(scaleResults(), path); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	if err != nil {
		t.Fatalf("the plot is not a PNG: %v", err)
	}
	// 8 × 4.5 inches at gonum/plot's default 96 dpi.
	if cfg.Width != 768 || cfg.Height != 432 {
		t.Fatalf("plot is %d×%d pixels, want 768×432", cfg.Width, cfg.Height)
	}
	if err := plotScale(&results{}, path); err == nil {
		t.Fatal("plotScale of a run without scale points: no error")
	}
}

func TestDrainTimeout(t *testing.T) {
	h := &harness{opt: options{timeout: 20 * time.Minute}}
	if got := h.drainTimeout(10_000_000); got != 20*time.Minute {
		t.Fatalf("outside scale mode: %v, want --timeout", got)
	}
	h.opt.scale = []int{100_000, 10_000_000}
	if got := h.drainTimeout(100_000); got != 20*time.Minute {
		t.Fatalf("scale mode, 100k: %v, want --timeout", got)
	}
	if got := h.drainTimeout(10_000_000); got != 12_000*time.Second {
		t.Fatalf("scale mode, 10M: %v, want 12000s", got)
	}
}
