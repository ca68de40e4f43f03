package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/backflowhq/backflow/pipelines"
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
			if len(pr.procs) == 0 {
				t.Fatalf("%s run %d: no process", p, run)
			}
		}
	}
}

// TestRunConfigLoads: the config file of a run-layout backflow run is one backflow run accepts,
// with every stage, the run's own names and a metrics port of its own.
func TestRunConfigLoads(t *testing.T) {
	h := &harness{opt: options{backflow: "bin/backflow", layout: layoutRun, redisDB: 9}, tmp: t.TempDir()}
	bl := backlog{tag: "b1", inference: "b1.inf", gateway: "b1.gw"}
	pr := h.newPeerRun(peerBackflow, 2, bl, bl.tag, "")
	if len(pr.procs) != 1 || len(pr.stages) != 3 || len(pr.files) != 1 {
		t.Fatalf("run layout: %d processes, %d stages, %d files; want 1, 3, 1", len(pr.procs), len(pr.stages), len(pr.files))
	}
	if err := pr.writeFiles(); err != nil {
		t.Fatal(err)
	}
	var path string
	for p := range pr.files {
		path = p
	}
	addrs := map[string]string{"BACKFLOW_KAFKA_BROKERS": "k:9092", "BACKFLOW_REGISTRY_URL": "http://r:8081", "BACKFLOW_CLICKHOUSE_ADDR": "ch:9000",
		"BACKFLOW_REDIS_ADDR": "r:6379", "BACKFLOW_SENSITIVE_WORDS_URL": "http://sw:8090"} // the stack's, from the environment
	l, err := pipelines.Load(path, func(k string) string { return addrs[k] })
	if err != nil {
		t.Fatalf("backflow run would refuse %s: %v", path, err)
	}
	f := l.Config
	if strings.Join(f.Stages, ",") != "ingest,sink-clickhouse,sink-features" || f.Metrics.Addr != "127.0.0.1:0" {
		t.Fatalf("stages %v, metrics %q", f.Stages, f.Metrics.Addr)
	}
	if f.Ingest.Group != pr.stages[0].group || f.SinkClickHouse.Group != pr.stages[1].group || f.SinkFeatures.Group != pr.stages[2].group {
		t.Fatalf("groups %q %q %q, want %v", f.Ingest.Group, f.SinkClickHouse.Group, f.SinkFeatures.Group, pr.stages)
	}
	if f.Ingest.InferenceTopic != bl.inference || f.Ingest.GatewayTopic != bl.gateway || f.SinkFeatures.EnrichedTopic != f.Ingest.EnrichedTopic ||
		f.SinkClickHouse.Topic != f.Ingest.EnrichedTopic || f.SinkFeatures.Project != "bench" {
		t.Fatalf("topics: %+v %+v %+v", f.Ingest, f.SinkClickHouse, f.SinkFeatures)
	}
	stages := &harness{opt: options{backflow: "bin/backflow", layout: layoutStages, redisDB: 9}, tmp: t.TempDir()}
	if pr := stages.newPeerRun(peerBackflow, 1, bl, bl.tag, ""); len(pr.procs) != 3 || len(pr.stages) != 3 {
		t.Fatalf("stages layout: %d processes, %d stages; want 3 and 3", len(pr.procs), len(pr.stages))
	}
}

// TestBackflowCopies: backflow-xN runs N copies of backflow's processes on the same groups and
// topics, each copy with its own storage and config file; other names are not backflow.
func TestBackflowCopies(t *testing.T) {
	for peer, want := range map[string]int{"backflow": 1, "backflow-x2": 2, "backflow-x3": 3, "backflow-x4": 0, "backflow-x0": 0, "backflow-xx": 0, "ceiling": 0} {
		if n, ok := backflowCopies(peer); n != want || ok != (want > 0) {
			t.Errorf("backflowCopies(%q) = %d, %v; want %d", peer, n, ok, want)
		}
	}
	bl := backlog{tag: "b1", inference: "b1.inf", gateway: "b1.gw"}
	for _, layout := range []string{layoutRun, layoutStages} {
		h := &harness{opt: options{backflow: "bin/backflow", layout: layout, redisDB: 9}, tmp: t.TempDir()}
		one, three := h.newPeerRun(peerBackflow, 1, bl, bl.tag, ""), h.newPeerRun("backflow-x3", 1, bl, bl.tag, "")
		if len(three.procs) != 3*len(one.procs) || len(three.dirs) != 3*len(one.dirs) || len(three.files) != 3*len(one.files) {
			t.Fatalf("%s layout: x3 has %d processes, %d dirs, %d files; x1 %d, %d, %d", layout,
				len(three.procs), len(three.dirs), len(three.files), len(one.procs), len(one.dirs), len(one.files))
		}
		// Every copy joins the stage's one group (the run layout's copies: the same config
		// but for the storage folder).
		groups := map[string]int{}
		for _, p := range three.procs {
			if i := slices.Index(p.args, "--group"); i >= 0 {
				groups[p.args[i+1]]++
			}
		}
		for _, body := range three.files {
			for _, st := range three.stages {
				if strings.Contains(body, st.group+"\n") {
					groups[st.group]++
				}
			}
		}
		for _, st := range three.stages {
			if groups[st.group] != 3 {
				t.Fatalf("%s layout: %d copies join group %s, want 3 (%v)", layout, groups[st.group], st.group, groups)
			}
		}
		seen := map[string]bool{}
		for _, p := range three.procs {
			if seen[p.name] {
				t.Fatalf("%s layout: process name %s twice", layout, p.name)
			}
			seen[p.name] = true
		}
		for _, d := range three.dirs {
			if seen[d] {
				t.Fatalf("%s layout: storage %s shared by two copies", layout, d)
			}
			seen[d] = true
		}
	}
}
