package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/backflowhq/backflow/pipelines"
)

func TestDrainOrderInterleaves(t *testing.T) {
	got := drainOrder(streamPairs, 2)
	want := []drainStep{
		{0, formatProtobuf, 1}, {0, formatAvro, 1}, {1, formatJSON, 1}, {1, formatAvro, 1},
		{0, formatProtobuf, 2}, {0, formatAvro, 2}, {1, formatJSON, 2}, {1, formatAvro, 2},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("drainOrder = %v, want %v", got, want)
	}
}

func TestRatioSpread(t *testing.T) {
	s := ratioSpread([]float64{80, 90, 70}, []float64{100, 100, 100})
	if !reflect.DeepEqual(s.Runs, []float64{0.8, 0.9, 0.7}) || s.Median != 0.8 || s.Min != 0.7 || s.Max != 0.9 {
		t.Errorf("ratioSpread = %+v", s)
	}
	// Run r against run r only: an unmatched run and a zero denominator are left out.
	s = ratioSpread([]float64{50, 60, 70}, []float64{100, 0})
	if !reflect.DeepEqual(s.Runs, []float64{0.5}) || s.Median != 0.5 {
		t.Errorf("ratioSpread with a missing run = %+v", s)
	}
	if s := ratioSpread(nil, nil); s.Runs != nil || s.Median != 0 {
		t.Errorf("empty: %+v", s)
	}
}

func TestSelectPairs(t *testing.T) {
	ps, err := selectPairs("page-view, shop-order")
	if err != nil || len(ps) != 2 || ps[0].Stream != "shop-order" || ps[1].Stream != "page-view" {
		t.Errorf("selectPairs = %v, %v; want both, in streamPairs' order", ps, err)
	}
	if _, err := selectPairs("shop-order,agent-task-event"); err == nil {
		t.Error("an unknown stream is accepted")
	}
	if _, err := selectPairs(" , "); err == nil {
		t.Error("an empty list is accepted")
	}
}

// The pairs are deploy/demo.yaml's streams, declared alike, and their schema files exist.
func TestStreamPairsMatchDemo(t *testing.T) {
	b, err := os.ReadFile("../../deploy/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var demo struct {
		Streams []struct {
			Name      string `yaml:"name"`
			DedupeKey string `yaml:"dedupe_key"`
			EventTime string `yaml:"event_time"`
		} `yaml:"streams"`
	}
	if err := yaml.Unmarshal(b, &demo); err != nil {
		t.Fatal(err)
	}
	for _, p := range streamPairs {
		found := false
		for _, s := range demo.Streams {
			if s.Name == p.Stream {
				found = true
				if s.DedupeKey != p.DedupeKey || s.EventTime != p.EventTime {
					t.Errorf("%s: dedupe_key %q, event_time %q; deploy/demo.yaml has %q, %q", p.Stream, p.DedupeKey, p.EventTime, s.DedupeKey, s.EventTime)
				}
			}
		}
		if !found {
			t.Errorf("%s is not a stream of deploy/demo.yaml", p.Stream)
		}
		if _, err := os.Stat(filepath.Join("../..", p.SchemaFile)); err != nil {
			t.Errorf("%s: %v", p.Stream, err)
		}
	}
}

// The config a drain runs with is one backflow loads, with the stream's stage alone.
func TestStreamRunConfigLoads(t *testing.T) {
	p := streamPairs[1]
	path := filepath.Join(t.TempDir(), "run.yaml")
	if err := os.WriteFile(path, []byte(streamRunConfig(p, "t.page-view.json", "g-stream", "t.dlq")), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"BACKFLOW_KAFKA_BROKERS": "127.0.0.1:9092", "BACKFLOW_REGISTRY_URL": "http://127.0.0.1:8081",
		"BACKFLOW_CLICKHOUSE_ADDR": "127.0.0.1:9000"}
	l, err := pipelines.LoadOffline(path, func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("the drain's config does not load: %v", err)
	}
	c := l.Config
	if !reflect.DeepEqual(c.Stages, []string{"stream-page-view"}) || len(c.Streams) != 1 {
		t.Fatalf("stages %v, streams %+v", c.Stages, c.Streams)
	}
	s := c.Streams[0]
	if s.Topic != "t.page-view.json" || s.Group != "g-stream" || s.DedupeKey != "view_id" || s.EventTime != "at" || c.SinkClickHouse.DLQTopic != "t.dlq" {
		t.Errorf("stream %+v, DLQ topic %q", s, c.SinkClickHouse.DLQTopic)
	}
}

func TestStreamDefaults(t *testing.T) {
	o := options{records: 1_000_000, summaryPath: "bench/latest.json", latency: true, peers: "backflow,ceiling,benthos"}
	o.streamDefaults(map[string]bool{})
	if o.records != 500_000 || o.summaryPath != "bench/stream-formats.json" || o.latency || o.peers != peerBackflow {
		t.Errorf("defaults: %+v", o)
	}
	o = options{records: 7, quick: true}
	o.streamDefaults(map[string]bool{"records": true})
	if o.records != 7 || o.summaryPath != "" {
		t.Errorf("--quick --records 7: records %d, summary %q", o.records, o.summaryPath)
	}
}

func TestStreamSummary(t *testing.T) {
	start := time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)
	drain := func(rate, cpu float64) peerMeasure {
		return peerMeasure{Records: 1030, RecordsPerSec: rate, CPUPerMillion: cpu, PeakRSSMB: 80, RowsFinal: 1000, RowsExpected: 1000}
	}
	p := &pairResults{Stream: "page-view", Format: formatJSON, Drains: map[string]*peerResults{
		formatJSON: {Runs: []peerMeasure{drain(700, 90), drain(760, 80), drain(740, 85)}},
		formatAvro: {Runs: []peerMeasure{drain(1000, 50), drain(1000, 50), drain(1000, 50)}},
	}}
	p.update()
	res := &streamResults{Started: start, Finished: start.Add(90 * time.Second), Options: streamOptions{Records: 1000, Runs: 3}, Pairs: []*pairResults{p}}
	b, err := streamSummary(res)
	if err != nil {
		t.Fatal(err)
	}
	var doc streamSummaryDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	sp := doc.Pairs[0]
	if sp.Ratio.Median != 0.74 || sp.Ratio.Min != 0.7 || sp.Ratio.Max != 0.76 || sp.MeetsTarget {
		t.Errorf("ratio %+v, meets target %v; want 0.74 (0.7-0.76), not met", sp.Ratio, sp.MeetsTarget)
	}
	if sp.CPURatio.Median != 1.7 {
		t.Errorf("CPU ratio %+v, want 1.7", sp.CPURatio)
	}
	if d := sp.Drains[formatJSON]; d.RecordsPerSec != 740 || d.CPUUsPerRecord != 85 || d.Runs != 3 {
		t.Errorf("JSON's median drain %+v", d)
	}
	if doc.Duration != "1m30s" || doc.Target != streamTarget {
		t.Errorf("duration %q, target %v", doc.Duration, doc.Target)
	}
}
