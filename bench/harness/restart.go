package main

// Restart mode (make bench-restart, bench-harness --restart): what a restart costs a running
// three-instance deployment. Three `backflow run` processes, each with every stage of
// deploy/demo.yaml, its own storage dirs and its own static instance id (backflow-1..3), share
// the groups; their state is built from a backlog of N requests, then loadgen sends steady
// traffic while the harness runs, in turn:
//
//   - rolling: each instance in turn SIGTERMed and started again on its kept storage, the next
//     one once the previous is ready and the lag is back down;
//   - empty: one instance SIGTERMed, its storage deleted, started again;
//   - failover: one instance SIGKILLed and not started again (with hot standby on by default),
//     until the others own its partitions and the lag is back down; it is then started again,
//     unmeasured, for the next run.
//
// Per event it records the seconds to ready, the rebalances the other instances saw, the peak
// of the summed consumer lag, the freshness of the rows landed in the event's window and the
// changelog records restored. See docs/benchmarks.md ("Restarts").

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.yaml.in/yaml/v3"

	childproc "github.com/backflowhq/backflow/test/proc"
	"github.com/backflowhq/backflow/tools/loadgen"
)

// Restart events, in the order each run goes through them.
const (
	eventRolling  = "rolling"
	eventEmpty    = "empty"
	eventFailover = "failover"
)

var restartEvents = []string{eventRolling, eventEmpty, eventFailover}

// When hot standby is on (--standby).
const (
	standbyFailover = "failover" // for the failover event only (the instances restart with it first)
	standbyAll      = "all"
	standbyOff      = "off"
)

// restartInstances is how many backflow run processes share the groups.
const restartInstances = 3

// restartStream is the declared stream of deploy/demo.yaml every instance runs.
const restartStream = "agent-task-event"

// restartResults is the raw results of a restart benchmark (.bench/results/restart-*.json).
type restartResults struct {
	Commit    string         `json:"commit"`
	Machine   machine        `json:"machine"`
	Started   time.Time      `json:"started"`
	Finished  time.Time      `json:"finished"`
	Partial   bool           `json:"partial,omitempty"`
	Options   restartOptions `json:"options"`
	LoadStart string         `json:"load_average_start"`
	LoadEnd   string         `json:"load_average_end"`
	Sizes     []*restartSize `json:"sizes"`
}

type restartOptions struct {
	Requests []int   `json:"requests"`
	Runs     int     `json:"runs"`
	Rate     float64 `json:"rate_requests_per_sec"`
	Standby  string  `json:"standby"`
	Static   bool    `json:"static_membership"`
	Settle   string  `json:"settle_max"`
}

// restartSize is one state size: how it was built and every event of every run.
type restartSize struct {
	Requests     int                     `json:"requests"`
	BacklogRecs  int64                   `json:"backlog_records"`
	BuildSeconds float64                 `json:"build_seconds"`
	StateMB      map[string]int64        `json:"state_mb_per_instance"` // storage dir → MB, after the build
	Baseline     eventMeasure            `json:"baseline"`              // steady traffic, no event
	Events       []eventMeasure          `json:"events"`
	Medians      map[string]eventSummary `json:"medians"`
}

// eventMeasure is one event (for rolling: one instance's restart) of one run.
type eventMeasure struct {
	Event    string `json:"event"`
	Run      int    `json:"run"`
	Instance string `json:"instance,omitempty"`
	// StopSeconds: from SIGTERM until the process exited (flushed, committed).
	StopSeconds float64 `json:"stop_s,omitempty"`
	// ReadySeconds: from the new process's start until its /readyz answered 200 and it logged
	// every goka stage's ready line (restarts); from the SIGKILL until every other instance
	// had set up new sessions of both goka groups, its tables recovered (failover).
	ReadySeconds float64 `json:"ready_s"`
	// StageReady: from the new process's start until it logged "<stage> ready".
	StageReady map[string]float64 `json:"stage_ready_s,omitempty"`
	// Rebalances: new sessions the other instances set up in the event's window, per group
	// (goka's "setup generation" lines; the ClickHouse sink's "partitions assigned"), the most
	// any one of them saw.
	Rebalances    map[string]int `json:"rebalances"`
	MaxRebalances int            `json:"max_rebalances"`
	LagPeak       int64          `json:"lag_peak"`
	// Freshness of the inference_results rows landed in the window: landed_time_ms -
	// event_time_ms.
	FreshnessP50Ms float64 `json:"freshness_p50_ms"`
	FreshnessP99Ms float64 `json:"freshness_p99_ms"`
	FreshnessMaxMs float64 `json:"freshness_max_ms"`
	Rows           uint64  `json:"rows"`
	// Restored: changelog records goka's table recovery read ("Recovering from X to hwm=Y"),
	// by the restarted instance and by the others.
	Restored         int64   `json:"restored_records"`
	RestoredByOthers int64   `json:"restored_by_others"`
	WindowSeconds    float64 `json:"window_s"`
	Settled          bool    `json:"settled"`
}

// eventSummary is the median of one event's figures over the runs, with their spread.
type eventSummary struct {
	Samples      int     `json:"samples"`
	StopSeconds  spread  `json:"stop_s"`
	ReadySeconds spread  `json:"ready_s"`
	IngestReady  *spread `json:"ingest_ready_s,omitempty"`
	FeatReady    *spread `json:"sink_features_ready_s,omitempty"`
	Rebalances   spread  `json:"rebalances"`
	LagPeak      spread  `json:"lag_peak"`
	FreshnessP99 spread  `json:"freshness_p99_ms"`
	Restored     spread  `json:"restored_records"`
	RestoredOth  spread  `json:"restored_by_others"`
}

// spread is a median with the smallest and largest value it was taken over.
type spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

func spreadOf(xs []float64) spread {
	if len(xs) == 0 {
		return spread{}
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return spread{Median: round1(m), Min: round1(s[0]), Max: round1(s[len(s)-1])}
}

// spreadPtr is spreadOf, nil when there is nothing to take it over.
func spreadPtr(xs []float64) *spread {
	if len(xs) == 0 {
		return nil
	}
	s := spreadOf(xs)
	return &s
}

func round1(x float64) float64 { return math.Round(x*10) / 10 }

// summarizeEvents gives each event's medians over the runs. A rolling restart counts each
// instance's restart as one sample.
func summarizeEvents(evs []eventMeasure) map[string]eventSummary {
	by := map[string][]eventMeasure{}
	for _, e := range evs {
		by[e.Event] = append(by[e.Event], e)
	}
	out := map[string]eventSummary{}
	for name, es := range by {
		var stop, ready, ing, feat, reb, lag, fr, rest, oth []float64
		for _, e := range es {
			stop = append(stop, e.StopSeconds)
			ready = append(ready, e.ReadySeconds)
			if v, ok := e.StageReady["ingest"]; ok {
				ing = append(ing, v)
			}
			if v, ok := e.StageReady["sink-features"]; ok {
				feat = append(feat, v)
			}
			reb = append(reb, float64(e.MaxRebalances))
			lag = append(lag, float64(e.LagPeak))
			fr = append(fr, e.FreshnessP99Ms)
			rest = append(rest, float64(e.Restored))
			oth = append(oth, float64(e.RestoredByOthers))
		}
		out[name] = eventSummary{Samples: len(es), StopSeconds: spreadOf(stop), ReadySeconds: spreadOf(ready), IngestReady: spreadPtr(ing), FeatReady: spreadPtr(feat),
			Rebalances: spreadOf(reb), LagPeak: spreadOf(lag), FreshnessP99: spreadOf(fr), Restored: spreadOf(rest), RestoredOth: spreadOf(oth)}
	}
	return out
}

// instance is one of the three backflow run processes, across its restarts.
type instance struct {
	n       int
	id      string // BACKFLOW_KAFKA_INSTANCE_ID
	cfg     string
	metrics string // host:port of /metrics and /readyz, kept across restarts
	dirs    []string
	env     []string
	c       *child // nil while stopped
	starts  int
}

// restartCluster is the three instances of one state size and what they share.
type restartCluster struct {
	h       *harness
	tag     string
	pr      peerRun
	bl      backlog
	inst    []*instance
	lag     *lagPoller
	stopGen context.CancelFunc
	genDone chan struct{}
}

// groupKinds are the stage names whose groups' rebalances are counted, and the log line that
// marks a new session of each in a process's log.
var groupKinds = []struct {
	name string
	re   *regexp.Regexp
}{
	{"ingest", regexp.MustCompile(`\[Processor [^\]]*-ingest\] setup generation \d+,`)},
	{"sink-features", regexp.MustCompile(`\[Processor [^\]]*-features\] setup generation \d+,`)},
	{"sink-clickhouse", regexp.MustCompile(`msg="clickhouse sink: partitions assigned" .*\bgroup=\S+-sink-clickhouse `)},
}

// setupDoneRe marks the end of a goka group's session setup (its tables recovered).
var setupDoneRe = regexp.MustCompile(`\[Processor ([^\]]*)\] setup generation \d+ \.\.\. done`)

// recoveringRe is goka's line for a table partition's recovery (a debug line).
var recoveringRe = regexp.MustCompile(`Recovering from (-?\d+) to hwm=(\d+);`)

// logStats reads a log from offset: sessions set up per group kind, and changelog records
// restored.
func logStats(text string) (sessions map[string]int, restored int64) {
	sessions = map[string]int{}
	for _, line := range strings.Split(text, "\n") {
		for _, k := range groupKinds {
			if k.re.MatchString(line) {
				sessions[k.name]++
			}
		}
		if m := recoveringRe.FindStringSubmatch(line); m != nil {
			from, _ := strconv.ParseInt(m[1], 10, 64)
			hwm, _ := strconv.ParseInt(m[2], 10, 64)
			if hwm > from {
				restored += hwm - max(from, 0)
			}
		}
	}
	return sessions, restored
}

// readFrom returns the text of path from byte offset off on.
func readFrom(path string, off int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return ""
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// restartBench is restart mode: every size of --requests, --runs runs of the events each.
func (h *harness) restartBench(ctx context.Context) error {
	o := h.opt
	res := &restartResults{Commit: gitCommit(), Machine: machineInfo(), Started: h.started.UTC(), LoadStart: loadAverage(),
		Options: restartOptions{Requests: o.restartRequests, Runs: o.runs, Rate: o.restartRate, Standby: o.standby, Settle: o.settleMax.String(), Static: o.instanceIDs}}
	say("bench %s: restart mode, state from %v requests, %d run(s) of %s at %.0f requests/s, standby %s; logs in %s",
		h.stamp, o.restartRequests, o.runs, strings.Join(restartEvents, ", "), o.restartRate, o.standby, h.tmp)
	say("machine: %s", res.Machine)
	write := func(partial bool) error {
		res.Partial, res.Finished, res.LoadEnd = partial, time.Now().UTC(), loadAverage()
		if err := os.MkdirAll(o.out, 0o755); err != nil {
			return err
		}
		b, _ := json.MarshalIndent(res, "", "  ")
		return os.WriteFile(filepath.Join(o.out, "restart-"+h.stamp+".json"), append(b, '\n'), 0o644)
	}
	for i, n := range o.restartRequests {
		sz := &restartSize{Requests: n}
		res.Sizes = append(res.Sizes, sz)
		if err := h.restartSize(ctx, i, sz, func() { _ = write(true) }); err != nil {
			_ = write(true)
			return fmt.Errorf("%d requests: %w", n, err)
		}
		sz.Medians = summarizeEvents(sz.Events)
		_ = write(true)
	}
	if err := write(false); err != nil {
		return err
	}
	fmt.Println()
	fmt.Print(restartMarkdown(res))
	say("raw results (not committed): %s", filepath.Join(o.out, "restart-"+h.stamp+".json"))
	say("logs: %s", h.tmp)
	if o.summaryPath != "" {
		b, err := restartSummary(res)
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.summaryPath, b, 0o644); err != nil {
			return fmt.Errorf("summary: %w", err)
		}
		say("summary (commit this): %s", o.summaryPath)
	}
	return nil
}

// restartSize builds the state of sz.Requests requests on three fresh instances, then runs the
// events under steady traffic, --runs times.
func (h *harness) restartSize(ctx context.Context, idx int, sz *restartSize, checkpoint func()) error {
	o := h.opt
	tag := fmt.Sprintf("r%s%d", strings.ToLower(h.stamp[4:]), idx)
	bl, err := h.prefill(ctx, tag, 3*sz.Requests)
	if err != nil {
		return err
	}
	defer h.dropBacklog(bl)
	sz.BacklogRecs = bl.records
	rc, err := h.newRestartCluster(ctx, tag, bl)
	if err != nil {
		return err
	}
	defer rc.close()

	standbyNow := o.standby == standbyAll
	say("restart %s: starting %d instances on a backlog of %d records", tag, restartInstances, bl.records)
	start := time.Now()
	for _, in := range rc.inst {
		if err := rc.start(in, standbyNow); err != nil {
			return err
		}
	}
	rc.lag.run(rc)
	if err := rc.waitDrained(ctx, h.drainTimeout(bl.records)); err != nil {
		return fmt.Errorf("building the state: %w", err)
	}
	sz.BuildSeconds = time.Since(start).Seconds()
	sz.StateMB = rc.stateMB()
	say("restart %s: state built in %.0f s (%v MB per storage dir); steady traffic at %.0f requests/s", tag, sz.BuildSeconds, sz.StateMB, o.restartRate)
	rc.startTraffic(ctx, o.restartRate)
	sleepCtx(ctx, 15*time.Second)
	// The baseline: steady traffic with no event.
	b0 := time.Now()
	sleepCtx(ctx, 20*time.Second)
	sz.Baseline = rc.window(ctx, eventMeasure{Event: "baseline"}, b0, time.Now(), nil, nil)
	sz.Baseline.Settled = true
	say("restart %s: baseline %s", tag, sz.Baseline.line())
	settleLag := max(2*sz.Baseline.LagPeak, 300)

	for run := 1; run <= o.runs; run++ {
		for _, ev := range restartEvents {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			var ms []eventMeasure
			switch ev {
			case eventRolling:
				for _, in := range rc.inst {
					m, err := rc.restart(ctx, ev, run, in, false, standbyNow, settleLag)
					if err != nil {
						return err
					}
					ms = append(ms, m)
				}
			case eventEmpty:
				m, err := rc.restart(ctx, ev, run, rc.inst[0], true, standbyNow, settleLag)
				if err != nil {
					return err
				}
				ms = append(ms, m)
			case eventFailover:
				if o.standby == standbyFailover {
					say("restart %s run %d: restarting the instances with hot standby on for the failover (not measured)", tag, run)
					if err := rc.rollUnmeasured(ctx, true, settleLag); err != nil {
						return err
					}
				}
				victim := rc.inst[len(rc.inst)-1]
				m, err := rc.failover(ctx, run, victim, settleLag)
				if err != nil {
					return err
				}
				ms = append(ms, m)
				// Back to three instances (standby as the next run's first event wants it).
				if err := rc.start(victim, o.standby != standbyOff); err != nil {
					return err
				}
				if err := rc.waitReady(ctx, victim, time.Now(), 3*time.Minute); err != nil {
					return err
				}
				if o.standby == standbyFailover {
					if err := rc.rollUnmeasured(ctx, false, settleLag); err != nil {
						return err
					}
				} else {
					rc.settle(ctx, settleLag)
				}
			}
			for _, m := range ms {
				say("restart %s run %d/%d %s %s: %s", tag, run, o.runs, ev, m.Instance, m.line())
			}
			sz.Events = append(sz.Events, ms...)
			sz.Medians = summarizeEvents(sz.Events)
			checkpoint()
		}
	}
	return nil
}

func (m eventMeasure) line() string {
	st := ""
	for _, k := range []string{"ingest", "sink-features"} {
		if v, ok := m.StageReady[k]; ok {
			st += fmt.Sprintf(" %s %.1fs", k, v)
		}
	}
	settled := ""
	if !m.Settled {
		settled = " (lag not back down within --settle-max)"
	}
	return fmt.Sprintf("stop %.1fs, ready %.1fs%s; rebalances %v; lag peak %d; freshness p99 %.0f ms (max %.0f, %d rows); restored %d (+%d by others); window %.0fs%s",
		m.StopSeconds, m.ReadySeconds, st, m.Rebalances, m.LagPeak, m.FreshnessP99Ms, m.FreshnessMaxMs, m.Rows, m.Restored, m.RestoredByOthers, m.WindowSeconds, settled)
}

// newRestartCluster lays out the instances: the run's topics, groups, database and configs.
func (h *harness) newRestartCluster(ctx context.Context, tag string, bl backlog) (*restartCluster, error) {
	pr := h.newPeerRun(peerBackflow, 1, bl, tag, "")
	name := strings.ReplaceAll(fmt.Sprintf("%s_%s_1", tag, peerBackflow), "_", "-")
	pr.dirs = nil
	pr.procs = nil
	pr.files = map[string]string{}
	streamTopic, streamGroup := name+"."+restartStream, name+"-stream-"+restartStream
	pr.topics = append(pr.topics, streamTopic)
	pr.groups = append(pr.groups, streamGroup)
	setup, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := h.st.createDatabase(setup, pr.db); err != nil {
		return nil, err
	}
	if err := h.st.flushRedis(setup); err != nil {
		return nil, err
	}
	if err := h.st.createTopics(setup, partitions, append(pr.precreate, streamTopic)...); err != nil {
		return nil, err
	}
	rc := &restartCluster{h: h, tag: tag, pr: pr, bl: bl, lag: &lagPoller{}}
	enriched, dlqT, control := name+".enriched", name+".dlq", name+".control"
	gIngest, gSink, gFeat, gMirror := name+"-ingest", name+"-sink-clickhouse", name+"-features", name+"-dlq-mirror"
	for n := 1; n <= restartInstances; n++ {
		port, err := childproc.FreePort()
		if err != nil {
			return nil, err
		}
		in := &instance{n: n, id: fmt.Sprintf("backflow-%d", n), metrics: fmt.Sprintf("127.0.0.1:%d", port),
			cfg: filepath.Join(h.tmp, fmt.Sprintf("%s-backflow-%d.yaml", tag, n))}
		ingestDir, featDir := filepath.Join(h.tmp, fmt.Sprintf("%s-ingest-%d", tag, n)), filepath.Join(h.tmp, fmt.Sprintf("%s-features-%d", tag, n))
		in.dirs = []string{ingestDir, featDir}
		pr.dirs = append(pr.dirs, in.dirs...)
		doc := map[string]any{
			"stages":           []string{"ingest", "sink-clickhouse", "sink-features", "stream-" + restartStream},
			"shutdown_timeout": "30s",
			// debug: goka's "Recovering from X to hwm=Y" and "setup generation N ... done" lines.
			"log":     map[string]any{"level": "debug"},
			"metrics": map[string]any{"addr": in.metrics, "lag_interval": "1s"},
			"ingest": map[string]any{"group": gIngest, "inference_topic": bl.inference, "gateway_topic": bl.gateway,
				"enriched_topic": enriched, "dlq_topic": dlqT, "control_topic": control, "storage_dir": ingestDir},
			"sink_clickhouse": map[string]any{"migrate": true, "group": gSink, "topic": enriched, "dlq_topic": dlqT, "mirror_dlq_group": gMirror,
				"rollup_topic": enriched + "-rollups", "rollup_group": gSink + "-rollups"},
			"sink_features": map[string]any{"group": gFeat, "enriched_topic": enriched, "dlq_topic": dlqT, "project": "bench", "storage_dir": featDir},
			"streams": []map[string]any{{"name": restartStream, "topic": streamTopic, "group": streamGroup,
				"dedupe_key": "event_id", "event_time": "event_time"}},
		}
		b, err := yaml.Marshal(doc)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(in.cfg, append([]byte("# backflow run's config for one restart benchmark instance (written by bench-harness)\n"), b...), 0o644); err != nil {
			return nil, err
		}
		rc.inst = append(rc.inst, in)
	}
	// The declared stream's table comes from its subject's schema, which its producer
	// registers: loadgen, with a small backlog, as make demo does.
	out, err := exec.CommandContext(ctx, h.opt.loadgen, "--env-file", h.opt.envFile, "--config", rc.inst[0].cfg, "--stream", restartStream,
		"--stream-schema", "deploy/streams/"+restartStream+".avsc", "--requests", "3000", "--no-progress").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("loadgen --stream: %v: %s", err, out)
	}
	rc.pr = pr
	return rc, nil
}

// close stops every instance and the traffic, then deletes what the run made (unless --keep).
func (rc *restartCluster) close() {
	if rc.stopGen != nil {
		rc.stopGen()
		<-rc.genDone
	}
	rc.lag.stop()
	for _, in := range rc.inst {
		if in.c != nil {
			in.c.stop(30 * time.Second)
			in.c = nil
		}
	}
	rc.h.cleanup(rc.pr)
	if !rc.h.opt.keep {
		rc.purge()
	}
}

// deleteSubjects deletes the subjects of the run's topics (the sources', the enriched topic's,
// the declared stream's) that loadgen and ingest registered: soft, then for good.
func (rc *restartCluster) deleteSubjects() {
	cl := http.Client{Timeout: 10 * time.Second}
	for _, topic := range append([]string{rc.bl.inference, rc.bl.gateway}, rc.pr.topics...) {
		for _, q := range []string{"", "?permanent=true"} {
			req, err := http.NewRequest(http.MethodDelete, strings.TrimRight(rc.h.conn.Registry.URL, "/")+"/subjects/"+topic+"-value"+q, nil)
			if err != nil {
				return
			}
			if resp, err := cl.Do(req); err == nil {
				resp.Body.Close()
			}
		}
	}
}

// purge deletes the run's groups and topics until none is left, for up to 90 s: a static
// member that stopped does not leave its groups, which cannot be deleted until its session
// timed out (45 s).
func (rc *restartCluster) purge() {
	deadline := time.Now().Add(90 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var left []string
		if res, err := rc.h.st.adm.DeleteGroups(ctx, rc.pr.groups...); err != nil {
			left = append(left, "groups: "+err.Error())
		} else {
			for g, r := range res {
				if r.Err != nil && !errors.Is(r.Err, kerr.GroupIDNotFound) {
					left = append(left, g+": "+r.Err.Error())
				}
			}
		}
		if res, err := rc.h.st.adm.DeleteTopics(ctx, rc.pr.topics...); err != nil {
			left = append(left, "topics: "+err.Error())
		} else {
			for _, r := range res.Sorted() {
				if r.Err != nil && !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
					left = append(left, r.Topic+": "+r.Err.Error())
				}
			}
		}
		cancel()
		if len(left) == 0 {
			rc.deleteSubjects()
			return
		}
		if time.Now().After(deadline) {
			say("could not delete the run's groups and topics: %s", strings.Join(left, "; "))
			return
		}
		time.Sleep(5 * time.Second)
	}
}

// start starts in (again), with hot standby when standby.
func (rc *restartCluster) start(in *instance, standby bool) error {
	in.starts++
	env := []string{"BACKFLOW_CLICKHOUSE_DATABASE=" + rc.pr.db, fmt.Sprintf("BACKFLOW_REDIS_DB=%d", rc.h.opt.redisDB),
		"BACKFLOW_INGEST_STANDBY=" + strconv.FormatBool(standby), "BACKFLOW_SINK_FEATURES_STANDBY=" + strconv.FormatBool(standby)}
	if rc.h.opt.instanceIDs {
		env = append(env, "BACKFLOW_KAFKA_INSTANCE_ID="+in.id)
	} else {
		env = append(env, "BACKFLOW_KAFKA_INSTANCE_ID=") // dynamic membership, even if the environment sets one
	}
	log := filepath.Join(rc.h.tmp, fmt.Sprintf("%s-%s-%d.log", rc.tag, in.id, in.starts))
	c, err := startChild(in.id, rc.h.opt.backflow, []string{"run", "--config", in.cfg}, env, log)
	if err != nil {
		return err
	}
	in.c = c
	return nil
}

// ready reports whether in's /readyz answers 200.
func (in *instance) ready() bool {
	cl := http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get("http://" + in.metrics + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// waitReady waits until in's /readyz answers 200 and its log has every goka stage's ready line.
func (rc *restartCluster) waitReady(ctx context.Context, in *instance, since time.Time, limit time.Duration) error {
	deadline := since.Add(limit)
	for time.Now().Before(deadline) {
		if ok, err := in.c.exited(); ok {
			return fmt.Errorf("%s exited (%v); its log ends:\n%s", in.id, err, in.c.tail(15))
		}
		if in.ready() {
			b, _ := os.ReadFile(in.c.log)
			if strings.Contains(string(b), "ingest ready") && strings.Contains(string(b), "sink-features ready") {
				return nil
			}
		}
		if !sleepCtx(ctx, 100*time.Millisecond) {
			return ctx.Err()
		}
	}
	return fmt.Errorf("%s not ready within %v; logs in %s", in.id, limit, rc.h.tmp)
}

// waitDrained waits until every group of the run has no lag (the state is built).
func (rc *restartCluster) waitDrained(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	last := time.Now()
	zero := 0
	for time.Now().Before(deadline) {
		for _, in := range rc.inst {
			if ok, err := in.c.exited(); ok {
				return fmt.Errorf("%s exited (%v); its log ends:\n%s", in.id, err, in.c.tail(15))
			}
		}
		total, groups := rc.lag.latest()
		if groups >= len(rc.pr.groups) && total == 0 {
			if zero++; zero >= 3 {
				return nil
			}
		} else {
			zero = 0
		}
		if time.Since(last) > 5*time.Second {
			last = time.Now()
			say("  building: summed lag %d over %d groups", total, groups)
		}
		if !sleepCtx(ctx, time.Second) {
			return ctx.Err()
		}
	}
	return fmt.Errorf("the groups' lag not 0 within %v; logs in %s", limit, rc.h.tmp)
}

// settle waits until the summed lag has been at most limit for 3 s in a row, at most
// --settle-max; it reports whether it got there.
func (rc *restartCluster) settle(ctx context.Context, limit int64) bool {
	deadline := time.Now().Add(rc.h.opt.settleMax)
	ok := 0
	for time.Now().Before(deadline) {
		if total, _ := rc.lag.latest(); total <= limit {
			if ok++; ok >= 3 {
				return true
			}
		} else {
			ok = 0
		}
		if !sleepCtx(ctx, time.Second) {
			return false
		}
	}
	return false
}

// startTraffic starts loadgen at rate requests/s until close.
func (rc *restartCluster) startTraffic(ctx context.Context, rate float64) {
	gctx, cancel := context.WithCancel(ctx)
	rc.stopGen, rc.genDone = cancel, make(chan struct{})
	go func() {
		defer close(rc.genDone)
		_, err := rc.h.load(gctx, loadgen.Config{InferenceTopic: rc.bl.inference, GatewayTopic: rc.bl.gateway, Rate: rate, Duration: 24 * time.Hour}, rc.tag+"-steady")
		if err != nil && gctx.Err() == nil {
			say("steady traffic stopped: %v", err)
		}
	}()
}

// offsets are the log sizes of every running instance, for what they log from now on.
func (rc *restartCluster) offsets() map[*instance]int64 {
	out := map[*instance]int64{}
	for _, in := range rc.inst {
		if in.c != nil {
			out[in] = fileSize(in.c.log)
		}
	}
	return out
}

// restart SIGTERMs in, deletes its storage when empty, starts it again and measures the event
// until the lag is back down.
func (rc *restartCluster) restart(ctx context.Context, ev string, run int, in *instance, empty, standby bool, settleLag int64) (eventMeasure, error) {
	m := eventMeasure{Event: ev, Run: run, Instance: in.id, StageReady: map[string]float64{}}
	others := rc.offsets()
	delete(others, in)
	t0 := time.Now()
	in.c.stop(60 * time.Second)
	in.c = nil
	m.StopSeconds = round1(time.Since(t0).Seconds())
	if empty {
		for _, d := range in.dirs {
			if err := os.RemoveAll(d); err != nil {
				return m, err
			}
		}
	}
	t1 := time.Now()
	if err := rc.start(in, standby); err != nil {
		return m, err
	}
	if err := rc.waitReady(ctx, in, t1, 5*time.Minute); err != nil {
		return m, err
	}
	m.ReadySeconds = round1(time.Since(t1).Seconds())
	for stage, at := range readyLines(in.c.log) {
		m.StageReady[stage] = round1(at.Sub(t1).Seconds())
	}
	m.Settled = rc.settle(ctx, settleLag)
	return rc.window(ctx, m, t0, time.Now(), others, in), nil
}

// failover SIGKILLs in and measures until the others own its partitions and the lag is down.
func (rc *restartCluster) failover(ctx context.Context, run int, in *instance, settleLag int64) (eventMeasure, error) {
	m := eventMeasure{Event: eventFailover, Run: run, Instance: in.id}
	others := rc.offsets()
	delete(others, in)
	t0 := time.Now()
	in.c.p.Kill()
	in.c = nil
	// Taken over: every other instance set up a new session of both goka groups (its tables
	// recovered), after the session timeout told the group that in is gone.
	deadline := t0.Add(5 * time.Minute)
	for {
		done := true
		for o, off := range others {
			groups := map[string]bool{}
			for _, mm := range setupDoneRe.FindAllStringSubmatch(readFrom(o.c.log, off), -1) {
				groups[mm[1]] = true
			}
			if len(groups) < 2 {
				done = false
			}
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			return m, fmt.Errorf("the other instances did not take over %s's partitions within 5 min; logs in %s", in.id, rc.h.tmp)
		}
		if !sleepCtx(ctx, 200*time.Millisecond) {
			return m, ctx.Err()
		}
	}
	m.ReadySeconds = round1(time.Since(t0).Seconds())
	m.Settled = rc.settle(ctx, settleLag)
	return rc.window(ctx, m, t0, time.Now(), others, nil), nil
}

// rollUnmeasured restarts every instance in turn with standby as given, waiting for each.
func (rc *restartCluster) rollUnmeasured(ctx context.Context, standby bool, settleLag int64) error {
	for _, in := range rc.inst {
		t0 := time.Now()
		if in.c != nil {
			in.c.stop(60 * time.Second)
		}
		if err := rc.start(in, standby); err != nil {
			return err
		}
		if err := rc.waitReady(ctx, in, t0, 5*time.Minute); err != nil {
			return err
		}
	}
	rc.settle(ctx, settleLag)
	return nil
}

// window fills m's figures for [from, to]: the lag peak, the freshness of the rows landed, and
// from the logs (others: each other instance's log offset at from; in: the restarted one, whose
// whole new log counts) the rebalances and the records restored.
func (rc *restartCluster) window(ctx context.Context, m eventMeasure, from, to time.Time, others map[*instance]int64, in *instance) eventMeasure {
	m.WindowSeconds = round1(to.Sub(from).Seconds())
	m.LagPeak = rc.lag.peak(from, to)
	m.Rebalances = map[string]int{}
	for o, off := range others {
		s, r := logStats(readFrom(o.c.log, off))
		for k, v := range s {
			m.Rebalances[k] = max(m.Rebalances[k], v)
			m.MaxRebalances = max(m.MaxRebalances, v)
		}
		m.RestoredByOthers += r
	}
	if in != nil && in.c != nil {
		_, m.Restored = logStats(readFrom(in.c.log, 0))
	}
	qctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	q := fmt.Sprintf(`SELECT count(), quantilesExact(0.5, 0.99)(toFloat64(landed_time_ms - event_time_ms)), max(landed_time_ms - event_time_ms)
		FROM %s.inference_results WHERE landed_time_ms BETWEEN ? AND ?`, rc.pr.db)
	var qs []float64
	var maxMs int64
	if err := rc.h.st.ch.QueryRow(qctx, q, from.UnixMilli(), to.UnixMilli()).Scan(&m.Rows, &qs, &maxMs); err != nil {
		say("  freshness of %s: %v", m.Event, err)
	} else if len(qs) == 2 {
		m.FreshnessP50Ms, m.FreshnessP99Ms, m.FreshnessMaxMs = math.Round(qs[0]), math.Round(qs[1]), float64(maxMs)
	}
	return m
}

// readyLines returns when each goka stage logged "<stage> ready" in log.
func readyLines(log string) map[string]time.Time {
	out := map[string]time.Time{}
	f, err := os.Open(log)
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for _, stage := range []string{"ingest", "sink-features"} {
			if _, seen := out[stage]; seen || !strings.Contains(line, `msg="`+stage+` ready"`) {
				continue
			}
			if t, ok := logTime(line); ok {
				out[stage] = t
			}
		}
	}
	return out
}

// logTime is the time= of a text log line.
func logTime(line string) (time.Time, bool) {
	v, ok := strings.CutPrefix(line, "time=")
	if !ok {
		return time.Time{}, false
	}
	v, _, _ = strings.Cut(v, " ")
	t, err := time.Parse(time.RFC3339Nano, v)
	return t, err == nil
}

// stateMB is the size of each instance's storage dirs, in MB.
func (rc *restartCluster) stateMB() map[string]int64 {
	out := map[string]int64{}
	for _, in := range rc.inst {
		for _, d := range in.dirs {
			var n int64
			_ = filepath.Walk(d, func(_ string, fi os.FileInfo, err error) error {
				if err == nil && !fi.IsDir() {
					n += fi.Size()
				}
				return nil
			})
			out[filepath.Base(d)] = n >> 20
		}
	}
	return out
}

// lagPoller samples the summed consumer lag of the run's groups from the instances' /metrics
// once a second. Every instance exports the lag of its stages' whole groups, so a group's lag
// is the largest any instance reports.
type lagPoller struct {
	mu      sync.Mutex
	samples []lagSample
	cancel  context.CancelFunc
	done    chan struct{}
}

type lagSample struct {
	t      time.Time
	total  int64
	groups int
}

func (l *lagPoller) run(rc *restartCluster) {
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel, l.done = cancel, make(chan struct{})
	want := map[string]bool{}
	for _, g := range rc.pr.groups {
		want[g] = true
	}
	go func() {
		defer close(l.done)
		cl := http.Client{Timeout: 2 * time.Second}
		for sleepCtx(ctx, time.Second) {
			byGroup := map[string]int64{}
			for _, in := range rc.inst {
				c := in.c
				if c == nil {
					continue
				}
				resp, err := cl.Get("http://" + in.metrics + "/metrics")
				if err != nil {
					continue
				}
				for g, v := range parseLag(resp.Body) {
					if want[g] {
						byGroup[g] = max(byGroup[g], v)
					}
				}
				resp.Body.Close()
			}
			var total int64
			for _, v := range byGroup {
				total += v
			}
			l.mu.Lock()
			l.samples = append(l.samples, lagSample{t: time.Now(), total: total, groups: len(byGroup)})
			l.mu.Unlock()
		}
	}()
}

func (l *lagPoller) stop() {
	if l.cancel != nil {
		l.cancel()
		<-l.done
	}
}

func (l *lagPoller) latest() (int64, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.samples) == 0 {
		return -1, 0
	}
	s := l.samples[len(l.samples)-1]
	return s.total, s.groups
}

func (l *lagPoller) peak(from, to time.Time) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var p int64
	for _, s := range l.samples {
		if !s.t.Before(from) && !s.t.After(to) {
			p = max(p, s.total)
		}
	}
	return p
}

// lagLine is one series of backflow_consumer_lag.
var lagLine = regexp.MustCompile(`^backflow_consumer_lag\{([^}]*)\} ([0-9.eE+-]+)$`)
var groupLabel = regexp.MustCompile(`group="([^"]*)"`)

// parseLag sums backflow_consumer_lag per group from a /metrics page.
func parseLag(r io.Reader) map[string]int64 {
	out := map[string]int64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := lagLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		g := groupLabel.FindStringSubmatch(m[1])
		v, err := strconv.ParseFloat(m[2], 64)
		if g == nil || err != nil {
			continue
		}
		out[g[1]] += int64(v)
	}
	return out
}

// sleepCtx sleeps d, or less if ctx ends; it reports whether ctx is still live.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// restartMarkdown is the table of each size's medians, for docs/benchmarks.md.
func restartMarkdown(res *restartResults) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Restarts: %d runs, %.0f requests/s steady, standby %s, static membership %v, commit %s, %s\n\n", res.Options.Runs, res.Options.Rate, res.Options.Standby,
		res.Options.Static, res.Commit, res.Machine)
	b.WriteString("| state | event | samples | stop s | ready s | ingest ready s | sink-features ready s | rebalances (others) | lag peak | freshness p99 ms | records restored (+others) |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	f := func(s spread) string {
		if s.Min == s.Max {
			return strconv.FormatFloat(s.Median, 'f', -1, 64)
		}
		return fmt.Sprintf("%g (%g–%g)", s.Median, s.Min, s.Max)
	}
	fp := func(s *spread) string {
		if s == nil {
			return "–"
		}
		return f(*s)
	}
	for _, sz := range res.Sizes {
		fmt.Fprintf(&b, "| %d requests | baseline | 1 | | | | | | %d | %.0f | |\n", sz.Requests, sz.Baseline.LagPeak, sz.Baseline.FreshnessP99Ms)
		for _, ev := range restartEvents {
			s, ok := sz.Medians[ev]
			if !ok {
				continue
			}
			fmt.Fprintf(&b, "| %d requests | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s (+%s) |\n", sz.Requests, ev, s.Samples, f(s.StopSeconds), f(s.ReadySeconds), fp(s.IngestReady),
				fp(s.FeatReady), f(s.Rebalances), f(s.LagPeak), f(s.FreshnessP99), f(s.Restored), f(s.RestoredOth))
		}
	}
	return b.String()
}

// restartSummary is the file to commit (bench/restart.json): per size, the baseline and each
// event's medians with their spread.
func restartSummary(res *restartResults) ([]byte, error) {
	if res.Partial {
		return nil, errors.New("the run did not finish")
	}
	type size struct {
		Requests      int                     `json:"requests"`
		BuildSeconds  float64                 `json:"build_seconds"`
		StateMB       map[string]int64        `json:"state_mb"`
		BaselineP99Ms float64                 `json:"baseline_freshness_p99_ms"`
		BaselineLag   int64                   `json:"baseline_lag_peak"`
		Events        map[string]eventSummary `json:"events"`
	}
	out := struct {
		Started string         `json:"started"`
		Commit  string         `json:"commit"`
		Machine machine        `json:"machine"`
		Options restartOptions `json:"options"`
		Sizes   []size         `json:"sizes"`
	}{Started: res.Started.Format(time.RFC3339), Commit: res.Commit, Machine: res.Machine, Options: res.Options}
	for _, sz := range res.Sizes {
		out.Sizes = append(out.Sizes, size{Requests: sz.Requests, BuildSeconds: round1(sz.BuildSeconds), StateMB: sz.StateMB,
			BaselineP99Ms: sz.Baseline.FreshnessP99Ms, BaselineLag: sz.Baseline.LagPeak, Events: sz.Medians})
	}
	b, err := json.MarshalIndent(out, "", "  ")
	return append(b, '\n'), err
}
