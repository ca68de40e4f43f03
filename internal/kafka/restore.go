package kafka

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lovoo/goka"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/backflowhq/backflow/internal/ops"
)

// Names of the table restore metrics (labels stage, group, partition). A goka group table is
// restored from its changelog when a partition is assigned and local storage is behind it (on
// an empty disk, the whole changelog).
const (
	// MetricTableRestoring is 1 while a table partition is being restored, 0 once it is done.
	MetricTableRestoring = "backflow_table_restoring"
	// MetricTableRestored is the records restored so far (the last restore's total once done).
	MetricTableRestored = "backflow_table_restore_records"
	// MetricTableRestoreToGo is the records still to restore, by changelog offset.
	MetricTableRestoreToGo = "backflow_table_restore_remaining_records"
	// MetricTableRestoreRate is the restore's records per second over the last RestoreRateWindow.
	MetricTableRestoreRate = "backflow_table_restore_rate"
	// MetricTableRestoreETA is the estimated seconds left; -1 while no rate is known yet.
	MetricTableRestoreETA = "backflow_table_restore_eta_seconds"
)

// Defaults of the restore report.
const (
	// RestoreLogEvery is how often a stage logs its restore's progress.
	RestoreLogEvery = 10 * time.Second
	// RestoreSampleEvery is how often the restore is sampled (metrics and /readyz).
	RestoreSampleEvery = time.Second
	// RestoreRateWindow is the span the rate is measured over.
	RestoreRateWindow = 30 * time.Second
)

// RestoreStatus is a stage's table restore as /readyz names it while the stage waits for it:
// an error, so a readiness hook takes it as the reason the stage is not ready yet.
type RestoreStatus struct {
	Partitions []int32
	Restored   int64
	ToGo       int64
	// ETA is the estimated time left; negative when no rate is known yet.
	ETA time.Duration
	// Done: every partition is restored, and the stage is still joining its group.
	Done bool
}

func (s *RestoreStatus) Error() string {
	parts := "partition "
	if len(s.Partitions) != 1 {
		parts = "partitions "
	}
	ps := make([]string, len(s.Partitions))
	for i, p := range s.Partitions {
		ps[i] = strconv.Itoa(int(p))
	}
	parts += strings.Join(ps, ", ")
	if s.Done {
		return fmt.Sprintf("restored table %s: %s records; joining the group", parts, HumanCount(s.Restored))
	}
	if s.Restored == 0 && s.ToGo == 0 {
		return fmt.Sprintf("restoring table %s: starting", parts)
	}
	msg := fmt.Sprintf("restoring table %s: %s of %s records", parts, HumanCount(s.Restored), HumanCount(s.Restored+s.ToGo))
	if s.ETA >= 0 {
		msg += ", about " + HumanDuration(s.ETA) + " left"
	}
	return msg
}

// HumanCount writes n for a person: 950, 12k, 1.2M, 3.4G (one decimal below 10 of a unit).
func HumanCount(n int64) string {
	if n < 0 {
		return "-" + HumanCount(-n)
	}
	units := []struct {
		v   float64
		sfx string
	}{{1e9, "G"}, {1e6, "M"}, {1e3, "k"}}
	for _, u := range units {
		if float64(n) >= u.v {
			x := float64(n) / u.v
			if x < 10 {
				return strconv.FormatFloat(math.Floor(x*10)/10, 'f', -1, 64) + u.sfx
			}
			return strconv.FormatFloat(math.Floor(x), 'f', 0, 64) + u.sfx
		}
	}
	return strconv.FormatInt(n, 10)
}

// HumanDuration writes d for a person: "6 s", "4 min", "2 h 5 min"; rounded up to the unit
// shown, so an estimate never reads "0 s" while records are left.
func HumanDuration(d time.Duration) string {
	s := int64(math.Ceil(d.Seconds()))
	switch {
	case s < 120:
		return fmt.Sprintf("%d s", s)
	case s < 2*3600:
		return fmt.Sprintf("%d min", (s+59)/60)
	default:
		m := (s + 59) / 60
		return fmt.Sprintf("%d h %d min", m/60, m%60)
	}
}

// restoreSample is one observation of a partition's restored records.
type restoreSample struct {
	at       time.Time
	restored int64
}

// RestoreRate is records per second between the oldest and the newest of samples (oldest
// first); 0 with fewer than two samples or no time between them.
func RestoreRate(samples []restoreSample) float64 {
	if len(samples) < 2 {
		return 0
	}
	a, b := samples[0], samples[len(samples)-1]
	dt := b.at.Sub(a.at).Seconds()
	if dt <= 0 || b.restored < a.restored {
		return 0
	}
	return float64(b.restored-a.restored) / dt
}

// RestoreETA is the time toGo records take at rate records per second; -1 when rate is not
// positive (unknown), 0 when nothing is left.
func RestoreETA(toGo int64, rate float64) time.Duration {
	if toGo <= 0 {
		return 0
	}
	if rate <= 0 {
		return -1
	}
	return time.Duration(float64(toGo) / rate * float64(time.Second))
}

// RestoreToGo is the records left to restore of a partition whose restore reached offset
// (goka's RecoveryStats.Offset: the first offset to load until a record was restored, then the
// last one restored) out of hwm, the changelog's end offset. By offsets: a compacted
// changelog may hold fewer.
func RestoreToGo(offset, hwm, restored int64) int64 {
	next := offset
	if restored > 0 {
		next = offset + 1
	}
	return max(hwm-next, 0)
}

// partRestore follows one partition's restore, identified by goka's start time of it.
type partRestore struct {
	start, end time.Time
	restored   int64
	toGo       int64
	samples    []restoreSample
	restoring  bool
	counted    bool // in a done line already
}

// restoreWatch samples a goka processor's table partitions and reports their restore: the
// metrics, a log line every logEvery while restoring, a line when every partition is done, and
// the readiness reason until the stage is ready. observe and markReady take mu; the watch's
// state is read and written only under it.
type restoreWatch struct {
	mu       sync.Mutex
	stage    string
	group    string
	log      *slog.Logger
	m        *restoreMetrics
	waiting  func(error)
	logEvery time.Duration
	window   time.Duration

	parts   map[int32]*partRestore
	ready   bool
	round   bool      // a restore round in progress: some partition restoring, not all done
	lastLog time.Time // of the round's last progress line (its start before the first)
}

func newRestoreWatch(stage, group string, log *slog.Logger, reg prometheus.Registerer, waiting func(error), logEvery time.Duration) *restoreWatch {
	if logEvery <= 0 {
		logEvery = RestoreLogEvery
	}
	return &restoreWatch{stage: stage, group: group, log: log, m: newRestoreMetrics(reg), waiting: waiting,
		logEvery: logEvery, window: RestoreRateWindow, parts: map[int32]*partRestore{}}
}

// restoring: goka's table partition status says it is being restored (or set up for that),
// and not catching up after a restore (a hot standby's partition, which never ends).
func restoring(ts *goka.TableStats) bool {
	switch ts.Status {
	case goka.PartitionRecovering, goka.PartitionPreparing:
		return true
	case goka.PartitionInitializing, goka.PartitionConnecting:
		return ts.Recovery == nil || ts.Recovery.RecoveryTime.IsZero()
	}
	return false
}

// observe takes one sample of the processor's table partitions (as goka's stats give them).
func (w *restoreWatch) observe(now time.Time, tables map[int32]*goka.TableStats) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for p, pr := range w.parts {
		if _, ok := tables[p]; !ok && pr.restoring {
			// revoked in a rebalance, or a restore ahead of joining that ended between two
			// samples: its processor is gone, and with it what it restored
			delete(w.parts, p)
			w.m.restoring.WithLabelValues(w.stage, w.group, strconv.Itoa(int(p))).Set(0)
		}
	}
	for p, ts := range tables {
		if ts == nil || ts.Recovery == nil {
			continue
		}
		rec := ts.Recovery
		pr := w.parts[p]
		if rec.StartTime.IsZero() && !restoring(ts) {
			continue // not restoring, never was in this processor's life
		}
		if pr == nil || (!rec.StartTime.IsZero() && !rec.StartTime.Equal(pr.start)) || (pr.counted && restoring(ts)) {
			// a new restore of this partition (first one, or after a rebalance)
			pr = &partRestore{start: rec.StartTime}
			w.parts[p] = pr
		}
		var restored int64
		if ts.Input != nil {
			restored = int64(ts.Input.Count)
		}
		if rec.StartTime.IsZero() {
			restored = 0 // storage still opening: goka has not looked at the changelog yet
		}
		if restoring(ts) {
			pr.restoring = true
			pr.restored = restored
			pr.toGo = 0
			if !rec.StartTime.IsZero() {
				pr.toGo = RestoreToGo(rec.Offset, rec.Hwm, restored)
			}
			pr.samples = append(pr.samples, restoreSample{at: now, restored: restored})
			for len(pr.samples) > 2 && now.Sub(pr.samples[1].at) >= w.window {
				pr.samples = pr.samples[1:]
			}
			w.round = true
			continue
		}
		if pr.end.IsZero() {
			// done since the last sample, or done before any sample saw it restoring
			pr.restoring = false
			pr.restored, pr.toGo = restored, 0
			pr.end = rec.RecoveryTime
			if pr.end.IsZero() {
				pr.end = now
			}
			w.round = true
		}
	}
	w.report(now)
}

// report updates the metrics and the readiness reason, and logs what is due.
func (w *restoreWatch) report(now time.Time) {
	if !w.round {
		return
	}
	var (
		busy             []int32
		restored, toGo   int64
		rate             float64
		eta              time.Duration
		etaKnown         = true
		roundParts       []int32
		roundRecs        int64
		first, last      time.Time
		doneParts, total int
	)
	for p, pr := range w.parts {
		if pr.counted {
			continue
		}
		total++
		roundParts = append(roundParts, p)
		roundRecs += pr.restored
		if !pr.start.IsZero() && (first.IsZero() || pr.start.Before(first)) {
			first = pr.start
		}
		lbl := []string{w.stage, w.group, strconv.Itoa(int(p))}
		w.m.restored.WithLabelValues(lbl...).Set(float64(pr.restored))
		w.m.toGo.WithLabelValues(lbl...).Set(float64(pr.toGo))
		if !pr.restoring {
			doneParts++
			if pr.end.After(last) {
				last = pr.end
			}
			w.m.restoring.WithLabelValues(lbl...).Set(0)
			w.m.rate.WithLabelValues(lbl...).Set(0)
			w.m.eta.WithLabelValues(lbl...).Set(0)
			continue
		}
		busy = append(busy, p)
		restored += pr.restored
		toGo += pr.toGo
		r := RestoreRate(pr.samples)
		rate += r
		e := RestoreETA(pr.toGo, r)
		if e < 0 {
			etaKnown = false
		} else {
			eta = max(eta, e) // partitions restore side by side: the slowest decides
		}
		w.m.restoring.WithLabelValues(lbl...).Set(1)
		w.m.rate.WithLabelValues(lbl...).Set(r)
		w.m.eta.WithLabelValues(lbl...).Set(e.Seconds())
		if e < 0 {
			w.m.eta.WithLabelValues(lbl...).Set(-1)
		}
	}
	slices.Sort(busy)
	slices.Sort(roundParts)
	if !etaKnown {
		eta = -1
	}
	if total == 0 {
		w.round = false
		return
	}
	if doneParts == total {
		// the round is over: one line for all of it
		secs := 0.0
		if !first.IsZero() && last.After(first) {
			secs = last.Sub(first).Seconds()
		}
		w.log.Info("table restored", "stage", w.stage, "group", w.group, "partitions", joinPartitions(roundParts),
			"records", roundRecs, "seconds", math.Round(secs*10)/10)
		for _, pr := range w.parts {
			pr.counted = true
		}
		w.round = false
		w.lastLog = time.Time{}
		if !w.ready && w.waiting != nil {
			w.waiting(&RestoreStatus{Partitions: roundParts, Restored: roundRecs, Done: true})
		}
		return
	}
	if w.lastLog.IsZero() {
		w.lastLog = now
	} else if now.Sub(w.lastLog) >= w.logEvery {
		w.lastLog = now
		w.log.Info("table restore", RestoreLogAttrs(w.stage, busy, restored, toGo, rate, eta)...)
	}
	if !w.ready && w.waiting != nil {
		w.waiting(&RestoreStatus{Partitions: busy, Restored: restored, ToGo: toGo, ETA: eta})
	}
}

// RestoreLogAttrs are the attributes of the progress line: stage, partition (the partitions
// being restored), restored, to_go, rate (records/s) and eta (unknown while no rate is
// known).
func RestoreLogAttrs(stage string, partitions []int32, restored, toGo int64, rate float64, eta time.Duration) []any {
	e := "unknown"
	if eta >= 0 {
		e = (eta + time.Second - 1).Truncate(time.Second).String()
	}
	return []any{"stage", stage, "partition", joinPartitions(partitions), "restored", restored, "to_go", toGo,
		"rate", strconv.FormatInt(int64(math.Round(rate)), 10) + "/s", "eta", e}
}

func joinPartitions(ps []int32) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = strconv.Itoa(int(p))
	}
	return strings.Join(s, ",")
}

// markReady: the stage is ready; the restore no longer speaks for its readiness. Runs f (the
// stage's ready hook) under the lock, so no restore reason lands after it.
func (w *restoreWatch) markReady(f func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ready = true
	if f != nil {
		f()
	}
}

// tableStats is the table partitions of proc's stats (the group table of each partition
// processor: active, hot standby or recovering ahead).
func tableStats(ctx context.Context, proc *goka.Processor) map[int32]*goka.TableStats {
	st := proc.StatsWithContext(ctx)
	out := make(map[int32]*goka.TableStats, len(st.Group))
	for p, ps := range st.Group {
		if ps != nil && ps.TableStats != nil {
			out[p] = ps.TableStats
		}
	}
	return out
}

// watch samples proc every every until ctx ends.
func (w *restoreWatch) watch(ctx context.Context, proc *goka.Processor, every time.Duration) {
	if every <= 0 {
		every = RestoreSampleEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.observe(time.Now(), tableStats(ctx, proc))
		}
	}
}

type restoreMetrics struct {
	restoring, restored, toGo, rate, eta *prometheus.GaugeVec
}

func newRestoreMetrics(reg prometheus.Registerer) *restoreMetrics {
	labels := []string{"stage", "group", "partition"}
	g := func(name, help string) *prometheus.GaugeVec {
		return ops.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels))
	}
	return &restoreMetrics{
		restoring: g(MetricTableRestoring, "1 while a group table partition is restored from its changelog, 0 once done."),
		restored:  g(MetricTableRestored, "Records a group table partition's restore has read from the changelog (the total once done)."),
		toGo:      g(MetricTableRestoreToGo, "Records a group table partition's restore has still to read, by changelog offset."),
		rate:      g(MetricTableRestoreRate, "Records per second a group table partition's restore reads, over the last 30 s."),
		eta:       g(MetricTableRestoreETA, "Estimated seconds until a group table partition is restored; -1 while unknown, 0 once done."),
	}
}
