package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/backflowhq/backflow/test/faultproxy"
)

// The restart scenarios (22-24) run several `backflow run` instances of every stage side by
// side, as a deploy does: static group membership (kafka.instance_id backflow-1..n), each
// instance with its own storage folders, kept across its restarts.

const allStages = "ingest, sink-clickhouse, sink-features"

// instanceName is the child name and the static instance id of instance n (from 1).
func instanceName(n int) string { return fmt.Sprintf("backflow-%d", n) }

// StartInstance starts instance n of every stage with its static id; extra adds config keys
// as Config takes them ("kafka" keys are added to the instance id).
func (r *Run) StartInstance(n int, extra map[string]string) (*Proc, error) {
	name := instanceName(n)
	ex := map[string]string{}
	for k, v := range extra {
		ex[k] = v
	}
	ex["kafka"] = mergeKeys("instance_id: "+name, extra["kafka"])
	return r.StartRun(name, allStages, ex)
}

// StartInstances starts instances 1..n one after another, each ready before the next, so that
// each scenario starts from the same settled group. (Started together their ClickHouse
// migrations take turns under the migration lock, and a table topic one creates before its
// partitions have a leader is waited for: TestMigrationsTakeTurns and TestProcessorStartsThroughNotLeader.)
func (r *Run) StartInstances(ctx context.Context, n int, extra map[string]string) ([]*Proc, error) {
	var ps []*Proc
	for i := 1; i <= n; i++ {
		p, err := r.StartInstance(i, extra)
		if err != nil {
			return nil, err
		}
		if err := p.Ready(ctx, 3*time.Minute); err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// logMarks are the lengths of some children's logs at one moment: what they log from then on
// is since.
type logMarks map[*Proc]int

func markLogs(ps ...*Proc) logMarks {
	m := logMarks{}
	for _, p := range ps {
		m[p] = len(p.Log())
	}
	return m
}

func (m logMarks) since(p *Proc) string {
	l := p.Log()
	if m[p] > len(l) {
		return l
	}
	return l[m[p]:]
}

// setupRe is goka's line for a new session of a processor's group (its name is the group).
var setupRe = regexp.MustCompile(`^\[Processor ([^\]]+)\] setup generation \d+,`)

// recoverRe is goka's debug line where a table partition's recovery starts.
var recoverRe = regexp.MustCompile(`Recovering from (-?\d+) to hwm=(\d+); \(local offset is (-?\d+)\)`)

// logLine is what the scenarios read of a JSON log line.
type logLine struct {
	Msg     string `json:"msg"`
	Group   string `json:"group"`
	Records int64  `json:"records"`
}

func logLines(text string) []logLine {
	var out []logLine
	for _, s := range strings.Split(text, "\n") {
		var l logLine
		if json.Unmarshal([]byte(s), &l) == nil && l.Msg != "" {
			out = append(out, l)
		}
	}
	return out
}

// sessions counts in text the new sessions per consumer group: goka's "setup generation"
// lines (ingest, sink-features) and the ClickHouse sink's "partitions assigned" lines (one per
// new assignment of its franz-go groups).
func sessions(text string) map[string]int {
	out := map[string]int{}
	for _, l := range logLines(text) {
		if m := setupRe.FindStringSubmatch(l.Msg); m != nil {
			out[m[1]]++
		} else if l.Msg == "clickhouse sink: partitions assigned" {
			out[l.Group]++
		}
	}
	return out
}

// recovery is one table partition recovery goka logged.
type recovery struct {
	from, hwm, local int64
	msg              string
}

// read is how many changelog records the recovery reads.
func (rc recovery) read() int64 { return max(rc.hwm-max(rc.from, 0), 0) }

// cold reports whether the recovery restores the partition from nothing: no local offset, and
// records to read; or more than half the changelog partition to read (a warm table reads only
// what was written since it last applied).
func (rc recovery) cold() bool {
	return (rc.local < 0 && rc.read() > 0) || (rc.hwm > 0 && rc.read()*2 > rc.hwm)
}

func recoveries(text string) []recovery {
	var out []recovery
	for _, l := range logLines(text) {
		if m := recoverRe.FindStringSubmatch(l.Msg); m != nil {
			from, _ := strconv.ParseInt(m[1], 10, 64)
			hwm, _ := strconv.ParseInt(m[2], 10, 64)
			local, _ := strconv.ParseInt(m[3], 10, 64)
			out = append(out, recovery{from, hwm, local, l.Msg})
		}
	}
	return out
}

// owners maps every "topic/partition" a group's members are assigned to the member's
// instance id (its client id when it has none).
func (r *Run) owners(ctx context.Context, group string) (map[string]string, error) {
	gs, err := kadm.NewClient(r.Admin).DescribeGroups(ctx, group)
	if err != nil {
		return nil, err
	}
	g, ok := gs[group]
	if !ok || g.Err != nil {
		return nil, fmt.Errorf("describe group %s: %v", group, g.Err)
	}
	out := map[string]string{}
	for _, m := range g.Members {
		who := m.ClientID
		if m.InstanceID != nil {
			who = *m.InstanceID
		}
		if c, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range c.Topics {
				for _, p := range t.Partitions {
					out[fmt.Sprintf("%s/%d", t.Topic, p)] = who
				}
			}
		}
	}
	return out, nil
}

// freshness is the p99 and the maximum of landed_time_ms - event_time_ms over the inference
// results whose event time is in [from, to), and how many there are. A result written twice
// (a redelivery, the replay) counts at its first landing.
func (r *Run) freshness(ctx context.Context, from, to time.Time) (p99, maxMs float64, rows uint64, err error) {
	row := r.CH.QueryRow(ctx, `SELECT count(), quantileExact(0.99)(toFloat64(lat)), toFloat64(max(lat)) FROM (
		SELECT min(landed_time_ms) - min(event_time_ms) AS lat FROM inference_results
		WHERE landed_time_ms > 0 AND event_time_ms >= ? AND event_time_ms < ? GROUP BY source_topic, request_id)`, from.UnixMilli(), to.UnixMilli())
	err = row.Scan(&rows, &p99, &maxMs)
	return
}

// waitLanded waits (2 minutes at most per step) until what was sent before now has landed:
// ingest committed the source topics up to their ends, then the ClickHouse sink the enriched
// topic up to its end after that. t names the moment in the error.
func (r *Run) waitLanded(ctx context.Context, t time.Time) error {
	for _, step := range []struct {
		group  string
		topics []string
	}{{r.IngestGroup, []string{r.Inf, r.GW}}, {r.SinkGroup, []string{r.Enriched}}} {
		ends := map[string]int64{}
		for _, topic := range step.topics {
			e, err := r.endOffsets(ctx, topic)
			if err != nil {
				return err
			}
			for k, v := range e {
				ends[k] = v
			}
		}
		for start := time.Now(); ; {
			var left int64
			var err error
			for _, topic := range step.topics {
				n, e := r.behind(ctx, step.group, topic, ends)
				left, err = left+n, errors.Join(err, e)
			}
			if err == nil && left == 0 {
				break
			}
			if time.Since(start) > 2*time.Minute {
				return fmt.Errorf("%s did not commit what was sent before %s within 2 minutes: %d left (%v)", step.group, t.Format(time.TimeOnly), left, err)
			}
			if err := sleep(ctx, 200*time.Millisecond); err != nil {
				return err
			}
		}
	}
	return nil
}

// startReplaySink replays the enriched topic into ClickHouse from its earliest offset while
// the pipeline runs: the replay tool creates a new group of the ClickHouse sink (the sink's
// group with "-replay") at the earliest offset (a group with no live member, so the tool
// moves it with the pipeline live; the sink's own group it would refuse), and a `backflow
// run` of sink-clickhouse in that group re-reads it. Rows are deduplicated by key, so the
// re-written ones count once; its DLQ mirror and rollups are off (the pipeline's own do that
// work). It returns the process, the group and the proxy that slows it.
func (r *Run) startReplaySink(ctx context.Context) (*Proc, string, *faultproxy.Proxy, error) {
	group := r.SinkGroup + "-replay"
	p, err := r.Start("replay-"+group, nil, "replay", "--group", group, "--topic", r.Enriched, "--to-earliest", "--create", "--execute", "--reason", "chaos", "--control-topic", r.Control)
	if err != nil {
		return nil, "", nil, err
	}
	if code, err := p.Wait(2 * time.Minute); err != nil || code != 0 {
		return nil, "", nil, fmt.Errorf("replay %s: exit %d (%v):\n%s", group, code, err, tail(p.Log(), 2000))
	}
	// The re-read alone takes a second or two: it goes through a proxy of its own that holds
	// each chunk 150 ms, in batches of 150 records, so that it lasts through the roll (the
	// caller sets the proxy to forward afterwards). The pipeline's own ClickHouse traffic is
	// not slowed.
	px, err := faultproxy.New(faultproxy.Config{Target: r.CHProxy.Target()})
	if err != nil {
		return nil, "", nil, err
	}
	r.onClose(func() { px.Close() })
	px.SetDelay(150 * time.Millisecond)
	if err := px.Set(faultproxy.Delay); err != nil {
		return nil, "", nil, err
	}
	cfg, err := r.Config("replay-sink", "sink-clickhouse", map[string]string{"sink_clickhouse": "group: " + group + ", mirror_dlq: false, rollups: false, batch_rows: 150"})
	if err != nil {
		return nil, "", nil, err
	}
	sink, err := r.Start("replay-sink", map[string]string{"BACKFLOW_CLICKHOUSE_ADDR": px.Addr()}, "run", "--config", cfg)
	return sink, group, px, err
}

// behind is how many records group has still to read on topic up to the offsets in target.
func (r *Run) behind(ctx context.Context, group, topic string, target map[string]int64) (int64, error) {
	off, err := r.Committed(ctx, group)
	if err != nil {
		return 0, err
	}
	var n int64
	for k, v := range target {
		if strings.HasPrefix(k, topic+"/") && off[k] < v {
			n += v - max(off[k], 0)
		}
	}
	return n, nil
}

// endOffsets are topic's end offsets per "topic/partition".
func (r *Run) endOffsets(ctx context.Context, topic string) (map[string]int64, error) {
	ends, err := kadm.NewClient(r.Admin).ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	ends.Each(func(lo kadm.ListedOffset) { out[fmt.Sprintf("%s/%d", lo.Topic, lo.Partition)] = lo.Offset })
	return out, nil
}

// 22
func rollingRestart(ctx context.Context, r *Run) error {
	// Three instances, a first share of the traffic, then a replay of the enriched topic into
	// ClickHouse from its earliest offset (startReplaySink) that starts as the rolling restart
	// does and runs through it.
	ps, err := r.StartInstances(ctx, 3, nil)
	if err != nil {
		return err
	}
	first := r.Traffic(0)
	first.Requests /= 3
	if err := r.Load(ctx, first, "-a").CaughtUp(ctx); err != nil {
		return err
	}
	replaySink, replayGroup, replayProxy, err := r.startReplaySink(ctx)
	if err != nil {
		return err
	}
	replayTo, err := r.endOffsets(ctx, r.Enriched)
	if err != nil {
		return err
	}
	var replayed int64
	for _, v := range replayTo {
		replayed += v
	}
	r.Note("the enriched topic replayed into ClickHouse from its earliest offset (group %s): %d records to re-read", replayGroup, replayed)
	seconds := 150.0
	loadStart := time.Now()
	load := r.Load(ctx, r.Traffic(seconds), "")
	groups := []string{r.IngestGroup, r.FeaturesGroup, r.SinkGroup}
	type window struct {
		from, to   time.Time
		p99, maxMs float64
		rows       uint64
	}
	// A window's freshness is read as soon as the ClickHouse sink committed past it, before
	// the replay (slowed, far behind) re-writes its rows with a later landing time.
	measure := func(w *window) error {
		var err error
		if err = r.waitLanded(ctx, w.to); err != nil {
			return err
		}
		w.p99, w.maxMs, w.rows, err = r.freshness(ctx, w.from, w.to)
		return err
	}
	var windows []window
	rebalanced := 0
	for i, p := range ps {
		// The first restart at once, while the replay re-reads; then 10 s of steady traffic
		// between two.
		pause := 2 * time.Second
		if i > 0 {
			pause = r.Dur(10 * time.Second)
		}
		if err := sleep(ctx, pause); err != nil {
			return err
		}
		var others []*Proc
		for j, o := range ps {
			if j != i {
				others = append(others, o)
			}
		}
		left, err := r.behind(ctx, replayGroup, r.Enriched, replayTo)
		if err != nil {
			return err
		}
		marks := markLogs(ps...)
		t0 := time.Now()
		code, took, err := p.Signal(syscall.SIGTERM, 2*time.Minute)
		if err != nil || code != 0 {
			r.Fail("%s: SIGTERM: exit %d after %v (%v)", p.Name, code, took, err)
		}
		if err := p.Restart(); err != nil {
			return err
		}
		if err := p.Ready(ctx, 3*time.Minute); err != nil {
			return err
		}
		ready := time.Since(t0)
		// A rebalance the return caused would start within a heartbeat or two of the
		// rejoin: the window goes on 10 s past readiness.
		if err := sleep(ctx, 10*time.Second); err != nil {
			return err
		}
		w := window{from: t0, to: time.Now()}
		if err := measure(&w); err != nil {
			return err
		}
		windows = append(windows, w)
		r.Note("%s: SIGTERM, exit %d after %v, ready again %v after the SIGTERM; the replay had %d records left to re-read at the SIGTERM",
			p.Name, code, took.Round(100*time.Millisecond), ready.Round(100*time.Millisecond), left)
		for _, o := range others {
			s := sessions(marks.since(o))
			n := 0
			for _, g := range groups {
				n += s[g]
			}
			if n > 0 {
				r.Fail("%s saw %d new sessions while %s restarted: %v", o.Name, n, p.Name, s)
				rebalanced++
			}
		}
		// The restarted instance's own log has a session line of each group: the count
		// reads the lines it looks for.
		own := sessions(marks.since(p))
		for _, g := range groups {
			if own[g] == 0 {
				r.Fail("%s logged no new session of %s after its restart: the rebalance count reads no line", p.Name, g)
				rebalanced++
			}
		}
	}
	if rebalanced == 0 {
		r.Note("in every restart window the restarted instance logged a new session of each of %s, the two others none",
			strings.Join(groups, ", "))
	}
	// The steady window: as long as a restart window, after the last one.
	if err := sleep(ctx, 20*time.Second); err != nil {
		return err
	}
	steady := window{from: windows[len(windows)-1].to, to: time.Now()}
	if err := measure(&steady); err != nil {
		return err
	}
	if _, err := load.Wait(); err != nil {
		return err
	}
	r.Healed()
	// The replay is done once its group read the whole topic as it was when the replay
	// began (waited for, at full speed now; it goes on reading the new records beside the
	// pipeline).
	if err := replayProxy.Set(faultproxy.Forward); err != nil {
		return err
	}
	for start := time.Now(); ; {
		left, err := r.behind(ctx, replayGroup, r.Enriched, replayTo)
		if err == nil && left == 0 {
			break
		}
		if time.Since(start) > 5*time.Minute {
			r.Fail("the replay's re-read not done after 5 minutes: %d records left (%v)", left, err)
			break
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
	r.Term(replaySink)
	if _, err := r.WaitCaughtUp(ctx, 5*time.Minute); err != nil {
		return err
	}
	// Freshness (landed - event time of the inference results): each restart window against
	// the steady one.
	r.Note("freshness steady: p99 %.0f ms, max %.0f ms over %d rows", steady.p99, steady.maxMs, steady.rows)
	for i, w := range windows {
		r.Note("freshness while %s restarted: p99 %.0f ms (%+.0f ms against steady), max %.0f ms over %d rows",
			ps[i].Name, w.p99, w.p99-steady.p99, w.maxMs, w.rows)
	}
	r.Note("load ran %v", time.Since(loadStart).Round(time.Second))
	return nil
}

// 23
func failoverStandby(ctx context.Context, r *Run) error {
	const session = 10 * time.Second
	// Debug: goka's table recovery lines, which tell a warm takeover from a cold restore.
	extra := map[string]string{"kafka": "session_timeout: " + session.String(), "ingest": "standby: true",
		"sink_features": "standby: true", "log_level": "debug"}
	ps, err := r.StartInstances(ctx, 3, extra)
	if err != nil {
		return err
	}
	load := r.Load(ctx, r.Traffic(60), "")
	if err := sleep(ctx, r.Dur(20*time.Second)); err != nil {
		return err
	}
	victim, survivors := ps[2], ps[:2]
	// The victim's partitions of each group, and their committed offsets at the kill.
	groups := []string{r.IngestGroup, r.FeaturesGroup, r.SinkGroup}
	moved := map[string][]string{}
	for _, g := range groups {
		own, err := r.owners(ctx, g)
		if err != nil {
			return err
		}
		for tp, who := range own {
			if who == victim.Name && !strings.HasSuffix(strings.Split(tp, "/")[0], "-loop") {
				moved[g] = append(moved[g], tp)
			}
		}
		sort.Strings(moved[g])
	}
	marks := markLogs(survivors...)
	t0 := time.Now()
	victim.Kill()
	at := map[string]map[string]int64{}
	for _, g := range groups {
		if at[g], err = r.Committed(ctx, g); err != nil {
			return err
		}
	}
	r.Note("%s killed (SIGKILL, not restarted); its partitions: %v", victim.Name, moved)
	// Processed again: every moved partition's committed offset went past where it was at the
	// kill (the traffic goes on, so there is something to process). The bound is
	// reliability.md's: the session timeout plus 5 s, for a heartbeat (1 s), the join and
	// sync of both survivors (a second or two; the goka groups rejoin at once, not after
	// goka's own 5 s wait), goka's commit (every second), and the ClickHouse sink's
	// partitions, which get records again only once ingest's did.
	taken := map[string]time.Duration{}
	deadline := t0.Add(session + 2*time.Minute)
	for _, g := range groups {
		if len(moved[g]) == 0 {
			r.Note("%s: the killed instance owned none of its partitions", g)
			taken[g] = 0
		}
	}
	for len(taken) < len(groups) && time.Now().Before(deadline) && !load.Done() {
		for _, g := range groups {
			if _, ok := taken[g]; ok {
				continue
			}
			off, err := r.Committed(ctx, g)
			if err != nil {
				continue
			}
			all := true
			for _, tp := range moved[g] {
				if off[tp] <= at[g][tp] {
					all = false
				}
			}
			if all {
				taken[g] = time.Since(t0)
			}
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
	worst := time.Duration(0)
	for _, g := range groups {
		d, ok := taken[g]
		if ok && len(moved[g]) == 0 {
			continue
		}
		if !ok {
			r.Fail("%s: the killed instance's partitions %v not processed again within %v (or before the load ended)", g, moved[g], time.Since(t0).Round(time.Second))
			continue
		}
		worst = max(worst, d)
		r.Note("%s: the killed instance's partitions committed further %v after the kill", g, d.Round(100*time.Millisecond))
	}
	over := (worst - session).Round(100 * time.Millisecond)
	if worst > session+5*time.Second {
		r.Fail("taken over %v after the kill, over the session timeout %v + 5 s", worst.Round(100*time.Millisecond), session)
	} else {
		r.Note("taken over %v after the session timeout (bound 5 s)", over)
	}
	if _, err := load.Wait(); err != nil {
		return err
	}
	r.Healed()
	if _, err := r.WaitCaughtUp(ctx, 5*time.Minute); err != nil {
		return err
	}
	// No cold restore: the survivors' table recoveries since the kill read little.
	var n int
	var most int64
	for _, s := range survivors {
		for _, rc := range recoveries(marks.since(s)) {
			n++
			most = max(most, rc.read())
			if rc.cold() {
				r.Fail("%s restored a table partition cold after the kill: %s", s.Name, rc.msg)
			}
		}
	}
	r.Note("survivors' table recoveries since the kill: %d, the largest read %d changelog records", n, most)
	return nil
}

// 24
func emptyDiskBesideFull(ctx context.Context, r *Run) error {
	if _, err := r.StartInstances(ctx, 2, nil); err != nil {
		return err
	}
	first := r.Traffic(0)
	first.Requests /= 2
	if err := r.Load(ctx, first, "-a").CaughtUp(ctx); err != nil {
		return err
	}
	load := r.Load(ctx, r.Traffic(40), "")
	if err := sleep(ctx, r.Dur(10*time.Second)); err != nil {
		return err
	}
	groups := []string{r.IngestGroup, r.FeaturesGroup, r.SinkGroup}
	t0 := time.Now()
	// Debug: goka's table recovery lines, for the records the new instance restored.
	third, err := r.StartInstance(3, map[string]string{"log_level": "debug"})
	if err != nil {
		return err
	}
	ready := make(chan time.Duration, 1)
	go func() {
		if err := third.Ready(ctx, 3*time.Minute); err != nil {
			r.Fail("%v", err)
			ready <- -1
			return
		}
		ready <- time.Since(t0)
	}()
	// The others keep processing: once a group's assignment includes the new instance (it
	// joined, and restores its partitions of the tables from here), every partition the other
	// two own commits further than where it was then. Waited for up to 2 minutes; when each
	// happened is reported against the new instance's readiness (its restore done).
	joined := map[string]time.Duration{}
	at := map[string]map[string]int64{}
	advanced := map[string]time.Duration{}
	deadline := t0.Add(2 * time.Minute)
	for len(advanced) < len(groups) && time.Now().Before(deadline) && !load.Done() {
		for _, g := range groups {
			if _, ok := advanced[g]; ok {
				continue
			}
			own, err := r.owners(ctx, g)
			if err != nil {
				continue
			}
			off, err := r.Committed(ctx, g)
			if err != nil {
				continue
			}
			theirs, all, in := 0, true, false
			for tp, who := range own {
				if strings.HasSuffix(strings.Split(tp, "/")[0], "-loop") {
					continue
				}
				if who == third.Name {
					in = true
					continue
				}
				theirs++
				if off[tp] <= at[g][tp] {
					all = false
				}
			}
			switch {
			case !in:
			case at[g] == nil:
				at[g], joined[g] = off, time.Since(t0)
			case theirs > 0 && all:
				advanced[g] = time.Since(t0)
			}
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
	rd := <-ready
	r.Note("%s (empty disk) ready %v after its start", third.Name, rd.Round(100*time.Millisecond))
	for _, g := range groups {
		d, ok := advanced[g]
		if !ok {
			r.Fail("%s: the other instances' partitions did not commit further within 2 minutes of the new instance's start (joined: %v)", g, joined[g])
			continue
		}
		when := "after"
		if d < rd {
			when = "before"
		}
		r.Note("%s: the new instance joined %v after its start; every partition of the two others committed further %v after its start, %s it was ready",
			g, joined[g].Round(100*time.Millisecond), d.Round(100*time.Millisecond), when)
	}
	// The restore's report: each goka stage's "table restored" line (records restored, the
	// partitions, how long) and the backflow_table_restore_records gauge agree there was one.
	// Its progress line ("table restore") comes every 10 s of a restore, and /readyz names the
	// restore while it runs: a restore of this size ends first, so neither is asserted.
	done := map[string]int64{}
	for _, l := range logLines(third.Log()) {
		if l.Msg == "table restored" {
			done[l.Group] += l.Records
		}
	}
	for _, g := range []string{r.IngestGroup, r.FeaturesGroup} {
		if done[g] <= 0 {
			r.Fail("%s logged no \"table restored\" line with records for %s", third.Name, g)
		}
	}
	if m, err := third.Metrics(ctx); err != nil {
		r.Fail("%s: /metrics: %v", third.Name, err)
	} else {
		for _, stage := range []string{"ingest", "sink-features"} {
			if v := m.Sum("backflow_table_restore_records", map[string]string{"stage": stage}); v <= 0 {
				r.Fail("%s: backflow_table_restore_records of %s is %v, want > 0", third.Name, stage, v)
			} else {
				r.Note("%s: backflow_table_restore_records of %s %v", third.Name, stage, v)
			}
		}
	}
	r.Note("%s's \"table restored\" lines: %v records by group", third.Name, done)
	var read int64
	for _, rc := range recoveries(third.Log()) {
		read += rc.read()
	}
	if read == 0 {
		r.Fail("%s restored no changelog record: the scenario did not exercise a restore", third.Name)
	} else {
		r.Note("%s restored %d changelog records", third.Name, read)
	}
	if _, err := load.Wait(); err != nil {
		return err
	}
	r.Healed()
	return nil
}
