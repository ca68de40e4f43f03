package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLogStats(t *testing.T) {
	log := strings.Join([]string{
		`time=2026-12-06T21:42:39.015Z level=INFO msg="[Processor b-ingest] setup generation 6, claims=map[string][]int32{}" component=goka`,
		`time=2026-12-06T21:42:39.018Z level=INFO msg="[Processor b-ingest > PartitionProcessor (2) > PartTable] Recovering from 0 to hwm=200523; (local offset is -3)" component=goka`,
		`time=2026-12-06T21:42:39.019Z level=INFO msg="[Processor b-features > PartitionProcessor (1) > PartTable] Recovering from 1001 to hwm=2001; (local offset is 1000)" component=goka`,
		`time=2026-12-06T21:42:39.143Z level=INFO msg="[Processor b-features] setup generation 6, claims=map[string][]int32{}" component=goka`,
		`time=2026-12-06T21:42:41.402Z level=INFO msg="[Processor b-ingest] setup generation 6 ... done" component=goka`,
		`time=2026-12-06T21:50:59.305Z level=INFO msg="clickhouse sink: partitions assigned" stage=sink-clickhouse part=dlq-mirror group=b-dlq-mirror partitions=[1]`,
		`time=2026-12-06T21:50:59.307Z level=INFO msg="clickhouse sink: partitions assigned" stage=sink-clickhouse group=b-sink-clickhouse partitions="[0 1]"`,
		`time=2026-12-06T21:50:59.321Z level=INFO msg="clickhouse sink: partitions assigned" stage=sink-clickhouse part=rollups group=b-sink-clickhouse-rollups partitions=[1]`,
		// A new group epoch that adds nothing to this member: no session of its own.
		`time=2026-12-06T21:51:10.811Z level=INFO msg="clickhouse sink: partitions assigned" stage=sink-clickhouse group=b-sink-clickhouse partitions=[]`,
	}, "\n")
	s, r := logStats(log)
	if s["ingest"] != 1 || s["sink-features"] != 1 || s["sink-clickhouse"] != 1 {
		t.Errorf("sessions %v, want one of each group", s)
	}
	if r != 200523+1000 {
		t.Errorf("restored %d, want %d", r, 200523+1000)
	}
}

func TestParseLag(t *testing.T) {
	page := `# HELP backflow_consumer_lag x
backflow_consumer_lag{group="g-ingest",partition="0",topic="a"} 10
backflow_consumer_lag{group="g-ingest",partition="1",topic="a"} 5
backflow_consumer_lag{group="g-features",partition="0",topic="e"} 1e+03
backflow_consumer_lag_seconds{group="g-ingest"} 99
`
	got := parseLag(strings.NewReader(page))
	if got["g-ingest"] != 15 || got["g-features"] != 1000 || len(got) != 2 {
		t.Errorf("parseLag = %v", got)
	}
}

func TestSpreadOf(t *testing.T) {
	if s := spreadOf([]float64{3, 1, 2}); s != (spread{Median: 2, Min: 1, Max: 3}) {
		t.Errorf("odd: %+v", s)
	}
	if s := spreadOf([]float64{4, 1, 2, 3}); s.Median != 2.5 {
		t.Errorf("even: %+v", s)
	}
	if s := spreadOf(nil); s != (spread{}) {
		t.Errorf("empty: %+v", s)
	}
}

func TestReadyLines(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.log")
	text := `time=2026-12-06T21:41:11.421Z level=INFO msg="sink-features ready" stage=sink-features
time=2026-12-06T21:41:12.221Z level=INFO msg="ingest ready" stage=ingest
time=2026-12-06T21:41:13.000Z level=INFO msg="ingest ready" stage=ingest
`
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	got := readyLines(p)
	want := time.Date(2026, 12, 6, 21, 41, 12, 221e6, time.UTC)
	if !got["ingest"].Equal(want) || got["sink-features"].IsZero() {
		t.Errorf("readyLines = %v", got)
	}
}

func TestSummarizeEvents(t *testing.T) {
	evs := []eventMeasure{
		{Event: eventRolling, ReadySeconds: 2, MaxRebalances: 0, StageReady: map[string]float64{"ingest": 1}},
		{Event: eventRolling, ReadySeconds: 4, MaxRebalances: 1, StageReady: map[string]float64{"ingest": 3}},
		{Event: eventFailover, ReadySeconds: 50, MaxRebalances: 1},
	}
	s := summarizeEvents(evs)
	if s[eventRolling].Samples != 2 || s[eventRolling].ReadySeconds.Median != 3 || s[eventRolling].IngestReady == nil || s[eventRolling].IngestReady.Max != 3 {
		t.Errorf("rolling: %+v", s[eventRolling])
	}
	if s[eventFailover].ReadySeconds.Median != 50 {
		t.Errorf("failover: %+v", s[eventFailover])
	}
}

func TestRestartMarkdownNoStageReady(t *testing.T) {
	res := &restartResults{Options: restartOptions{Runs: 1, Rate: 300, Standby: standbyFailover}, Sizes: []*restartSize{{Requests: 30000,
		Medians: summarizeEvents([]eventMeasure{{Event: eventFailover, ReadySeconds: 52.9, MaxRebalances: 1}})}}}
	md := restartMarkdown(res)
	if !strings.Contains(md, "| 30000 requests | failover | 1 | 0 | 52.9 | – | – | 1 |") {
		t.Errorf("markdown:\n%s", md)
	}
}

func TestSummarizeStandby(t *testing.T) {
	cs := []standbyCost{
		{Run: 1, Off: costWindow{WindowSeconds: 20, CPUCores: 0.5, StateMB: 900}, On: costWindow{WindowSeconds: 20, CPUCores: 0.6, StateMB: 2700, ChangelogRecords: 1000}},
		{Run: 2, Off: costWindow{WindowSeconds: 20, CPUCores: 0.4, StateMB: 900}, On: costWindow{WindowSeconds: 20, CPUCores: 0.6, StateMB: 1800, ChangelogRecords: 2000}},
		{Run: 3}, // no windows measured: left out
	}
	s := summarizeStandby(cs)
	if s.Samples != 2 || s.CPURatio != (spread{Median: 1.4, Min: 1.2, Max: 1.5}) || s.StateRatio != (spread{Median: 2.5, Min: 2, Max: 3}) ||
		s.ChangelogReads != (spread{Median: 150, Min: 100, Max: 200}) {
		t.Fatalf("summary %+v", *s)
	}
	if summarizeStandby(nil) != nil {
		t.Fatal("a summary of no samples")
	}
}

// TestRestartEventsValidated: --events takes a subset of the restart events and names what it
// refuses.
func TestRestartEventsValidated(t *testing.T) {
	loadgen := filepath.Join(t.TempDir(), "loadgen")
	if err := os.WriteFile(loadgen, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	o := options{records: 3, runs: 1, latencyRuns: 1, redisDB: 9, latencyFor: time.Second, restart: true,
		restartRate: 300, settleMax: time.Minute, standby: standbyAll, loadgen: loadgen, layout: layoutRun,
		peers: peerBackflow, backflow: loadgen}
	for events, want := range map[string]string{
		"rolling,failover":       "",
		"rolling,empty,failover": "",
		"rolling,crash":          `--events: "crash"`,
		"":                       `--events: ""`,
	} {
		o.restartEvents = strings.Split(events, ",")
		err := o.validate()
		switch {
		case want == "" && err != nil:
			t.Errorf("--events %q: %v, want no error", events, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("--events %q: %v, want an error naming %s", events, err, want)
		}
	}
}
