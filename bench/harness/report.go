package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Results as written to <out>/<stamp>.json (default .bench/results, ignored by git); every
// figure of a peer's Median is the median over its runs.
type results struct {
	Partial   bool                    `json:"partial,omitempty"` // written while the benchmark still ran (or after it failed)
	Commit    string                  `json:"commit,omitempty"`  // git rev-parse --short HEAD at the start; absent in files from before it was recorded
	Machine   machine                 `json:"machine"`
	Started   time.Time               `json:"started"`
	Finished  time.Time               `json:"finished"`
	LoadAfter string                  `json:"load_average_after"`
	Options   map[string]string       `json:"options"`
	Backlog   map[string]any          `json:"backlog"`
	Peers     map[string]*peerResults `json:"peers"`
	Ratios    map[string]float64      `json:"ratios"`
	// PairRatios compares backflow with each other peer pair by pair (run r with run r,
	// drained back to back): "backflow/ceiling" → records_per_sec, cpu_seconds_per_million.
	PairRatios map[string]map[string]pairRatio `json:"pair_ratios,omitempty"`
	Latency    *latencyResults                 `json:"latency,omitempty"`
	ProfileDir string                          `json:"profile_dir,omitempty"`
	Profiles   map[string]string               `json:"profiles,omitempty"` // stage/kind → top of the profile
	// Scale holds every backlog size of a scale run (--scale); Backlog and Peers are then
	// those of one of them (see pickScalePoint).
	Scale []scalePoint `json:"scale,omitempty"`
}

type machine struct {
	Cores     int    `json:"cores"`
	MemoryGiB string `json:"memory_gib"`
	CPU       string `json:"cpu"`
	Go        string `json:"go"`
	Kernel    string `json:"kernel"`
	LoadStart string `json:"load_average_start"`
}

func (m machine) String() string {
	return fmt.Sprintf("%d cores (%s), %s GiB, %s, %s; load average %s", m.Cores, m.CPU, m.MemoryGiB, m.Go, m.Kernel, m.LoadStart)
}

type peerResults struct {
	Runs   []peerMeasure `json:"runs"`
	Median peerMeasure   `json:"median"`
}

type peerMeasure struct {
	Peer          string         `json:"peer"`
	Run           int            `json:"run,omitempty"`
	Records       int64          `json:"records"`
	Seconds       float64        `json:"seconds"`
	RecordsPerSec float64        `json:"records_per_sec"`
	CPUPerMillion float64        `json:"cpu_seconds_per_million"` // all of the peer's processes
	PeakRSSMB     float64        `json:"peak_rss_mb"`             // sum over its processes
	Stages        []stageMeasure `json:"stages"`
	Procs         []procMeasure  `json:"processes"`
	Services      []procMeasure  `json:"services"` // stack services' CPU during the run
	Rows          uint64         `json:"clickhouse_rows"`
	RowsFinal     uint64         `json:"clickhouse_rows_final"`
	RowsExpected  uint64         `json:"clickhouse_rows_expected"` // the backlog's valid originals
	RedisKeys     int64          `json:"redis_keys,omitempty"`
	Restarts      int            `json:"restarts,omitempty"` // processes started again after dying in start-up
	// KafkaWritten counts the records the peer wrote to Kafka (its own topics' end offsets),
	// KafkaConsumed those its consumer groups read (their commits), both per source record.
	KafkaWritten  float64 `json:"kafka_written_per_record"`
	KafkaConsumed float64 `json:"kafka_consumed_per_record"`
	// Cond is what could have made the run slow (conditions.go), and which mode it was in.
	Cond conditions `json:"conditions"`
}

type stageMeasure struct {
	Stage         string  `json:"stage"`
	Group         string  `json:"group"`
	Input         int64   `json:"input_records"`
	Seconds       float64 `json:"seconds"`
	RecordsPerSec float64 `json:"records_per_sec"`
	SteadyPerSec  float64 `json:"steady_records_per_sec"` // between 10 % and 90 % committed
}

type procMeasure struct {
	Name          string  `json:"name"`
	CPUSeconds    float64 `json:"cpu_seconds"`
	CPUPerMillion float64 `json:"cpu_seconds_per_million"`
	PeakRSSMB     float64 `json:"peak_rss_mb"`
	Cores         float64 `json:"cores_busy"` // CPU seconds / drain seconds: < 1 means it mostly waited
}

type latencyResults struct {
	RateRequests float64         `json:"rate_requests_per_sec"`
	Duration     string          `json:"duration"`
	Runs         []latencyResult `json:"runs"`
	Median       latencyResult   `json:"median"`
}

type latencyResult struct {
	Run      int     `json:"run,omitempty"`
	Requests int     `json:"requests"`
	Samples  uint64  `json:"samples"`
	P50      float64 `json:"p50_ms"`
	P95      float64 `json:"p95_ms"`
	P99      float64 `json:"p99_ms"`
	Max      float64 `json:"max_ms"`
	Restarts int     `json:"restarts,omitempty"`
}

func (m peerMeasure) line() string {
	return fmt.Sprintf("%d records in %.1fs = %.0f records/s; %.1f CPU s per million; peak RSS %.0f MB; ClickHouse rows %d (FINAL %d, originals %d)",
		m.Records, m.Seconds, m.RecordsPerSec, m.CPUPerMillion, m.PeakRSSMB, m.Rows, m.RowsFinal, m.RowsExpected)
}

func med(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// median takes the median of every figure over runs, stage by stage and process by process.
func median(runs []peerMeasure) peerMeasure {
	if len(runs) == 0 {
		return peerMeasure{}
	}
	pick := func(f func(peerMeasure) float64) float64 {
		xs := make([]float64, len(runs))
		for i, r := range runs {
			xs[i] = f(r)
		}
		return med(xs)
	}
	m := runs[0]
	m.Run = 0
	m.Seconds = pick(func(r peerMeasure) float64 { return r.Seconds })
	m.RecordsPerSec = pick(func(r peerMeasure) float64 { return r.RecordsPerSec })
	m.CPUPerMillion = pick(func(r peerMeasure) float64 { return r.CPUPerMillion })
	m.PeakRSSMB = pick(func(r peerMeasure) float64 { return r.PeakRSSMB })
	m.Rows = uint64(pick(func(r peerMeasure) float64 { return float64(r.Rows) }))
	m.RowsFinal = uint64(pick(func(r peerMeasure) float64 { return float64(r.RowsFinal) }))
	m.RedisKeys = int64(pick(func(r peerMeasure) float64 { return float64(r.RedisKeys) }))
	m.KafkaWritten = pick(func(r peerMeasure) float64 { return r.KafkaWritten })
	m.KafkaConsumed = pick(func(r peerMeasure) float64 { return r.KafkaConsumed })
	m.Stages = append([]stageMeasure(nil), runs[0].Stages...)
	for i := range m.Stages {
		m.Stages[i].Seconds = pick(func(r peerMeasure) float64 { return r.Stages[i].Seconds })
		m.Stages[i].RecordsPerSec = pick(func(r peerMeasure) float64 { return r.Stages[i].RecordsPerSec })
		m.Stages[i].SteadyPerSec = pick(func(r peerMeasure) float64 { return r.Stages[i].SteadyPerSec })
		m.Stages[i].Input = int64(pick(func(r peerMeasure) float64 { return float64(r.Stages[i].Input) }))
		m.Stages[i].Group = ""
	}
	m.Procs = append([]procMeasure(nil), runs[0].Procs...)
	for i := range m.Procs {
		m.Procs[i].CPUSeconds = pick(func(r peerMeasure) float64 { return r.Procs[i].CPUSeconds })
		m.Procs[i].CPUPerMillion = pick(func(r peerMeasure) float64 { return r.Procs[i].CPUPerMillion })
		m.Procs[i].PeakRSSMB = pick(func(r peerMeasure) float64 { return r.Procs[i].PeakRSSMB })
		m.Procs[i].Cores = pick(func(r peerMeasure) float64 { return r.Procs[i].Cores })
	}
	m.Services = nil
	names := map[string][]float64{}
	for _, r := range runs {
		for _, s := range r.Services {
			names[s.Name] = append(names[s.Name], s.CPUPerMillion)
		}
	}
	for n, xs := range names {
		m.Services = append(m.Services, procMeasure{Name: n, CPUPerMillion: med(xs)})
	}
	sort.Slice(m.Services, func(i, j int) bool { return m.Services[i].Name < m.Services[j].Name })
	return m
}

func medianLatency(runs []latencyResult) latencyResult {
	pick := func(f func(latencyResult) float64) float64 {
		xs := make([]float64, len(runs))
		for i, r := range runs {
			xs[i] = f(r)
		}
		return med(xs)
	}
	return latencyResult{
		Requests: int(pick(func(r latencyResult) float64 { return float64(r.Requests) })),
		Samples:  uint64(pick(func(r latencyResult) float64 { return float64(r.Samples) })),
		P50:      pick(func(r latencyResult) float64 { return r.P50 }),
		P95:      pick(func(r latencyResult) float64 { return r.P95 }),
		P99:      pick(func(r latencyResult) float64 { return r.P99 }),
		Max:      pick(func(r latencyResult) float64 { return r.Max }),
	}
}

// ratios compares backflow's median drain rate with each peer's (> 1: backflow is faster).
func (r *results) ratios() {
	r.Ratios = map[string]float64{}
	r.PairRatios = map[string]map[string]pairRatio{}
	b := r.Peers[peerBackflow]
	if b == nil || b.Median.RecordsPerSec == 0 {
		return
	}
	for p, o := range r.Peers {
		if p != peerBackflow {
			r.PairRatios["backflow/"+p] = pairRatios(b, o)
		}
	}
	for _, p := range []string{peerCeiling, peerBenthos} {
		if o := r.Peers[p]; o != nil && o.Median.RecordsPerSec > 0 {
			r.Ratios["backflow/"+p+" records_per_sec"] = b.Median.RecordsPerSec / o.Median.RecordsPerSec
			if o.Median.CPUPerMillion > 0 {
				r.Ratios["backflow/"+p+" cpu_seconds_per_million"] = b.Median.CPUPerMillion / o.Median.CPUPerMillion
			}
		}
	}
}

func (o options) summary() map[string]string {
	return map[string]string{
		"records": strconv.Itoa(o.records), "runs": strconv.Itoa(o.runs), "peers": o.peers, "quick": strconv.FormatBool(o.quick),
		"latency_rate": strconv.FormatFloat(o.latencyRate, 'f', -1, 64), "latency_duration": o.latencyFor.String(),
		"latency_runs": strconv.Itoa(o.latencyRuns), "backflow_layout": o.layout, "scale": scaleList(o.scale),
	}
}

// scaleList writes --scale's sizes back as a comma-separated list ("" outside scale mode).
func scaleList(sizes []int) string {
	s := make([]string, len(sizes))
	for i, n := range sizes {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func (b backlog) summary() map[string]any {
	poison := 0
	for _, n := range b.stats.Poison {
		poison += n
	}
	return map[string]any{
		"inference_topic": b.inference, "gateway_topic": b.gateway, "records": b.records, "requests": b.stats.Requests,
		"originals": b.stats.Originals, "duplicates": b.stats.Duplicates, "cross_partition_duplicates": b.stats.CrossPartition,
		"poison": poison, "sensitive": b.stats.Sensitive, "partitions": partitions, "loadgen_seconds": b.stats.Elapsed.Seconds(),
	}
}

func machineInfo() machine {
	m := machine{Cores: runtime.NumCPU(), Go: runtime.Version(), LoadStart: loadAverage()}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemTotal:" {
				kb, _ := strconv.ParseFloat(f[1], 64)
				m.MemoryGiB = strconv.FormatFloat(kb/(1<<20), 'f', 1, 64)
			}
		}
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "Linux " + strings.TrimSpace(string(b))
	}
	return m
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// profileTops runs `go tool pprof -top` over each profile in dir and keeps the text.
func (h *harness) profileTops(dir string) map[string]string {
	out := map[string]string{}
	files, _ := filepath.Glob(filepath.Join(dir, "*.pprof"))
	for _, f := range files {
		args := []string{"tool", "pprof", "-top", "-nodecount=25"}
		if strings.HasSuffix(f, ".alloc.pprof") {
			args = append(args, "-sample_index=alloc_space")
		}
		for _, view := range []string{"flat", "cum"} {
			a := append([]string(nil), args...)
			if view == "cum" {
				a = append(a, "-cum")
			}
			b, err := exec.Command("go", append(a, h.opt.backflow, f)...).Output()
			if err != nil {
				continue
			}
			name := strings.TrimSuffix(filepath.Base(f), ".pprof") + "." + view
			out[name] = string(b)
			_ = os.WriteFile(filepath.Join(dir, name+".txt"), b, 0o644)
		}
	}
	return out
}

// write stores the results as <out>/<stamp>[-quick].json and .md, and returns the paths.
func (r *results) write(out, stamp string, quick bool) ([]string, error) {
	name := stamp
	if quick {
		name += "-quick"
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	jp, mp := filepath.Join(out, name+".json"), filepath.Join(out, name+".md")
	if err := os.WriteFile(jp, append(js, '\n'), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(mp, []byte(r.markdown()), 0o644); err != nil {
		return nil, err
	}
	return []string{jp, mp}, nil
}

func (r *results) markdown() string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w("# backflow benchmark, %s\n\n", r.Started.Format("2006-01-02 15:04 UTC"))
	if r.Partial {
		w("**Partial**: written at %s while the benchmark was still running, or after it failed; what follows is what was measured by then.\n\n", r.Finished.Format("15:04:05 UTC"))
	}
	w("Machine: %s. Load average at the end: %s. Every figure is the median of %s run(s); the machine may be shared, so absolute numbers are noisy and the ratios (same backlog, same run) are what to compare.\n\n",
		r.Machine, r.LoadAfter, r.Options["runs"])
	if r.Peers[peerBase] != nil {
		w("backflow-base is backflow built from another commit (`--base`), run the same way, one run of each after the other.\n\n")
	}
	w("Backlog: %v source records (%v requests: %v originals, %v duplicates, %v poison) over 2 topics × %d partitions.\n\n",
		r.Backlog["records"], r.Backlog["requests"], r.Backlog["originals"], r.Backlog["duplicates"], r.Backlog["poison"], partitions)
	switch r.Options["backflow_layout"] {
	case layoutStages:
		w("backflow ran as one process per stage (`--backflow-layout stages`): ingest, sink-clickhouse, sink-features; its CPU and peak RSS are their sums.\n\n")
	case layoutRun:
		w("backflow ran as `make demo` runs it: one `backflow run` process with every stage.\n\n")
	}
	if names := r.peerNames(); len(names) > 0 && strings.Contains(names[len(names)-1], "-x") {
		w("backflow-x*N* is *N* copies of backflow's processes sharing its consumer groups; its CPU and peak RSS are the sums over the copies.\n\n")
	}
	if len(r.Scale) > 0 {
		w("## Against the backlog's size\n\n| backlog records | peer | records/s | seconds | CPU µs per record | services µs per record | peak RSS MB | ClickHouse rows (FINAL) |\n|---:|---|---:|---:|---:|---:|---:|---:|\n")
		for _, s := range summarizeScale(r) {
			for _, p := range r.peerNames() {
				if m, ok := s.Peers[p]; ok {
					w("| %d | %s | %.0f | %.0f | %.1f | %.1f | %.0f | %d (%d) |\n", s.Records, p, m.RecordsPerSec, m.Seconds, m.CPUPerRecord, m.ServicesCPU, m.PeakRSSMB, m.Rows, m.RowsFinal)
				}
			}
		}
		w("\nThe sections below are the backlog of %v records.\n\n", r.Backlog["records"])
	}
	w("## Draining the backlog\n\n")
	w("| peer | records/s (end to end) | seconds | CPU s per million records | peak RSS MB | ClickHouse rows (FINAL) | Redis keys |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range r.peerNames() {
		pr := r.Peers[p]
		if pr == nil {
			continue
		}
		m := pr.Median
		w("| %s | %.0f | %.1f | %.1f | %.0f | %d (%d) | %d |\n", p, m.RecordsPerSec, m.Seconds, m.CPUPerMillion, m.PeakRSSMB, m.Rows, m.RowsFinal, m.RedisKeys)
	}
	if len(r.Ratios) > 0 {
		w("\n| ratio | value |\n|---|---:|\n")
		keys := make([]string, 0, len(r.Ratios))
		for k := range r.Ratios {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			w("| %s | %.2f |\n", k, r.Ratios[k])
		}
	}
	if len(r.PairRatios) > 0 {
		w("\n**Pairs.** Run *r* of backflow against run *r* of the other peer, drained back to back; the median of the pairs' ratios and their spread:\n\n")
		w("| pair | records/s ratio: median (min–max) | CPU per record ratio: median (min–max) | pairs |\n|---|---|---|---:|\n")
		for _, k := range slices.Sorted(maps.Keys(r.PairRatios)) {
			rate, cpu := r.PairRatios[k]["records_per_sec"], r.PairRatios[k]["cpu_seconds_per_million"]
			w("| %s | %.2f (%.2f–%.2f) | %.2f (%.2f–%.2f) | %d |\n", k, rate.Median, rate.Min, rate.Max, cpu.Median, cpu.Min, cpu.Max, len(rate.Pairs))
		}
	}
	w("\n## Per stage\n\n| peer | stage | input records | records/s (from start) | steady records/s (10–90 %%) |\n|---|---|---:|---:|---:|\n")
	for _, p := range r.peerNames() {
		if pr := r.Peers[p]; pr != nil {
			for _, s := range pr.Median.Stages {
				w("| %s | %s | %d | %.0f | %.0f |\n", p, s.Stage, s.Input, s.RecordsPerSec, s.SteadyPerSec)
			}
		}
	}
	w("\n## Per process\n\n| peer | process | CPU s | cores busy | CPU s per million | peak RSS MB |\n|---|---|---:|---:|---:|---:|\n")
	for _, p := range r.peerNames() {
		if pr := r.Peers[p]; pr != nil {
			for _, pm := range pr.Median.Procs {
				w("| %s | %s | %.1f | %.2f | %.1f | %.0f |\n", p, pm.Name, pm.CPUSeconds, pm.Cores, pm.CPUPerMillion, pm.PeakRSSMB)
			}
		}
	}
	w("\nCPU of the stack's services while each peer ran (seconds per million source records):\n\n| peer |")
	var svc []string
	for _, p := range r.peerNames() {
		if pr := r.Peers[p]; pr != nil {
			for _, s := range pr.Median.Services {
				if !contains(svc, s.Name) {
					svc = append(svc, s.Name)
				}
			}
		}
	}
	sort.Strings(svc)
	for _, s := range svc {
		w(" %s |", s)
	}
	w("\n|---|%s\n", strings.Repeat("---:|", len(svc)))
	for _, p := range r.peerNames() {
		pr := r.Peers[p]
		if pr == nil {
			continue
		}
		w("| %s |", p)
		for _, s := range svc {
			v := 0.0
			for _, x := range pr.Median.Services {
				if x.Name == s {
					v = x.CPUPerMillion
				}
			}
			w(" %.1f |", v)
		}
		w("\n")
	}
	if l := r.Latency; l != nil {
		w("\n## Latency (backflow, event time → landed in ClickHouse)\n\n")
		w("loadgen at %.0f requests/s (≈ %.0f records/s) for %s per run; latency of gateway REQUEST rows, whose event time is the moment loadgen made them; first 2 s left out.\n\n",
			l.RateRequests, l.RateRequests*3, l.Duration)
		w("| run | requests | samples | p50 ms | p95 ms | p99 ms | max ms |\n|---|---:|---:|---:|---:|---:|---:|\n")
		for _, x := range l.Runs {
			w("| %d | %d | %d | %.0f | %.0f | %.0f | %.0f |\n", x.Run, x.Requests, x.Samples, x.P50, x.P95, x.P99, x.Max)
		}
		w("| **median** | %d | %d | **%.0f** | **%.0f** | **%.0f** | %.0f |\n", l.Median.Requests, l.Median.Samples, l.Median.P50, l.Median.P95, l.Median.P99, l.Median.Max)
	}
	w("\n## Every run\n\n| peer | run | records/s | seconds | CPU s per million | peak RSS MB | rows | FINAL |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range r.peerNames() {
		if pr := r.Peers[p]; pr != nil {
			for _, m := range pr.Runs {
				w("| %s | %d | %.0f | %.1f | %.1f | %.0f | %d | %d |\n", p, m.Run, m.RecordsPerSec, m.Seconds, m.CPUPerMillion, m.PeakRSSMB, m.Rows, m.RowsFinal)
			}
		}
	}
	w("\n## Each run's conditions, and its mode\n\nA run is slow when its CPU per record is %.2f times its peer's fastest run in this sitting or more; the reasons compare it with that run.\n\n", slowFactor)
	w("| peer | run | load (start→end) | steal %% | iowait %% | rest of the machine, cores | GC cycles | GC pause ms | GC CPU s per million | mode | why |\n|---|---:|---|---:|---:|---:|---:|---:|---:|---|---|\n")
	for _, p := range r.peerNames() {
		if pr := r.Peers[p]; pr != nil {
			for _, m := range pr.Runs {
				c := m.Cond
				w("| %s | %d | %.1f→%.1f | %.1f | %.1f | %.2f | %d | %.0f | %.1f | %s | %s |\n", p, m.Run, c.LoadStart, c.LoadEnd, c.StealPct, c.IOWaitPct, c.OthersCores,
					c.GCCycles, c.GCPauseMs, c.GCCPUPerMilli, c.Mode, c.Why)
			}
		}
	}
	if r.ProfileDir != "" {
		w("\nProfiles of backflow's first run: `%s` (`go tool pprof -top bin/backflow FILE`).\n", r.ProfileDir)
	}
	return b.String()
}

// peerNames is every peer with results: backflow, the ceiling and Benthos in that order, then
// backflow's copies (backflow-x2, ...) in name order.
func (r *results) peerNames() []string {
	var out, copies []string
	for _, p := range allPeers {
		if r.Peers[p] != nil {
			out = append(out, p)
		}
	}
	for p := range r.Peers {
		if !slices.Contains(allPeers, p) {
			copies = append(copies, p)
		}
	}
	sort.Strings(copies)
	return append(out, copies...)
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}
