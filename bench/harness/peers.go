package main

import (
	"fmt"
	"path/filepath"
	"strings"
)

// stage is one process of a peer: how to start it, and which consumer group's commits on which
// topics show its progress.
type stage struct {
	name  string
	bin   string
	args  []string
	env   []string
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
	db        string   // ClickHouse database it writes
	stages    []stage  // started in order
	topics    []string // topics it creates (deleted afterwards)
	groups    []string // consumer groups (deleted afterwards)
	dirs      []string // local storage (removed afterwards)
	features  bool     // it writes features to Redis
	precreate []string // topics the harness creates before starting the peer (as a deployment would)
}

// names of the peers, in the order they run.
const (
	peerBackflow = "backflow"
	peerCeiling  = "ceiling"
	peerBenthos  = "benthos"
)

var allPeers = []string{peerBackflow, peerCeiling, peerBenthos}

// newPeerRun lays out peer's run number run (1-based) over the source topics of bl. tag names
// the run's topics, groups and database uniquely; prof, when not empty, is the folder backflow's
// stages write their CPU and allocation profiles into.
func (h *harness) newPeerRun(peer string, run int, bl backlog, tag, prof string) peerRun {
	id := fmt.Sprintf("%s_%s_%d", tag, peer, run)
	name := strings.ReplaceAll(id, "_", "-")
	pr := peerRun{peer: peer, run: run, db: "bench_" + strings.ReplaceAll(id, "-", "_")}
	chEnv := []string{"BACKFLOW_CLICKHOUSE_DATABASE=" + pr.db, fmt.Sprintf("BACKFLOW_REDIS_DB=%d", h.opt.redisDB)}
	sources := []string{bl.inference, bl.gateway}
	switch peer {
	case peerBackflow:
		enriched, dlqT, control := name+".enriched", name+".dlq", name+".control"
		gIngest, gSink, gFeat, gMirror := name+"-ingest", name+"-sink-clickhouse", name+"-features", name+"-dlq-mirror"
		ingestDir, featDir := filepath.Join(h.tmp, name+"-ingest"), filepath.Join(h.tmp, name+"-features")
		profArgs := func(stage string) []string {
			if prof == "" {
				return nil
			}
			return []string{"--cpu-profile", filepath.Join(prof, stage+".cpu.pprof"), "--alloc-profile", filepath.Join(prof, stage+".alloc.pprof"),
				"--block-profile", filepath.Join(prof, stage+".block.pprof")}
		}
		pr.stages = []stage{
			{name: "ingest", bin: h.opt.backflow, group: gIngest, topics: sources,
				args: append(profArgs("ingest"), "ingest", "--group", gIngest, "--inference-topic", bl.inference, "--gateway-topic", bl.gateway,
					"--enriched-topic", enriched, "--dlq-topic", dlqT, "--control-topic", control, "--storage-dir", ingestDir)},
			{name: "sink-clickhouse", bin: h.opt.backflow, group: gSink, topics: []string{enriched}, after: "ingest", env: chEnv,
				args: append(profArgs("sink-clickhouse"), "sink-clickhouse", "--group", gSink, "--topic", enriched, "--dlq-topic", dlqT,
					"--mirror-dlq-group", gMirror)},
			{name: "sink-features", bin: h.opt.backflow, group: gFeat, topics: []string{enriched}, after: "ingest", env: chEnv,
				args: append(profArgs("sink-features"), "sink-features", "--group", gFeat, "--enriched-topic", enriched, "--dlq-topic", dlqT,
					"--project", "bench", "--storage-dir", featDir)},
		}
		// ingest creates its internal topics; listed here to be deleted afterwards.
		pr.topics = []string{enriched, dlqT, control, gIngest + "-loop", gIngest + "-table", gFeat + "-table", gFeat + "-loop"}
		pr.groups = []string{gIngest, gSink, gFeat, gMirror}
		pr.dirs = []string{ingestDir, featDir}
		pr.features = true
		// sink-features refuses to start before its input exists (ingest would create it), and
		// goka's own create of the loop topic can fail with "already exists" when the broker's
		// metadata lags under load (seen here), so the harness creates those beforehand.
		pr.precreate = []string{enriched, dlqT, gFeat + "-loop"}
	case peerCeiling:
		g := name
		pr.stages = []stage{{name: "ceiling", bin: h.opt.ceiling, group: g, topics: sources, env: chEnv,
			args: []string{"--group", g, "--inference-topic", bl.inference, "--gateway-topic", bl.gateway}}}
		pr.groups = []string{g}
	case peerBenthos:
		g, dlqT := name, name+".dlq"
		env := append(chEnv,
			"BENCH_BROKERS="+strings.Join(h.conn.Kafka.Brokers, ","),
			"BENCH_INFERENCE_TOPIC="+bl.inference, "BENCH_GATEWAY_TOPIC="+bl.gateway, "BENCH_GROUP="+g,
			"BENCH_REGISTRY_URL="+h.conn.Registry.URL, "BENCH_SENSITIVE_URL="+h.conn.Moderation.URL,
			"BENCH_CLICKHOUSE_DSN=clickhouse://"+h.conn.ClickHouse.Addr+"/"+pr.db,
			fmt.Sprintf("BENCH_REDIS_URL=redis://%s/%d", h.conn.Redis.Addr, h.opt.redisDB),
			"BENCH_DLQ_TOPIC="+dlqT)
		pr.stages = []stage{{name: "benthos", bin: h.opt.benthos, group: g, topics: sources, env: env,
			args: []string{"-c", h.opt.benthosConfig}}}
		pr.topics = []string{dlqT}
		pr.groups = []string{g}
		pr.features = true
		pr.precreate = []string{dlqT}
	}
	return pr
}
