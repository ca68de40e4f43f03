package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/tools/loadgen"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/backflowhq/backflow/test/procstat"
)

// backlog is the pre-filled source topics every peer drains.
type backlog struct {
	tag                string
	inference, gateway string
	records            int64 // end offsets of both topics
	stats              loadgen.Stats
}

func (b backlog) recordsPerRequest() float64 {
	if b.stats.Requests == 0 {
		return 3
	}
	return float64(b.stats.Records) / float64(b.stats.Requests)
}

const partitions = 3

// prefill creates two source topics named after tag and fills them from loadgen with about
// records source records (records/3 requests, rounded up).
func (h *harness) prefill(ctx context.Context, tag string, records int) (backlog, error) {
	bl := backlog{tag: tag, inference: tag + ".model-inference-result", gateway: tag + ".gateway-log"}
	tctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := h.st.createTopics(tctx, partitions, bl.inference, bl.gateway); err != nil {
		return bl, err
	}
	requests := (records + 2) / 3
	say("pre-filling %s and %s: %d requests (about %d records) from loadgen", bl.inference, bl.gateway, requests, records)
	st, err := h.load(ctx, loadgen.Config{InferenceTopic: bl.inference, GatewayTopic: bl.gateway, Requests: requests}, tag)
	if err != nil {
		return bl, err
	}
	bl.stats = st
	if bl.records, err = h.st.endOffsets(ctx, bl.inference, bl.gateway); err != nil {
		return bl, err
	}
	say("backlog: %s", st)
	return bl, nil
}

// load runs loadgen in process with progress lines every 10 %.
func (h *harness) load(ctx context.Context, cfg loadgen.Config, runID string) (loadgen.Stats, error) {
	reg, err := avro.NewRegistryClient(h.conn.Registry)
	if err != nil {
		return loadgen.Stats{}, err
	}
	cl, err := h.conn.Kafka.NewClient(loadgen.ProducerOpts()...)
	if err != nil {
		return loadgen.Stats{}, err
	}
	defer cl.Close()
	// A topic just created may take a moment to show in the metadata loadgen reads.
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := h.st.endOffsets(ctx, cfg.InferenceTopic, cfg.GatewayTopic); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	next := 10
	start := time.Now()
	return loadgen.Run(ctx, cfg, cl, reg, loadgen.Options{RunID: runID, Progress: func(n int) {
		if cfg.Requests > 0 && n*100/cfg.Requests >= next {
			say("  loadgen %d%% (%d requests, %.0f requests/s)", next, n, float64(n)/time.Since(start).Seconds())
			next += 10
		}
	}})
}

// point is a group's committed offsets at one moment.
type point struct {
	t time.Duration
	n int64
}

// tracker follows one stage's consumer group until it has committed all of its input.
type tracker struct {
	stage
	total  int64 // input records (known once upstream is done)
	series []point
	doneAt time.Duration
	done   bool
}

// measure runs one peer over the backlog and returns its figures. The clock starts when the
// first process is started and stops when every stage's group has committed its whole input
// (a sink commits only what it wrote, so by then the last row and feature have landed).
func (h *harness) measure(ctx context.Context, pr peerRun, bl backlog) (peerMeasure, error) {
	m := peerMeasure{Peer: pr.peer, Run: pr.run, Records: bl.records}
	setup, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := h.st.createDatabase(setup, pr.db); err != nil {
		return m, err
	}
	if err := h.st.flushRedis(setup); err != nil {
		return m, err
	}
	if err := h.st.createTopics(setup, partitions, pr.precreate...); err != nil {
		return m, err
	}
	defer h.cleanup(pr)

	svcPids := servicePids(h.stackDirs...)
	svcBefore := map[string]procstat.Sample{}
	for name, pid := range svcPids {
		if s, err := procstat.Read(pid); err == nil {
			svcBefore[name] = s
		}
	}
	if err := pr.writeFiles(); err != nil {
		return m, err
	}
	say("%s run %d: starting %d process(es); ClickHouse database %s", pr.peer, pr.run, len(pr.procs), pr.db)
	m.Cond.LoadStart = load1()
	cpu0 := readCPUTimes()
	start := time.Now()
	var children []*child
	stopAll := func() []procstat.Sample {
		out := make([]procstat.Sample, len(children))
		for i, c := range children {
			out[i] = c.sample()
		}
		for i := len(children) - 1; i >= 0; i-- {
			children[i].stop(30 * time.Second)
		}
		return out
	}
	defer func() { stopAll() }()
	for _, p := range pr.procs {
		c, err := startChild(p.name, p.bin, p.args, p.env, filepath.Join(h.tmp, fmt.Sprintf("%s-%d-%s.log", pr.peer, pr.run, p.name)))
		if err != nil {
			return m, err
		}
		children = append(children, c)
	}
	trackers := make([]*tracker, len(pr.stages))
	for i, s := range pr.stages {
		trackers[i] = &tracker{stage: s}
		if s.after == "" {
			trackers[i].total = bl.records
		}
	}
	byName := map[string]*tracker{}
	for _, t := range trackers {
		byName[t.name] = t
	}

	limit := h.drainTimeout(bl.records)
	deadline := time.After(limit)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	lastSay := time.Now()
	for {
		select {
		case <-ctx.Done():
			return m, ctx.Err()
		case <-deadline:
			return m, fmt.Errorf("not drained within %v (--timeout, longer for a large backlog); logs in %s", limit, h.tmp)
		case <-tick.C:
		}
		for i, c := range children {
			if ok, err := c.exited(); ok {
				if nc, rerr := h.restartOnce(c, pr.procs[i], time.Since(start), &m.Restarts, err); rerr == nil {
					children[i] = nc
					continue
				}
				return m, fmt.Errorf("%s exited early (%v); its log ends:\n%s", c.name, err, c.tail(15))
			}
			c.sample()
		}
		now := time.Since(start)
		qctx, qcancel := context.WithTimeout(ctx, 5*time.Second)
		allDone := true
		for _, t := range trackers {
			if t.done {
				continue
			}
			n, err := h.st.committed(qctx, t.group, t.topics...)
			if err != nil {
				allDone = false
				continue
			}
			t.series = append(t.series, point{now, n})
			if t.after != "" {
				up := byName[t.after]
				if !up.done {
					allDone = false
					continue
				}
				if t.total == 0 {
					if t.total, err = h.st.endOffsets(qctx, t.topics...); err != nil {
						t.total = 0
						allDone = false
						continue
					}
				}
			}
			if t.total > 0 && n >= t.total {
				t.done, t.doneAt = true, now
				continue
			}
			allDone = false
		}
		qcancel()
		if time.Since(lastSay) >= 3*time.Second || allDone {
			lastSay = time.Now()
			say("  %s run %d %5.1fs  %s", pr.peer, pr.run, now.Seconds(), progressLine(trackers, children))
		}
		if allDone {
			break
		}
	}
	m.Seconds = time.Since(start).Seconds()
	m.RecordsPerSec = float64(bl.records) / m.Seconds
	cpu1 := readCPUTimes()
	m.Cond.LoadEnd = load1()
	finals := stopAll()
	names := make([]string, len(children))
	logs := make([]string, len(children))
	for i, c := range children {
		names[i], logs[i] = c.name, c.log
	}
	children = nil
	for _, t := range trackers {
		sr := stageMeasure{Stage: t.name, Group: t.group, Input: t.total, Seconds: t.doneAt.Seconds()}
		if sr.Seconds > 0 {
			sr.RecordsPerSec = float64(t.total) / sr.Seconds
		}
		sr.SteadyPerSec = steadyRate(t.series, t.total)
		m.Stages = append(m.Stages, sr)
	}
	for i, f := range finals {
		m.Procs = append(m.Procs, procMeasure{Name: names[i], CPUSeconds: f.CPU, CPUPerMillion: f.CPU / (float64(bl.records) / 1e6), PeakRSSMB: mb(f.PeakRSS),
			Cores: f.CPU / m.Seconds})
		m.CPUPerMillion += f.CPU / (float64(bl.records) / 1e6)
		m.PeakRSSMB += mb(f.PeakRSS)
	}
	for name, pid := range svcPids {
		b, ok := svcBefore[name]
		a, err := procstat.Read(pid)
		if !ok || err != nil {
			continue
		}
		m.Services = append(m.Services, procMeasure{Name: name, CPUSeconds: a.CPU - b.CPU, CPUPerMillion: (a.CPU - b.CPU) / (float64(bl.records) / 1e6), PeakRSSMB: mb(a.PeakRSS),
			Cores: (a.CPU - b.CPU) / m.Seconds})
	}
	sort.Slice(m.Services, func(i, j int) bool { return m.Services[i].Name < m.Services[j].Name })
	var peerCPU, svcCPU, gcCPUMs float64
	for _, f := range finals {
		peerCPU += f.CPU
	}
	for _, s := range m.Services {
		svcCPU += s.CPUSeconds
	}
	m.Cond.machineDuring(cpu0, cpu1, peerCPU, svcCPU, m.Seconds)
	for _, l := range logs {
		n, pause, cpu := gcTrace(l)
		m.Cond.GCCycles += n
		m.Cond.GCPauseMs += pause
		gcCPUMs += cpu
	}
	m.Cond.GCCPUPerMilli = gcCPUMs / 1000 / (float64(bl.records) / 1e6)
	cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
	defer ccancel()
	count := h.st.rowCounts
	if pr.rows != nil {
		count = pr.rows
	}
	raw, final, err := count(cctx, pr.db)
	if err != nil {
		return m, fmt.Errorf("count rows in %s: %w", pr.db, err)
	}
	m.Rows, m.RowsFinal, m.RowsExpected = raw, final, uint64(bl.stats.Originals)
	var written int64
	if len(pr.topics) > 0 {
		ends, err := h.st.adm.ListEndOffsets(cctx, pr.topics...)
		if err != nil {
			return m, fmt.Errorf("count the records written: %w", err)
		}
		ends.Each(func(o kadm.ListedOffset) {
			if o.Err == nil { // a topic the peer never made (a DLQ nothing went to) wrote nothing
				written += o.Offset
			}
		})
	}
	var consumed int64
	for _, g := range pr.groups {
		n, err := h.st.committed(cctx, g, append(slices.Clone(pr.topics), bl.inference, bl.gateway)...)
		if err != nil {
			return m, fmt.Errorf("count the records %s consumed: %w", g, err)
		}
		consumed += n
	}
	m.KafkaWritten, m.KafkaConsumed = float64(written)/float64(bl.records), float64(consumed)/float64(bl.records)
	if pr.features {
		if m.RedisKeys, err = h.st.redisKeys(cctx); err != nil {
			return m, err
		}
	}
	return m, nil
}

// cleanup deletes what a run created, unless --keep.
func (h *harness) cleanup(pr peerRun) {
	if h.opt.keep {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h.st.dropDatabase(ctx, pr.db)
	h.st.deleteGroups(ctx, pr.groups...)
	h.st.deleteTopics(ctx, pr.topics...)
	for _, d := range pr.dirs {
		os.RemoveAll(d)
	}
}

func progressLine(ts []*tracker, cs []*child) string {
	var b strings.Builder
	for _, t := range ts {
		var n int64
		if len(t.series) > 0 {
			n = t.series[len(t.series)-1].n
		}
		state := "…"
		if t.total > 0 {
			state = fmt.Sprintf("%3.0f%%", 100*float64(n)/float64(t.total))
		}
		if t.done {
			state = "done"
		}
		fmt.Fprintf(&b, "%s %s (%d)  ", t.name, state, n)
	}
	for _, c := range cs {
		fmt.Fprintf(&b, "%s %.0f MB  ", c.name, mb(c.sample().RSS))
	}
	return b.String()
}

// steadyRate is the records/s between the moments a group had committed 10 % and 90 % of its
// input: the drain rate without start-up and tail.
func steadyRate(series []point, total int64) float64 {
	if total <= 0 {
		return 0
	}
	var t10, t90 time.Duration
	var n10, n90 int64
	for _, p := range series {
		if n10 == 0 && p.n >= total/10 {
			t10, n10 = p.t, p.n
		}
		if n90 == 0 && p.n >= total*9/10 {
			t90, n90 = p.t, p.n
		}
	}
	if n10 == 0 || n90 == 0 || t90 <= t10 {
		return 0
	}
	return float64(n90-n10) / (t90 - t10).Seconds()
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

// latencyRun starts backflow on fresh, empty source topics, waits until its groups are ready,
// sends at rate requests/s for --latency-duration, waits until everything is committed, and reads
// the latency of the REQUEST rows from ClickHouse (the first 2 s, warm-up, left out).
func (h *harness) latencyRun(ctx context.Context, run int, rate float64) (latencyResult, error) {
	var r latencyResult
	tag := fmt.Sprintf("l%s%d", strings.ToLower(h.stamp[4:]), run)
	bl := backlog{tag: tag, inference: tag + ".model-inference-result", gateway: tag + ".gateway-log"}
	setup, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := h.st.createTopics(setup, partitions, bl.inference, bl.gateway); err != nil {
		return r, err
	}
	defer func() {
		if !h.opt.keep {
			c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			h.st.deleteTopics(c, bl.inference, bl.gateway)
			cancel()
		}
	}()
	pr := h.newPeerRun(peerBackflow, run, bl, tag, "")
	if err := h.st.createDatabase(setup, pr.db); err != nil {
		return r, err
	}
	if err := h.st.createTopics(setup, partitions, pr.precreate...); err != nil {
		return r, err
	}
	defer h.cleanup(pr)
	if err := pr.writeFiles(); err != nil {
		return r, err
	}
	var children []*child
	defer func() {
		for i := len(children) - 1; i >= 0; i-- {
			children[i].stop(30 * time.Second)
		}
	}()
	for _, p := range pr.procs {
		c, err := startChild(p.name, p.bin, p.args, p.env, filepath.Join(h.tmp, fmt.Sprintf("latency-%d-%s.log", run, p.name)))
		if err != nil {
			return r, err
		}
		children = append(children, c)
	}
	// Ready: every process logged that its goka groups are consuming (the ClickHouse sink's
	// first poll is immediate), or 60 s passed.
	say("latency run %d: waiting for backflow's stages to be ready", run)
	started := time.Now()
	readyBy := started.Add(60 * time.Second)
	restarts := 0
	for time.Now().Before(readyBy) {
		ready := true
		for i, c := range children {
			if ok, err := c.exited(); ok {
				if nc, rerr := h.restartOnce(c, pr.procs[i], time.Since(started), &restarts, err); rerr == nil {
					children[i], ready = nc, false
					continue
				}
				return r, fmt.Errorf("%s exited early (%v):\n%s", c.name, err, c.tail(15))
			}
			b, _ := os.ReadFile(c.log)
			for _, line := range pr.procs[i].ready {
				if !strings.Contains(string(b), line) {
					ready = false
				}
			}
		}
		if ready {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // the ClickHouse sink joins its group
	say("latency run %d: loadgen at %.0f requests/s for %v", run, rate, h.opt.latencyFor)
	from := time.Now().Add(2 * time.Second)
	st, err := h.load(ctx, loadgen.Config{InferenceTopic: bl.inference, GatewayTopic: bl.gateway, Rate: rate, Duration: h.opt.latencyFor}, tag)
	if err != nil {
		return r, err
	}
	total := int64(st.Records)
	// Drained: ingest committed every source record and the ClickHouse sink the whole enriched topic.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if time.Now().After(deadline) {
			return r, fmt.Errorf("not drained 3 min after loadgen stopped; logs in %s", h.tmp)
		}
		n, err1 := h.st.committed(ctx, pr.stages[0].group, pr.stages[0].topics...)
		e, err2 := h.st.endOffsets(ctx, pr.stages[1].topics...)
		s, err3 := h.st.committed(ctx, pr.stages[1].group, pr.stages[1].topics...)
		if err1 == nil && err2 == nil && err3 == nil && n >= total && e > 0 && s >= e {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	qctx, qcancel := context.WithTimeout(ctx, time.Minute)
	defer qcancel()
	r, err = h.st.latency(qctx, pr.db, from)
	r.Run = run
	r.Restarts = restarts
	r.Requests = st.Requests
	return r, err
}

// restartOnce starts stage s again in place of c, which exited during start-up (the first 60 s):
// goka's create of its loop topic can fail with "already exists" when the broker's metadata lags
// under load, even though the topic was created beforehand. A second exit, or one after
// start-up, is an error. restarts counts what it did.
func (h *harness) restartOnce(c *child, s proc, since time.Duration, restarts *int, exitErr error) (*child, error) {
	if *restarts > 0 || since > 60*time.Second {
		return nil, fmt.Errorf("%s exited: %v", c.name, exitErr)
	}
	*restarts++
	say("  %s exited during start-up (%v): %s; starting it again once", c.name, exitErr, strings.TrimSpace(c.tail(1)))
	old := c.log + ".1"
	_ = os.Rename(c.log, old)
	return startChild(s.name, s.bin, s.args, s.env, c.log)
}

// writeFiles writes the files the run's processes read (backflow run's config).
func (pr peerRun) writeFiles() error {
	for path, content := range pr.files {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}
