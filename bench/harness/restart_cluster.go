package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.yaml.in/yaml/v3"

	childproc "github.com/backflowhq/backflow/test/proc"
	"github.com/backflowhq/backflow/tools/loadgen"
)

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
	tables  []string // the two table changelogs: ingest's and sink-features'
	stopGen context.CancelFunc
	genDone chan struct{}
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
	rc.tables = []string{gIngest + "-table", gFeat + "-table"}
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
	var subjects []string
	for _, topic := range append([]string{rc.bl.inference, rc.bl.gateway}, rc.pr.topics...) {
		subjects = append(subjects, topic+"-value")
	}
	rc.h.deleteSubjects(subjects...)
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
		// Turning standby on, an instance restores a copy of every partition it does not own
		// before it is ready: at 10M requests of state that is minutes of changelog.
		if err := rc.waitReady(ctx, in, t0, 20*time.Minute); err != nil {
			return err
		}
	}
	rc.settle(ctx, settleLag)
	return nil
}
