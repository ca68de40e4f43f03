// Command bench-harness is `make bench`: it measures backflow against two yardsticks on the
// same backlog, in the same run, on the local stack (deploy/local/stack).
//
//  1. It pre-fills two fresh source topics from loadgen (default 1M records: 333,334 requests,
//     3 records each, with duplicates and poison).
//  2. For each run (default 3) and each peer (backflow, the raw-library ceiling in
//     bench/ceiling, Benthos v4.27.0 built by bench/benthos/build.sh) it starts the peer's
//     processes as children, with fresh consumer groups and a ClickHouse database of their own,
//     and measures draining the backlog: end-to-end records/s (start until every group committed
//     its input, so the last row is in ClickHouse and the last feature in Redis), records/s per
//     stage (from committed offsets over time), CPU seconds per million records and peak RSS
//     (from /proc/<pid>/stat and VmHWM in /proc/<pid>/status).
//  3. A latency run: backflow on fresh topics while loadgen sends at a fixed rate (default half
//     the measured maximum); p50/p95/p99 of landed_time_ms - event_time_ms read from ClickHouse.
//  4. It writes the medians (and every run) as JSON and a markdown table under --out (default
//     .bench/results/, ignored by git: raw results and profiles are never committed), with the
//     machine's cores and memory, and optionally CPU and allocation profiles of backflow's
//     stages from the first run.
//  5. It writes a small summary of the run, the file to commit and quote, to --summary
//     (default bench/latest.json; see summary in summary.go for its fields).
//
// `bench-harness --summarize RUN.json [DRAIN.json...]` prints the summary of results files
// already written (the first a run, any further ones drains of a larger backlog by backflow)
// without running anything.
//
// Run it through `make bench` (which builds what it needs); `bench-harness --help` lists flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/backflowhq/backflow/internal/envfile"
	"github.com/backflowhq/backflow/pipelines"
	"github.com/backflowhq/backflow/sinks/redis"
)

type options struct {
	envFile       string
	records       int
	runs          int
	peers         string
	quick         bool
	latency       bool
	latencyRate   float64
	latencyFor    time.Duration
	latencyRuns   int
	profile       bool
	out           string
	summaryPath   string
	backflow      string
	base          string // --base: the binary of the peer backflow-base
	ceiling       string
	benthos       string
	benthosConfig string
	redisDB       int
	timeout       time.Duration
	keep          bool
	layout        string
	scale         []int  // --scale: backlog sizes drained one after another (scale mode when set)
	plotPath      string // --plot: the PNG of µs per record against backlog size (scale mode)
	// restart mode (--restart): what a restart costs three running instances (restart.go)
	restart         bool
	restartRequests []int // --requests: the state sizes, in requests
	restartRate     float64
	standby         string
	restartEvents   []string
	settleMax       time.Duration
	loadgen         string
	instanceIDs     bool
	// stream-formats mode (--stream-formats): Protobuf and JSON Schema streams against Avro (streams.go)
	streamFormats bool
	streamPairs   string
}

func main() {
	var o options
	flag.StringVar(&o.envFile, "env-file", ".stack/env", "the stack's env file (deploy/local/stack up writes it); variables already set win")
	flag.IntVar(&o.records, "records", 1_000_000, "source records in the backlog (loadgen writes 3 per request, plus duplicates and poison)")
	flag.IntVar(&o.runs, "runs", 3, "runs per peer; every figure is the median over them")
	flag.StringVar(&o.peers, "peers", strings.Join(allPeers, ","), "peers to measure, in order: backflow, ceiling, benthos; backflow-x2 and backflow-x3 are backflow as 2 or 3 copies of its processes sharing the groups (on the cluster stack: --env-file .stack/cluster/env)")
	flag.BoolVar(&o.quick, "quick", false, "development mode: 60,000 records, 1 run, a 10 s latency run (flags given explicitly still win)")
	flag.BoolVar(&o.latency, "latency", true, "do the latency run (backflow at a fixed rate)")
	flag.Float64Var(&o.latencyRate, "latency-rate", 0, "requests/s of the latency run (0: half of backflow's measured maximum)")
	flag.DurationVar(&o.latencyFor, "latency-duration", 30*time.Second, "how long loadgen sends in each latency run")
	flag.IntVar(&o.latencyRuns, "latency-runs", 0, "latency runs (0: as many as --runs)")
	flag.BoolVar(&o.profile, "profile", true, "write CPU and allocation profiles of backflow's stages during its first run")
	flag.StringVar(&o.out, "out", ".bench/results", "folder for the raw results (JSON, markdown, profiles; ignored by git); logs go to <out>/tmp")
	flag.StringVar(&o.summaryPath, "summary", "bench/latest.json", "where to write the run's small summary, the file to commit (empty: none; a --quick run writes none unless this is given)")
	summarizeOnly := flag.Bool("summarize", false, "print the summary of the results files given as arguments (a run, then any drains) and exit, running nothing")
	commit := flag.String("commit", "", "with --summarize: the commit measured, for results files from before the harness recorded it")
	flag.StringVar(&o.backflow, "backflow", "bin/backflow", "the backflow binary")
	flag.StringVar(&o.base, "base", "", "a second backflow binary (say, main's build), measured as the peer backflow-base exactly as backflow is: for an A/B of two builds in one sitting, --peers backflow,backflow-base")
	flag.StringVar(&o.ceiling, "ceiling", "bin/bench-ceiling", "the ceiling binary (go build ./bench/ceiling)")
	flag.StringVar(&o.benthos, "benthos", ".stack/benthos/benthos", "the Benthos binary (bench/benthos/build.sh)")
	flag.StringVar(&o.benthosConfig, "benthos-config", "bench/benthos/config.yaml", "the Benthos config doing backflow's job")
	flag.IntVar(&o.redisDB, "redis-db", 9, "Redis database the peers write features to; flushed before each run (never 0)")
	flag.DurationVar(&o.timeout, "timeout", 20*time.Minute, "longest a peer may take to drain the backlog")
	flag.StringVar(&o.layout, "backflow-layout", layoutStages, "how backflow runs: stages (one process per stage, each with its own profiles) or run (one `backflow run` process with every stage, as make demo runs it)")
	scaleFlag := flag.String("scale", "", "scale mode: drain backlogs of these sizes one after another, e.g. 100k,1M,10M (suffixes k and M); each peer once per size (--runs), no latency run unless --latency is given; the summary lists every size")
	flag.StringVar(&o.plotPath, "plot", "docs/bench-scale.png", "scale mode: where to draw µs per source record against backlog size, a PNG (empty: none; a --quick run draws none unless this is given)")
	flag.BoolVar(&o.restart, "restart", false, "restart mode (make bench-restart): three backflow run instances, every stage of deploy/demo.yaml, static instance ids, state from --requests; under steady traffic a rolling restart on kept disks, a restart on an empty disk and a failover (SIGKILL), --runs times; summary in bench/restart.json")
	requestsFlag := flag.String("requests", "1M", "restart mode: the state sizes in requests, e.g. 1M,10M (suffixes k and M), one after another")
	flag.Float64Var(&o.restartRate, "rate", 300, "restart mode: steady traffic during the events, requests/s")
	flag.StringVar(&o.standby, "standby", standbyFailover, "restart mode: goka hot standby (ingest and sink-features) for the failover event only (failover; the instances are restarted with it before that event, unmeasured), for every event (all), or never (off)")
	eventsFlag := flag.String("events", strings.Join(restartEvents, ","), "restart mode: the events each run goes through, in this order, a subset of "+strings.Join(restartEvents, ", ")+" (say, rolling,failover with --standby all where an empty disk's restore of every standby copy would take too long)")
	flag.DurationVar(&o.settleMax, "settle-max", 90*time.Second, "restart mode: after an event, the longest the harness waits for the summed lag to be back near the baseline's")
	flag.BoolVar(&o.instanceIDs, "instance-ids", true, "restart mode: static group membership (BACKFLOW_KAFKA_INSTANCE_ID=backflow-1..3); false: dynamic membership, as before kafka.instance_id")
	flag.StringVar(&o.loadgen, "loadgen", "bin/loadgen", "restart mode: the loadgen binary (for the declared stream's backlog)")
	flag.BoolVar(&o.streamFormats, "stream-formats", false, "stream-formats mode (make bench-streams): each pair of --stream-pairs drained as its own format and as the same records in Avro, by backflow run with the stream's stage alone, interleaved, --runs times (default 500,000 originals per backlog); summary in bench/stream-formats.json")
	flag.StringVar(&o.streamPairs, "stream-pairs", "shop-order,page-view", "stream-formats mode: the pairs, by stream: shop-order (Protobuf) and page-view (JSON Schema)")
	flag.BoolVar(&o.keep, "keep", false, "keep each run's topics, groups and ClickHouse database (default: deleted after the run)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage: bench-harness [flags]  (normally: make bench, make bench BENCH_FLAGS=--quick)\n")
		fmt.Fprintf(flag.CommandLine.Output(), "       bench-harness --summarize [--commit C] RUN.json [DRAIN.json...] > bench/latest.json\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *summarizeOnly {
		b, err := summarizeFiles(flag.Args(), *commit)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench-harness:", err)
			os.Exit(1)
		}
		os.Stdout.Write(b)
		return
	}
	if flag.NArg() > 0 || *commit != "" {
		fmt.Fprintf(os.Stderr, "bench-harness: arguments %q and --commit are for --summarize only\n", flag.Args())
		os.Exit(2)
	}
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *scaleFlag != "" {
		sizes, err := parseSizes(*scaleFlag)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench-harness: --scale:", err)
			os.Exit(2)
		}
		o.scale = sizes
		if !set["runs"] {
			o.runs = 1
		}
		if !set["latency"] {
			o.latency = false
		}
		if !set["peers"] {
			o.peers = peerBackflow + "," + peerCeiling
		}
	}
	if o.restart {
		sizes, err := parseSizes(*requestsFlag)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench-harness: --requests:", err)
			os.Exit(2)
		}
		o.restartRequests = sizes
		o.restartEvents = strings.Split(*eventsFlag, ",")
		if !set["summary"] {
			o.summaryPath = "bench/restart.json"
		}
		if !set["peers"] {
			o.peers = peerBackflow
		}
		o.latency = false
	}
	if o.quick {
		if !set["records"] {
			o.records = 60_000
		}
		if !set["runs"] {
			o.runs = 1
		}
		if !set["latency-duration"] {
			o.latencyFor = 10 * time.Second
		}
		if !set["summary"] {
			o.summaryPath = "" // a short run's figures are no summary to commit
		}
		if !set["plot"] {
			o.plotPath = ""
		}
	}
	if o.streamFormats {
		o.streamDefaults(set)
	}
	if o.latencyRuns == 0 {
		o.latencyRuns = o.runs
	}
	if err := o.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-harness:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench-harness:", err)
		os.Exit(1)
	}
}

func (o options) peerList() []string {
	var out []string
	for _, p := range strings.Split(o.peers, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func (o options) validate() error {
	var errs []error
	if o.records < 3 {
		errs = append(errs, fmt.Errorf("--records: %d, want at least 3", o.records))
	}
	if o.runs < 1 || o.latencyRuns < 1 {
		errs = append(errs, fmt.Errorf("--runs and --latency-runs: %d and %d, want at least 1", o.runs, o.latencyRuns))
	}
	if o.redisDB < 1 {
		errs = append(errs, fmt.Errorf("--redis-db: %d; the harness flushes it, so 0 (the default database) is refused", o.redisDB))
	}
	if o.latencyRate < 0 || o.latencyFor <= 0 {
		errs = append(errs, fmt.Errorf("--latency-rate and --latency-duration: %v and %v, want >= 0 and > 0", o.latencyRate, o.latencyFor))
	}
	if o.restart && (o.restartRate <= 0 || o.settleMax <= 0 || !slices.Contains([]string{standbyFailover, standbyAll, standbyOff}, o.standby)) {
		errs = append(errs, fmt.Errorf("--rate, --settle-max, --standby: %v, %v, %q; want > 0, > 0, and failover, all or off", o.restartRate, o.settleMax, o.standby))
	}
	for _, ev := range o.restartEvents {
		if !slices.Contains(restartEvents, ev) {
			errs = append(errs, fmt.Errorf("--events: %q, want a comma-separated subset of %s", ev, strings.Join(restartEvents, ",")))
		}
	}
	if _, err := os.Stat(o.loadgen); o.restart && err != nil {
		errs = append(errs, fmt.Errorf("--loadgen %s: %w (make build builds it)", o.loadgen, err))
	}
	if o.layout != layoutRun && o.layout != layoutStages {
		errs = append(errs, fmt.Errorf("--backflow-layout: %q, want %s or %s", o.layout, layoutRun, layoutStages))
	}
	peers := o.peerList()
	if len(peers) == 0 {
		errs = append(errs, errors.New("--peers: empty"))
	}
	for _, p := range peers {
		if _, ok := backflowCopies(p); !ok && !slices.Contains(allPeers, p) {
			errs = append(errs, fmt.Errorf("--peers: %q is unknown (known: %s, and backflow-x2 to backflow-x%d)", p, strings.Join(allPeers, ", "), maxCopies))
		}
	}
	bins := map[string]string{peerBackflow: o.backflow, peerCeiling: o.ceiling, peerBenthos: o.benthos, peerBase: o.base}
	if slices.Contains(peers, peerBase) && o.base == "" {
		errs = append(errs, errors.New("--peers: backflow-base needs --base BIN"))
	}
	for _, p := range peers {
		if _, ok := backflowCopies(p); ok && p != peerBase {
			p = peerBackflow
		}
		if b := bins[p]; b != "" {
			if _, err := os.Stat(b); err != nil {
				errs = append(errs, fmt.Errorf("%s binary %s: %w (make bench builds it)", p, b, err))
			}
		}
	}
	if slices.Contains(peers, peerBenthos) {
		if _, err := os.Stat(o.benthosConfig); err != nil {
			errs = append(errs, fmt.Errorf("--benthos-config: %w", err))
		}
	}
	if _, err := os.Stat(o.backflow); err != nil && !slices.Contains(peers, peerBackflow) {
		errs = append(errs, fmt.Errorf("--backflow %s: %w (the harness also uses it for the latency run)", o.backflow, err))
	}
	return errors.Join(errs...)
}

// harness is one benchmark invocation.
type harness struct {
	opt   options
	conn  pipelines.Conns
	st    *stack
	tmp   string // logs and local storage of this invocation
	stamp string
	// stackDirs are the stack's folders whose run/ has the services' pids: the env file's, and
	// in cluster mode also the plain stack's (Kafka, the registry, the sensitive-word service).
	stackDirs []string
	started   time.Time
}

func run(ctx context.Context, o options) error {
	if vals, err := envfile.Load(o.envFile); err != nil {
		return fmt.Errorf("--env-file: %w (start the stack: deploy/local/stack up)", err)
	} else {
		for k, v := range vals {
			if _, ok := os.LookupEnv(k); !ok {
				os.Setenv(k, v)
			}
		}
	}
	conn, err := pipelines.FromEnv(os.Getenv)
	if err != nil {
		return err
	}
	if conn.ClickHouse.Cluster != "" || conn.Redis.Mode == redis.ModeCluster {
		// The cluster stack (.stack/cluster/env): only backflow has a cluster mode, and a
		// Redis Cluster has only database 0.
		for _, p := range o.peerList() {
			if _, ok := backflowCopies(p); !ok {
				return fmt.Errorf("--peers: %s has no cluster mode; on the cluster stack measure backflow, backflow-x2, backflow-x3", p)
			}
		}
		o.redisDB = 0
	}
	conn.Redis.DB = o.redisDB
	redisAddr, redisVar := conn.Redis.Addr, "BACKFLOW_REDIS_ADDR"
	if conn.Redis.Mode == redis.ModeCluster {
		redisAddr, redisVar = strings.Join(conn.Redis.Addrs, ","), "BACKFLOW_REDIS_ADDRS"
	}
	for name, v := range map[string]string{"BACKFLOW_REGISTRY_URL": conn.Registry.URL, "BACKFLOW_CLICKHOUSE_ADDR": conn.ClickHouse.Addr, redisVar: redisAddr} {
		if v == "" {
			return fmt.Errorf("%s is not set (is %s the stack's env file?)", name, o.envFile)
		}
	}
	h := &harness{opt: o, conn: conn, started: time.Now(), stamp: time.Now().UTC().Format("20060102T150405")}
	h.stackDirs = []string{filepath.Dir(o.envFile)}
	if conn.ClickHouse.Cluster != "" {
		h.stackDirs = append(h.stackDirs, filepath.Dir(filepath.Dir(o.envFile)))
	}
	h.tmp, err = filepath.Abs(filepath.Join(o.out, "tmp", h.stamp))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(h.tmp, 0o755); err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	h.st, err = openStack(sctx, conn)
	cancel()
	if err != nil {
		return fmt.Errorf("the local stack does not answer (deploy/local/stack up): %w", err)
	}
	defer h.st.Close()

	if o.restart {
		return h.restartBench(ctx)
	}
	if o.streamFormats {
		return h.streamBench(ctx)
	}
	res := &results{Commit: gitCommit(), Machine: machineInfo(), Started: h.started.UTC(), Options: o.summary()}
	if len(o.scale) > 0 {
		say("bench %s: scale mode, backlogs of %v records, %d run(s) per peer and backlog, peers %s; logs in %s", h.stamp, o.scale, o.runs, o.peers, h.tmp)
	} else {
		say("bench %s: %d records, %d run(s) per peer, peers %s; logs in %s", h.stamp, o.records, o.runs, o.peers, h.tmp)
	}
	say("machine: %s", res.Machine)

	if len(o.scale) > 0 {
		if err := h.scaleRuns(ctx, res); err != nil {
			return err
		}
	} else {
		bl, err := h.prefill(ctx, "b"+strings.ToLower(h.stamp[4:]), o.records)
		if err != nil {
			return err
		}
		defer h.dropBacklog(bl)
		res.Backlog = bl.summary()
		res.Peers = map[string]*peerResults{}
		if err := h.drain(ctx, res, bl, res.Peers, true); err != nil {
			return err
		}
		res.ratios()
	}

	if o.latency {
		rate := o.latencyRate
		if rate == 0 {
			if b := res.Peers[peerBackflow]; b != nil && b.Median.RecordsPerSec > 0 {
				rate = b.Median.RecordsPerSec / 2 / res.recordsPerRequest()
			} else {
				rate = 1000
			}
		}
		res.Latency = &latencyResults{RateRequests: rate, Duration: o.latencyFor.String()}
		for r := 1; r <= o.latencyRuns; r++ {
			l, err := h.latencyRun(ctx, r, rate)
			if err != nil {
				return fmt.Errorf("latency run %d: %w", r, err)
			}
			res.Latency.Runs = append(res.Latency.Runs, l)
			res.Latency.Median = medianLatency(res.Latency.Runs)
			h.checkpoint(res)
			say("latency run %d/%d at %.0f requests/s: p50 %.0f ms, p95 %.0f ms, p99 %.0f ms over %d requests", r, o.latencyRuns, rate, l.P50, l.P95, l.P99, l.Samples)
		}
		res.Latency.Median = medianLatency(res.Latency.Runs)
	}
	if res.ProfileDir != "" {
		res.Profiles = h.profileTops(res.ProfileDir)
	}
	res.Finished = time.Now().UTC()
	res.LoadAfter = loadAverage()
	paths, err := res.write(o.out, h.stamp, o.quick)
	if err != nil {
		return err
	}
	fmt.Println()
	fmt.Println(res.markdown())
	say("raw results (not committed): %s", strings.Join(paths, ", "))
	if res.ProfileDir != "" {
		say("profiles (not committed): %s", res.ProfileDir)
	}
	say("logs: %s", h.tmp)
	if err := saveSummary(o.summaryPath, func() ([]byte, error) { return summaryJSON(res) }); err != nil {
		return err
	}
	if o.plotPath != "" && len(res.Scale) > 0 {
		if err := plotScale(res, o.plotPath); err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		say("plot of µs per record against backlog size (commit this): %s", o.plotPath)
	}
	return nil
}

// drain has every peer drain bl, o.runs times each, into peers (the medians updated after each
// run, and the results so far written after each). profile: backflow's first run writes
// profiles.
func (h *harness) drain(ctx context.Context, res *results, bl backlog, peers map[string]*peerResults, profile bool) error {
	o := h.opt
	for _, p := range o.peerList() {
		peers[p] = &peerResults{}
	}
	for r := 1; r <= o.runs; r++ {
		for _, p := range o.peerList() {
			prof := ""
			if o.profile && profile && p == peerBackflow && r == 1 {
				prof = filepath.Join(o.out, "profiles", h.stamp)
				if err := os.MkdirAll(prof, 0o755); err != nil {
					return err
				}
				res.ProfileDir = prof
			}
			pr := h.newPeerRun(p, r, bl, bl.tag, prof)
			m, err := h.measure(ctx, pr, bl)
			if err != nil {
				return fmt.Errorf("%s run %d: %w", p, r, err)
			}
			peers[p].Runs = append(peers[p].Runs, m)
			classify(peers[p].Runs)
			say("%s run %d/%d: %s", p, r, o.runs, m.line())
			say("  conditions: %s", peers[p].Runs[len(peers[p].Runs)-1].Cond.line())
			peers[p].Median = median(peers[p].Runs)
			res.ratios()
			h.checkpoint(res) // what was measured survives a later failure
		}
	}
	return nil
}

// dropBacklog deletes the backlog's source topics, unless --keep.
func (h *harness) dropBacklog(bl backlog) {
	if h.opt.keep {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h.st.deleteTopics(ctx, bl.inference, bl.gateway)
}

// checkpoint writes the results so far (marked partial) to the run's files; the final write
// replaces them.
func (h *harness) checkpoint(res *results) {
	res.Partial = true
	res.Finished = time.Now().UTC()
	if _, err := res.write(h.opt.out, h.stamp, h.opt.quick); err != nil {
		say("could not write the results so far: %v", err)
	}
	res.Partial = false
}

// say prints a progress line with the time.
func say(format string, a ...any) {
	fmt.Printf("%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, a...))
}

// saveSummary writes the summary that build returns to path, the small file to commit, and
// says where; an empty path writes none.
func saveSummary(path string, build func() ([]byte, error)) error {
	if path == "" {
		return nil
	}
	b, err := build()
	if err == nil {
		err = os.MkdirAll(filepath.Dir(path), 0o755)
	}
	if err == nil {
		err = os.WriteFile(path, b, 0o644)
	}
	if err != nil {
		return fmt.Errorf("summary: %w", err)
	}
	say("summary (commit this): %s", path)
	return nil
}
