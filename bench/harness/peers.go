package main

import (
	"context"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// proc is one process of a peer: how to start it. ready, when set, is what its log prints once
// it consumes (one line per goka group it runs); the latency run waits for all of them.
type proc struct {
	name  string
	bin   string
	args  []string
	env   []string
	ready []string
}

// stage is one consumer group of a peer, whose commits on topics show the stage's progress.
type stage struct {
	name  string
	group string
	// topics the group's progress is measured on; enriched means "the peer's enriched topic",
	// whose final size is known only once the upstream stage is done.
	topics []string
	// after names the stage whose input must be fully committed before this one can be done.
	after string
}

// peerRun is what one peer needs for one run over one backlog.
type peerRun struct {
	peer      string
	run       int
	db        string            // ClickHouse database it writes
	procs     []proc            // started in order
	stages    []stage           // the groups whose progress is measured
	topics    []string          // topics it creates (deleted afterwards)
	groups    []string          // consumer groups (deleted afterwards)
	dirs      []string          // local storage (removed afterwards)
	features  bool              // it writes features to Redis
	precreate []string          // topics the harness creates before starting the peer (as a deployment would)
	files     map[string]string // written before the processes start: path → content
	// rows counts the rows it landed in db, raw and through FINAL; nil: the built-in tables'
	// (stack.rowCounts).
	rows func(ctx context.Context, db string) (raw, final uint64, err error)
}

// names of the peers, in the order they run.
const (
	peerBackflow = "backflow"
	peerCeiling  = "ceiling"
	peerBenthos  = "benthos"
	// peerBase is backflow built from another commit (--base), run exactly as backflow is:
	// an A/B of two builds in one sitting, interleaved run by run.
	peerBase = "backflow-base"
)

var allPeers = []string{peerBackflow, peerCeiling, peerBenthos}

// backflowCopies tells whether peer is backflow, and how many copies of its processes it runs:
// "backflow" is one, "backflow-x3" three, sharing the consumer groups as three replicas of a
// Deployment would (each with its own local storage). The copies measure how backflow scales
// out (docs/scaling.md).
func backflowCopies(peer string) (int, bool) {
	if peer == peerBackflow || peer == peerBase {
		return 1, true
	}
	n, err := strconv.Atoi(strings.TrimPrefix(peer, peerBackflow+"-x"))
	if !strings.HasPrefix(peer, peerBackflow+"-x") || err != nil || n < 1 || n > maxCopies {
		return 0, false
	}
	return n, true
}

// maxCopies bounds backflow-xN: more processes than the source topics' partitions sit idle.
const maxCopies = partitions

// How backflow runs: one process per stage (the default; each writes its own profiles), or as
// make demo does, one `backflow run` process with every stage.
const (
	layoutRun    = "run"
	layoutStages = "stages"
)

// gcTraceEnv makes a Go process log a line per GC cycle (gcTrace reads them).
const gcTraceEnv = "GODEBUG=gctrace=1"

// newPeerRun lays out peer's run number run (1-based) over the source topics of bl. tag names
// the run's topics, groups and database uniquely; prof, when not empty, is the folder backflow's
// stages write their CPU and allocation profiles into.
func (h *harness) newPeerRun(peer string, run int, bl backlog, tag, prof string) peerRun {
	id := fmt.Sprintf("%s_%s_%d", tag, peer, run)
	name := strings.ReplaceAll(id, "_", "-")
	pr := peerRun{peer: peer, run: run, db: "bench_" + strings.ReplaceAll(id, "-", "_")}
	chEnv := []string{"BACKFLOW_CLICKHOUSE_DATABASE=" + pr.db, fmt.Sprintf("BACKFLOW_REDIS_DB=%d", h.opt.redisDB)}
	sources := []string{bl.inference, bl.gateway}
	copies, isBackflow := backflowCopies(peer)
	bin := h.opt.backflow
	if peer == peerBase {
		bin = h.opt.base
	}
	// Every peer is a Go program: its GC cycles go to its log, for the run's conditions.
	chEnv = append(chEnv, gcTraceEnv)
	switch {
	case isBackflow:
		enriched, dlqT, control := name+".enriched", name+".dlq", name+".control"
		gIngest, gSink, gFeat, gMirror := name+"-ingest", name+"-sink-clickhouse", name+"-features", name+"-dlq-mirror"
		profArgs := func(name string) []string {
			if prof == "" {
				return nil
			}
			return []string{"--cpu-profile", filepath.Join(prof, name+".cpu.pprof"), "--alloc-profile", filepath.Join(prof, name+".alloc.pprof"),
				"--block-profile", filepath.Join(prof, name+".block.pprof")}
		}
		pr.stages = []stage{
			{name: "ingest", group: gIngest, topics: sources},
			{name: "sink-clickhouse", group: gSink, topics: []string{enriched}, after: "ingest"},
			{name: "sink-features", group: gFeat, topics: []string{enriched}, after: "ingest"},
		}
		// Each process serves /metrics on a port of its own choosing, so runs and stages never
		// collide on the default port.
		const metrics = "127.0.0.1:0"
		pr.files = map[string]string{}
		// The rollup loop's topic and group, named for the run; a build from before the rollups
		// (a --base of an older commit) has neither the keys nor the loop.
		rollupArgs, rollupKeys := []string{"--rollup-topic", enriched + "-rollups", "--rollup-group", gSink + "-rollups"},
			map[string]string{"sink_clickhouse.rollup_topic": enriched + "-rollups", "sink_clickhouse.rollup_group": gSink + "-rollups"}
		if !hasRollups(bin) {
			rollupArgs, rollupKeys = nil, nil
		}
		for c := 1; c <= copies; c++ {
			suffix := "" // the copy's processes and storage: ingest, ingest-2, ...
			if c > 1 {
				suffix = fmt.Sprintf("-%d", c)
			}
			ingestDir, featDir := filepath.Join(h.tmp, name+"-ingest"+suffix), filepath.Join(h.tmp, name+"-features"+suffix)
			pr.dirs = append(pr.dirs, ingestDir, featDir)
			if h.opt.layout == layoutStages {
				pr.procs = append(pr.procs,
					proc{name: "ingest" + suffix, bin: bin, env: []string{gcTraceEnv}, ready: []string{"ingest ready"},
						args: append(profArgs("ingest"+suffix), "ingest", "--metrics-addr", metrics, "--group", gIngest, "--inference-topic", bl.inference, "--gateway-topic", bl.gateway,
							"--enriched-topic", enriched, "--dlq-topic", dlqT, "--control-topic", control, "--storage-dir", ingestDir)},
					proc{name: "sink-clickhouse" + suffix, bin: bin, env: chEnv,
						args: append(append(profArgs("sink-clickhouse"+suffix), "sink-clickhouse", "--metrics-addr", metrics, "--group", gSink, "--topic", enriched, "--dlq-topic", dlqT,
							"--mirror-dlq-group", gMirror), rollupArgs...)},
					proc{name: "sink-features" + suffix, bin: bin, env: chEnv, ready: []string{"sink-features ready"},
						args: append(profArgs("sink-features"+suffix), "sink-features", "--metrics-addr", metrics, "--group", gFeat, "--enriched-topic", enriched, "--dlq-topic", dlqT,
							"--project", "bench", "--storage-dir", featDir)})
				continue
			}
			cfg := filepath.Join(h.tmp, name+suffix+".yaml")
			keys := map[string]string{
				"ingest.group": gIngest, "ingest.inference_topic": bl.inference, "ingest.gateway_topic": bl.gateway,
				"ingest.enriched_topic": enriched, "ingest.dlq_topic": dlqT, "ingest.control_topic": control, "ingest.storage_dir": ingestDir,
				"sink_clickhouse.group": gSink, "sink_clickhouse.topic": enriched, "sink_clickhouse.dlq_topic": dlqT, "sink_clickhouse.mirror_dlq_group": gMirror,
				"sink_features.group": gFeat, "sink_features.enriched_topic": enriched, "sink_features.dlq_topic": dlqT,
				"sink_features.project": "bench", "sink_features.storage_dir": featDir,
			}
			maps.Copy(keys, rollupKeys)
			pr.files[cfg] = runConfig(metrics, keys)
			pr.procs = append(pr.procs, proc{name: "backflow-run" + suffix, bin: bin, env: chEnv, ready: []string{"ingest ready", "sink-features ready"},
				args: append(profArgs("backflow-run"+suffix), "run", "--config", cfg)})
		}
		// ingest creates its internal topics; listed here to be deleted afterwards.
		pr.topics = []string{enriched, dlqT, control, gIngest + "-loop", gIngest + "-table", gFeat + "-table", gFeat + "-loop", enriched + "-rollups"}
		pr.groups = []string{gIngest, gSink, gFeat, gMirror, gSink + "-rollups"}
		pr.features = true
		// sink-features refuses to start before its input exists (ingest would create it), and
		// goka's own create of the loop topic can fail with "already exists" when the broker's
		// metadata lags under load (seen here), so the harness creates those beforehand.
		pr.precreate = []string{enriched, dlqT, gFeat + "-loop"}
	case peer == peerCeiling:
		g := name
		pr.procs = []proc{{name: "ceiling", bin: h.opt.ceiling, env: chEnv,
			args: []string{"--group", g, "--inference-topic", bl.inference, "--gateway-topic", bl.gateway}}}
		pr.stages = []stage{{name: "ceiling", group: g, topics: sources}}
		pr.groups = []string{g}
	case peer == peerBenthos:
		g, dlqT := name, name+".dlq"
		env := append(chEnv,
			"BENCH_BROKERS="+strings.Join(h.conn.Kafka.Brokers, ","),
			"BENCH_INFERENCE_TOPIC="+bl.inference, "BENCH_GATEWAY_TOPIC="+bl.gateway, "BENCH_GROUP="+g,
			"BENCH_REGISTRY_URL="+h.conn.Registry.URL, "BENCH_SENSITIVE_URL="+h.conn.SensitiveWords.URL,
			"BENCH_CLICKHOUSE_DSN=clickhouse://"+h.conn.ClickHouse.Addr+"/"+pr.db,
			fmt.Sprintf("BENCH_REDIS_URL=redis://%s/%d", h.conn.Redis.Addr, h.opt.redisDB),
			"BENCH_DLQ_TOPIC="+dlqT)
		pr.procs = []proc{{name: "benthos", bin: h.opt.benthos, env: env, args: []string{"-c", h.opt.benthosConfig}}}
		pr.stages = []stage{{name: "benthos", group: g, topics: sources}}
		pr.topics = []string{dlqT}
		pr.groups = []string{g}
		pr.features = true
		pr.precreate = []string{dlqT}
	}
	return pr
}

// runConfig is backflow run's config file for one run: deploy/demo.yaml's settings (every stage,
// a 2 s lag poll, migrations on start) with the run's own names (section.key → value) and
// metrics address.
func runConfig(metricsAddr string, names map[string]string) string {
	sections := map[string]map[string]any{
		"metrics":         {"addr": metricsAddr, "lag_interval": "2s"},
		"sink_clickhouse": {"migrate": true},
	}
	for k, v := range names {
		sec, key, _ := strings.Cut(k, ".")
		if sections[sec] == nil {
			sections[sec] = map[string]any{}
		}
		sections[sec][key] = v
	}
	doc := map[string]any{"stages": []string{"ingest", "sink-clickhouse", "sink-features"}, "shutdown_timeout": "30s"}
	for sec, kv := range sections {
		doc[sec] = kv
	}
	b, err := yaml.Marshal(doc)
	if err != nil {
		panic(err) // maps of strings always marshal
	}
	return "# backflow run's config for one benchmark run (written by bench-harness)\n" + string(b)
}

// hasRollups reports whether the backflow binary bin has the rollup loop (its sink-clickhouse
// takes --rollup-topic): a build from before it is measured without.
func hasRollups(bin string) bool {
	out, _ := exec.Command(bin, "sink-clickhouse", "--help").CombinedOutput()
	return strings.Contains(string(out), "--rollup-topic")
}
