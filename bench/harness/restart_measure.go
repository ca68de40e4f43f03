package main

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
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

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

// groupKinds are the stage names whose groups' rebalances are counted, and the log line that
// marks a new session of each in a process's log. The ClickHouse sink's line counts when it
// names a partition: a group epoch that hands a member nothing new logs partitions=[].
var groupKinds = []struct {
	name string
	re   *regexp.Regexp
}{
	{"ingest", regexp.MustCompile(`\[Processor [^\]]*-ingest\] setup generation \d+,`)},
	{"sink-features", regexp.MustCompile(`\[Processor [^\]]*-features\] setup generation \d+,`)},
	{"sink-clickhouse", regexp.MustCompile(`msg="clickhouse sink: partitions assigned" .*\bgroup=\S+-sink-clickhouse partitions=\S*\d`)},
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
	for _, sz := range res.Sizes {
		if s := sz.StandbyMedians; s != nil {
			fmt.Fprintf(&b, "\nStandby while nothing fails, %d requests (%d samples): CPU %s× of without, state on disk %s×, changelog reads %s records/s more\n",
				sz.Requests, s.Samples, f(s.CPURatio), f(s.StateRatio), f(s.ChangelogReads))
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
		Standby       *standbySummary         `json:"standby_cost,omitempty"`
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
			BaselineP99Ms: sz.Baseline.FreshnessP99Ms, BaselineLag: sz.Baseline.LagPeak, Events: sz.Medians, Standby: sz.StandbyMedians})
	}
	b, err := json.MarshalIndent(out, "", "  ")
	return append(b, '\n'), err
}
