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
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
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
	Requests []int    `json:"requests"`
	Runs     int      `json:"runs"`
	Rate     float64  `json:"rate_requests_per_sec"`
	Standby  string   `json:"standby"`
	Static   bool     `json:"static_membership"`
	Settle   string   `json:"settle_max"`
	Events   []string `json:"events"`
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
	// Standby: what hot standby costs while nothing fails, one pair of windows per run (with
	// --standby failover), and their medians.
	Standby        []standbyCost   `json:"standby_cost,omitempty"`
	StandbyMedians *standbySummary `json:"standby_cost_medians,omitempty"`
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

// restartBench is restart mode: every size of --requests, --runs runs of the events each.
func (h *harness) restartBench(ctx context.Context) error {
	o := h.opt
	res := &restartResults{Commit: gitCommit(), Machine: machineInfo(), Started: h.started.UTC(), LoadStart: loadAverage(),
		Options: restartOptions{Requests: o.restartRequests, Runs: o.runs, Rate: o.restartRate, Standby: o.standby, Settle: o.settleMax.String(), Static: o.instanceIDs, Events: o.restartEvents}}
	say("bench %s: restart mode, state from %v requests, %d run(s) of %s at %.0f requests/s, standby %s; logs in %s",
		h.stamp, o.restartRequests, o.runs, strings.Join(o.restartEvents, ", "), o.restartRate, o.standby, h.tmp)
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
	return saveSummary(o.summaryPath, func() ([]byte, error) { return restartSummary(res) })
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
		for _, ev := range o.restartEvents {
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
					sc := standbyCost{Run: run, Off: rc.costWindow(ctx, 20*time.Second)}
					say("restart %s run %d: restarting the instances with hot standby on for the failover", tag, run)
					if err := rc.rollUnmeasured(ctx, true, settleLag); err != nil {
						return err
					}
					sleepCtx(ctx, standbySettle)
					sc.On = rc.costWindow(ctx, 20*time.Second)
					sz.Standby = append(sz.Standby, sc)
					sz.StandbyMedians = summarizeStandby(sz.Standby)
					say("restart %s run %d: standby costs %+v against %+v without", tag, run, sc.On, sc.Off)
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
