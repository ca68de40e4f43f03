package kafka

import (
	"bytes"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lovoo/goka"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestRestoreToGo(t *testing.T) {
	for _, c := range []struct {
		offset, hwm, restored, want int64
	}{
		{0, 3400, 0, 3400},       // nothing read yet: Offset is the first offset to load
		{1199, 3400, 1200, 2200}, // Offset is the last offset restored
		{3399, 3400, 3400, 0},
		{500, 3400, 0, 2900}, // resumed from a local offset
		{3500, 3400, 10, 0},  // never negative
	} {
		if got := RestoreToGo(c.offset, c.hwm, c.restored); got != c.want {
			t.Errorf("RestoreToGo(%d, %d, %d) = %d, want %d", c.offset, c.hwm, c.restored, got, c.want)
		}
	}
}

func TestRestoreRateAndETA(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := []restoreSample{{t0, 0}, {t0.Add(5 * time.Second), 1_000_000}, {t0.Add(10 * time.Second), 3_700_000}}
	if got := RestoreRate(s); got != 370_000 {
		t.Fatalf("rate %v, want 370000 (first to last sample)", got)
	}
	if got := RestoreRate(s[:1]); got != 0 {
		t.Fatalf("rate of one sample %v, want 0", got)
	}
	if got := RestoreRate([]restoreSample{{t0, 5}, {t0, 9}}); got != 0 {
		t.Fatalf("rate with no time between samples %v, want 0", got)
	}
	if got := RestoreETA(2_220_000, 370_000); got != 6*time.Second {
		t.Fatalf("eta %v, want 6s", got)
	}
	if got := RestoreETA(10, 0); got != -1 {
		t.Fatalf("eta without a rate %v, want -1 (unknown)", got)
	}
	if got := RestoreETA(0, 0); got != 0 {
		t.Fatalf("eta with nothing left %v, want 0", got)
	}
}

func TestHumanFigures(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 950: "950", 1200: "1.2k", 12_345: "12k", 1_200_000: "1.2M", 3_400_000: "3.4M",
		99_999_999: "99M", 2_500_000_000: "2.5G"} {
		if got := HumanCount(n); got != want {
			t.Errorf("HumanCount(%d) = %q, want %q", n, got, want)
		}
	}
	for d, want := range map[time.Duration]string{5200 * time.Millisecond: "6 s", 119 * time.Second: "119 s",
		4 * time.Minute: "4 min", 125 * time.Minute: "2 h 5 min"} {
		if got := HumanDuration(d); got != want {
			t.Errorf("HumanDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestRestoreStatusText(t *testing.T) {
	for _, c := range []struct {
		s    RestoreStatus
		want string
	}{
		{RestoreStatus{Partitions: []int32{2}, Restored: 1_200_000, ToGo: 2_200_000, ETA: 6 * time.Second},
			"restoring table partition 2: 1.2M of 3.4M records, about 6 s left"},
		{RestoreStatus{Partitions: []int32{0, 2}, Restored: 10, ToGo: 90, ETA: -1},
			"restoring table partitions 0, 2: 10 of 100 records"},
		{RestoreStatus{Partitions: []int32{1}}, "restoring table partition 1: starting"},
		{RestoreStatus{Partitions: []int32{0, 1}, Restored: 5000, Done: true}, "restored table partitions 0, 1: 5k records; joining the group"},
	} {
		if got := c.s.Error(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.s, got, c.want)
		}
	}
}

// table is goka's stats of one table partition.
func table(status goka.PartitionStatus, start time.Time, offset, hwm int64, count uint, recovered time.Time) *goka.TableStats {
	return &goka.TableStats{Status: status, Input: &goka.InputStats{Count: count},
		Recovery: &goka.RecoveryStats{StartTime: start, RecoveryTime: recovered, Offset: offset, Hwm: hwm}}
}

// TestRestoreWatch drives the watch with goka's stats of a restore: partition 2 restores
// 3.4M records while partition 0 is a hot standby that is already caught up. The progress
// line, /readyz's reason and the metrics must give the figures; the done line the total.
func TestRestoreWatch(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	reg := prometheus.NewRegistry()
	var reasons []string
	w := newRestoreWatch("ingest", "backflow-ingest", log, reg, func(err error) { reasons = append(reasons, err.Error()) }, 10*time.Second)

	t0 := time.Unix(1_700_000_000, 0)
	var zero time.Time
	standby := table(goka.PartitionRunning, zero, 0, 0, 50, zero) // catching up, never restored here
	w.observe(t0, map[int32]*goka.TableStats{0: standby, 2: table(goka.PartitionInitializing, zero, 0, 0, 0, zero)})
	w.observe(t0.Add(time.Second), map[int32]*goka.TableStats{0: standby, 2: table(goka.PartitionRecovering, t0, 0, 3_400_000, 0, zero)})
	if buf.Len() != 0 {
		t.Fatalf("logged before a progress line was due: %s", buf.String())
	}
	w.observe(t0.Add(11*time.Second), map[int32]*goka.TableStats{0: standby, 2: table(goka.PartitionRecovering, t0, 3_699_999-2_500_000, 3_400_000, 1_200_000, zero)})
	// rate: 1.2M over the 10 s since the previous sample; to go 2.2M: 5.9 s, shown as 6s
	line := buf.String()
	for _, want := range []string{`msg="table restore"`, "stage=ingest", "partition=2 ", "restored=1200000", "to_go=2200000", "rate=120000/s", "eta=19s"} {
		if !strings.Contains(line, want) {
			t.Errorf("progress line %q lacks %q", line, want)
		}
	}
	if n := strings.Count(line, "\n"); n != 1 {
		t.Fatalf("%d lines, want 1: %s", n, line)
	}
	wantReasons := []string{"restoring table partition 2: starting", "restoring table partition 2: 0 of 3.4M records",
		"restoring table partition 2: 1.2M of 3.4M records, about 19 s left"}
	if strings.Join(reasons, "|") != strings.Join(wantReasons, "|") {
		t.Fatalf("readiness reasons %q, want %q", reasons, wantReasons)
	}
	lbl := []string{"ingest", "backflow-ingest", "2"}
	w.mu.Lock()
	for name, c := range map[string]struct {
		g    *prometheus.GaugeVec
		want float64
	}{"restoring": {w.m.restoring, 1}, "restored": {w.m.restored, 1_200_000}, "to go": {w.m.toGo, 2_200_000},
		"rate": {w.m.rate, 120_000}, "eta": {w.m.eta, 2_200_000.0 / 120_000}} {
		if got := testutil.ToFloat64(c.g.WithLabelValues(lbl...)); math.Abs(got-c.want) > 1e-6 {
			t.Errorf("%s gauge %v, want %v", name, got, c.want)
		}
	}
	w.mu.Unlock()
	if n := testutil.CollectAndCount(reg, MetricTableRestored); n != 1 {
		t.Fatalf("%s has %d series, want 1 (the standby partition restored nothing here)", MetricTableRestored, n)
	}

	// done: Running, restored in 30 s; the standby catching up further is no restore
	standby = table(goka.PartitionRunning, zero, 0, 0, 90, zero)
	buf.Reset()
	w.observe(t0.Add(31*time.Second), map[int32]*goka.TableStats{0: standby, 2: table(goka.PartitionRunning, t0, 3_399_999, 3_400_000, 3_400_000, t0.Add(30*time.Second))})
	line = buf.String()
	for _, want := range []string{`msg="table restored"`, "stage=ingest", "partitions=2 ", "records=3400000", "seconds=30"} {
		if !strings.Contains(line, want) {
			t.Errorf("done line %q lacks %q", line, want)
		}
	}
	if got := reasons[len(reasons)-1]; got != "restored table partition 2: 3.4M records; joining the group" {
		t.Errorf("reason after the restore %q", got)
	}
	w.mu.Lock()
	if got := testutil.ToFloat64(w.m.restoring.WithLabelValues(lbl...)); got != 0 {
		t.Errorf("restoring gauge %v after the restore, want 0", got)
	}
	if got := testutil.ToFloat64(w.m.restored.WithLabelValues(lbl...)); got != 3_400_000 {
		t.Errorf("restored gauge %v after the restore, want 3400000", got)
	}
	w.mu.Unlock()

	// ready: later samples neither log again nor speak for readiness
	n := len(reasons)
	w.markReady(nil)
	buf.Reset()
	w.observe(t0.Add(60*time.Second), map[int32]*goka.TableStats{0: standby, 2: table(goka.PartitionRunning, t0, 3_399_999, 3_400_000, 3_400_000, t0.Add(30*time.Second))})
	if buf.Len() != 0 || len(reasons) != n {
		t.Fatalf("after the restore: logged %q, reasons %q", buf.String(), reasons[n:])
	}

	// a rebalance assigns partition 5, restored from scratch: a new round, not for readiness
	w.observe(t0.Add(70*time.Second), map[int32]*goka.TableStats{2: table(goka.PartitionRunning, t0, 3_399_999, 3_400_000, 3_400_000, t0.Add(30*time.Second)),
		5: table(goka.PartitionRecovering, t0.Add(69*time.Second), 0, 10, 0, zero)})
	w.observe(t0.Add(71*time.Second), map[int32]*goka.TableStats{2: table(goka.PartitionRunning, t0, 3_399_999, 3_400_000, 3_400_000, t0.Add(30*time.Second)),
		5: table(goka.PartitionRunning, t0.Add(69*time.Second), 9, 10, 10, t0.Add(70*time.Second))})
	if line := buf.String(); !strings.Contains(line, "partitions=5 records=10 seconds=1") || strings.Count(line, "\n") != 1 {
		t.Fatalf("rebalance restore logged %q, want one done line for partition 5 with 10 records", line)
	}
	if len(reasons) != n {
		t.Fatalf("readiness told %q after ready", reasons[n:])
	}
}

// TestRestoreWatchUnseen: a restore that ended between two samples still gets its done line,
// with goka's count of records restored.
func TestRestoreWatchUnseen(t *testing.T) {
	var buf bytes.Buffer
	w := newRestoreWatch("sink-features", "g", slog.New(slog.NewTextHandler(&buf, nil)), nil, nil, 0)
	t0 := time.Unix(1_700_000_000, 0)
	w.observe(t0.Add(time.Second), map[int32]*goka.TableStats{
		0: table(goka.PartitionRunning, t0, 699, 700, 700, t0.Add(500*time.Millisecond)),
		1: table(goka.PartitionRunning, t0, 299, 300, 300, t0.Add(800*time.Millisecond))})
	line := buf.String()
	if !strings.Contains(line, `msg="table restored" stage=sink-features group=g partitions=0,1 records=1000 seconds=0.8`) || strings.Count(line, "\n") != 1 {
		t.Fatalf("done line %q", line)
	}
}

func TestRestoreLogAttrs(t *testing.T) {
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}})).Info("table restore", RestoreLogAttrs("ingest", []int32{2}, 1_200_000, 2_200_000, 370_000, 5946*time.Millisecond)...)
	want := `level=INFO msg="table restore" stage=ingest partition=2 restored=1200000 to_go=2200000 rate=370000/s eta=6s` + "\n"
	if buf.String() != want {
		t.Fatalf("line\n%q, want\n%q", buf.String(), want)
	}
	buf.Reset()
	slog.New(slog.NewTextHandler(&buf, nil)).Info("table restore", RestoreLogAttrs("ingest", []int32{0, 1}, 0, 10, 0, -1)...)
	if !strings.Contains(buf.String(), "partition=0,1 restored=0 to_go=10 rate=0/s eta=unknown") {
		t.Fatalf("line without a rate %q", buf.String())
	}
}

// TestRestoreWatchReassigned: a partition restored once and assigned again (a rebalance gave
// it away and back) starts a new restore with goka's fresh stats: its own lines again.
func TestRestoreWatchReassigned(t *testing.T) {
	var buf bytes.Buffer
	var reasons []string
	w := newRestoreWatch("ingest", "g", slog.New(slog.NewTextHandler(&buf, nil)), nil, func(err error) { reasons = append(reasons, err.Error()) }, 2*time.Second)
	t0 := time.Unix(1_700_000_000, 0)
	var zero time.Time
	w.observe(t0, map[int32]*goka.TableStats{3: table(goka.PartitionRunning, t0.Add(-time.Second), 99, 100, 100, t0)})
	w.observe(t0.Add(time.Second), map[int32]*goka.TableStats{3: table(goka.PartitionInitializing, zero, 0, 0, 0, zero)})
	// the new processor opens its storage: a restore starting, not the finished one
	if got := reasons[len(reasons)-1]; got != "restoring table partition 3: starting" {
		t.Fatalf("reason while the reassigned partition sets up %q", got)
	}
	w.observe(t0.Add(2*time.Second), map[int32]*goka.TableStats{3: table(goka.PartitionRecovering, t0.Add(2*time.Second), 100, 160, 0, zero)})
	w.observe(t0.Add(4*time.Second), map[int32]*goka.TableStats{3: table(goka.PartitionRecovering, t0.Add(2*time.Second), 129, 160, 30, zero)})
	w.observe(t0.Add(5*time.Second), map[int32]*goka.TableStats{3: table(goka.PartitionRunning, t0.Add(2*time.Second), 159, 160, 60, t0.Add(5*time.Second))})
	out := buf.String()
	for _, want := range []string{"partitions=3 records=100 seconds=1\n", `msg="table restore" stage=ingest partition=3 restored=30 to_go=30 rate=15/s eta=2s`,
		"partitions=3 records=60 seconds=3\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "\n"); n != 3 {
		t.Errorf("%d lines, want 3:\n%s", n, out)
	}
}
