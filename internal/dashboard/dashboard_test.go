package dashboard

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/backflowhq/backflow/internal/alerts"
	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/internal/rollup"
)

func TestExpand(t *testing.T) {
	from, to := time.Unix(1796115060, 0), time.Unix(1796116860, 0)
	r, err := NewRange(from, to)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Expand("SELECT $__interval_s WHERE $__timeFilter(minute) AND $__timeFilter( t.x ) AND a >= $__fromTime AND b < $__toTime", r)
	if err != nil {
		t.Fatal(err)
	}
	want := "SELECT 60 WHERE minute >= toDateTime(1796115060) AND minute <= toDateTime(1796116860) AND t.x >= toDateTime(1796115060) AND t.x <= toDateTime(1796116860) AND a >= toDateTime(1796115060) AND b < toDateTime(1796116860)"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	for _, sql := range []string{"SELECT $__timeInterval(minute)", "SELECT $__conditionalAll(a, $v)", "SELECT $__timeFilter()"} {
		if _, err := Expand(sql, r); !errors.Is(err, ErrUnknownMacro) {
			t.Errorf("%s: %v, want ErrUnknownMacro", sql, err)
		}
	}
}

func TestNewRange(t *testing.T) {
	now := time.Unix(1796116860, 0)
	for _, c := range []struct {
		span time.Duration
		want time.Duration
	}{
		{5 * time.Minute, time.Minute}, {2 * time.Hour, time.Minute}, {3 * time.Hour, 2 * time.Minute},
		{6 * time.Hour, 5 * time.Minute}, {24 * time.Hour, 15 * time.Minute}, {7 * 24 * time.Hour, 2 * time.Hour},
		{15 * 24 * time.Hour, 3 * time.Hour}, {16 * 24 * time.Hour, 24 * time.Hour}, {30 * 24 * time.Hour, 24 * time.Hour},
		{365 * 24 * time.Hour, 24 * time.Hour},
	} {
		r, err := LastRange(now, c.span)
		if err != nil || r.Interval != c.want || !r.To.Equal(now) || !r.From.Equal(now.Add(-c.span)) {
			t.Errorf("last %v: %+v %v, want interval %v", c.span, r, err, c.want)
		}
	}
	if _, err := NewRange(now, now); !errors.Is(err, ErrBadRange) {
		t.Fatalf("empty range: %v", err)
	}
}

// TestPanelsAreWellFormed: every panel has a unique URL-safe id, fits the grid, uses only the
// macros Expand knows, reads the rollup it names, and declares the column layout its kind draws.
func TestPanelsAreWellFormed(t *testing.T) {
	id := regexp.MustCompile(`^[a-z0-9_]+$`)
	seen := map[string]bool{}
	r, _ := LastRange(time.Now(), time.Hour)
	for _, p := range Panels {
		if !id.MatchString(p.ID) || seen[p.ID] || p.Title == "" || p.Help == "" || p.Section == "" {
			t.Errorf("panel %+v: id, title, help and section must be set and the id unique", p.ID)
		}
		seen[p.ID] = true
		if p.Width < 1 || p.Width > 24 {
			t.Errorf("%s: width %d", p.ID, p.Width)
		}
		if _, err := Expand(p.SQL, r); err != nil {
			t.Errorf("%s: %v", p.ID, err)
		}
		// A panel with a rollup reads it through Range (or AllTime), and its own SQL reads no
		// table through FINAL and no per-minute view: that is the rollup's business.
		own := p.SQL
		if p.Rollup != "" {
			ru, ok := rollup.ByName(p.Rollup)
			if !ok {
				t.Errorf("%s: no rollup %q", p.ID, p.Rollup)
			}
			for _, rows := range []string{series(ru), whole(ru), ru.AllTime()} {
				own = strings.ReplaceAll(own, rows, "")
			}
			if own == p.SQL {
				t.Errorf("%s: names rollup %s but does not read its Range", p.ID, p.Rollup)
			}
		}
		if strings.Contains(own, "toStartOfInterval") || strings.Contains(own, "FINAL") || strings.Contains(own, "_minute") {
			t.Errorf("%s: toStartOfInterval is missing on 18.16; FINAL and the per-minute tables belong in the rollup's Range", p.ID)
		}
		switch p.Kind {
		case TimeSeries:
			if len(p.Columns) != 3 || p.Columns[0] != "time" {
				t.Errorf("%s: a time series returns time, series, value; declares %v", p.ID, p.Columns)
			}
		case Bars:
			if len(p.Columns) != 2 {
				t.Errorf("%s: bars return label, value; declares %v", p.ID, p.Columns)
			}
		case Stat:
			if len(p.Columns) != 1 {
				t.Errorf("%s: a stat returns one column; declares %v", p.ID, p.Columns)
			}
		case Table:
			if len(p.Columns) == 0 {
				t.Errorf("%s: no columns", p.ID)
			}
		default:
			t.Errorf("%s: kind %q", p.ID, p.Kind)
		}
		for _, c := range p.Columns {
			if !strings.Contains(p.SQL, c) {
				t.Errorf("%s: column %s does not appear in its SQL", p.ID, c)
			}
		}
	}
	if p, ok := PanelByID("dlq_in_range"); !ok || p.Section != HealthSection || p.Kind != Stat {
		t.Fatal("the health strip's dead-letter count must be the stat panel dlq_in_range")
	}
}

func TestConfigValidate(t *testing.T) {
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Addr: "nope"}, "addr"},
		{Config{Refresh: time.Millisecond}, "refresh"},
		{Config{Range: time.Second}, "range"},
		{Config{MaxRows: -1}, "max rows"},
		{Config{Parallel: -1}, "parallel"},
		{Config{Groups: []string{"a", " "}}, "groups"},
		{Config{BreakerURL: "127.0.0.1:18410/metrics"}, "breaker url"},
	} {
		if err := c.cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %s", c.cfg, err, c.want)
		}
	}
}

// TestScrapeBreaker reads the gauge as Prometheus's own client exposes it: the worst group wins,
// and every failure leaves the state unknown with a reason.
func TestScrapeBreaker(t *testing.T) {
	reg := prometheus.NewRegistry()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: BreakerMetric, Help: "breaker"}, []string{"group"})
	other := prometheus.NewGauge(prometheus.GaugeOpts{Name: "something_else", Help: "x"})
	reg.MustRegister(other)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	ctx := context.Background()
	if b := ScrapeBreaker(ctx, srv.Client(), srv.URL); b.State != "unknown" || !strings.Contains(b.Error, "does not export") {
		t.Fatalf("gauge missing: %+v", b)
	}
	reg.MustRegister(g)
	for _, c := range []struct {
		a, b float64
		want string
	}{{0, 0, "closed"}, {0, 1, "half-open"}, {2, 1, "open"}} {
		g.WithLabelValues("ingest-a").Set(c.a)
		g.WithLabelValues("ingest-b").Set(c.b)
		b := ScrapeBreaker(ctx, srv.Client(), srv.URL)
		if b.State != c.want || len(b.Groups) != 2 || b.Groups[0].Group != "ingest-a" || b.Error != "" {
			t.Errorf("gauges %v, %v: %+v, want %s", c.a, c.b, b, c.want)
		}
	}
	g.WithLabelValues("ingest-a").Set(7)
	g.WithLabelValues("ingest-b").Set(math.NaN())
	if b := ScrapeBreaker(ctx, srv.Client(), srv.URL); b.State != "unknown" || b.Error == "" {
		t.Errorf("values 7 and NaN: %+v, want unknown", b)
	}
	if b := ScrapeBreaker(ctx, srv.Client(), ""); b.State != "unknown" || !strings.Contains(b.Error, "not configured") {
		t.Errorf("no url: %+v", b)
	}
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	if b := ScrapeBreaker(ctx, srv.Client(), down.URL); b.State != "unknown" || !strings.Contains(b.Error, "scrape") {
		t.Errorf("unreachable: %+v", b)
	}
	notFound := httptest.NewServer(http.NotFoundHandler())
	defer notFound.Close()
	if b := ScrapeBreaker(ctx, srv.Client(), notFound.URL); b.State != "unknown" || !strings.Contains(b.Error, "404") {
		t.Errorf("404: %+v", b)
	}
}

func TestJSONValue(t *testing.T) {
	ts := time.Unix(1796115060, 0)
	s := "x"
	var nilStr *string
	for _, c := range []struct {
		in   any
		want any
	}{
		{ts, int64(1796115060)}, {math.NaN(), nil}, {float32(1.5), 1.5}, {uint64(7), uint64(7)},
		{&s, "x"}, {nilStr, nil}, {[]float64{1, math.Inf(1)}, []any{1.0, nil}}, {[]string{"a"}, []any{"a"}},
	} {
		if got := jsonValue(reflect.ValueOf(c.in)); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%#v: %#v, want %#v", c.in, got, c.want)
		}
	}
	for db, want := range map[string]string{"DateTime": "time", "Nullable(DateTime)": "time", "UInt64": "number", "Float64": "number",
		"String": "string", "LowCardinality(String)": "string", "LowCardinality(Nullable(String))": "string", "Array(Float64)": "other",
		"DateTime('UTC')": "time", "Array(Nullable(String))": "other"} {
		if got := kindOf(db); got != want {
			t.Errorf("kindOf(%s) = %s, want %s", db, got, want)
		}
	}
}

// TestCoverageOf: a panel reads raw rows from the oldest watermark of its rollup's sources, and
// only raw rows while one of them has none.
func TestCoverageOf(t *testing.T) {
	at := func(m int) time.Time { return time.Unix(1796515200+int64(m)*60, 0) }
	wm := map[string]time.Time{rollup.InferenceResults: at(10), rollup.GatewayLogs: at(7), rollup.SinkLedger: at(12)}
	for _, c := range []struct {
		r    rollup.Rollup
		want int64
	}{
		{rollup.Model, at(10).Unix()},     // inference_results only
		{rollup.Moderation, at(7).Unix()}, // inference_results and gateway_logs: the older
		{rollup.Sink, at(12).Unix()},      // the ledger
		{rollup.Category, 0},              // moderation_hits has no watermark: raw rows only
	} {
		if got := CoverageOf(c.r, wm); got != (Coverage{Rollup: c.r.Name, RawFrom: c.want}) {
			t.Errorf("%s: %+v, want raw rows from %d", c.r.Name, got, c.want)
		}
	}
}

// TestScrapeStageRestore reads the table restore gauges as a stage exports them: only the
// partitions restoring now, with their figures, in stage and partition order; none when the
// stage exports no restore; the scrape's failure in Error.
func TestScrapeStageRestore(t *testing.T) {
	reg := prometheus.NewRegistry()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	ctx := context.Background()
	if _, r := ScrapeStage(ctx, srv.Client(), srv.URL); r.Error != "" || len(r.Restoring) != 0 {
		t.Fatalf("no restore gauges: %+v, want none and no error", r)
	}
	labels := []string{"stage", "group", "partition"}
	gauge := func(name string) *prometheus.GaugeVec {
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: name}, labels)
		reg.MustRegister(g)
		return g
	}
	restoring, restored, toGo := gauge(kafka.MetricTableRestoring), gauge(kafka.MetricTableRestored), gauge(kafka.MetricTableRestoreToGo)
	rate, eta := gauge(kafka.MetricTableRestoreRate), gauge(kafka.MetricTableRestoreETA)
	set := func(stage, part string, on, rd, tg, rt, e float64) {
		restoring.WithLabelValues(stage, "g-"+stage, part).Set(on)
		restored.WithLabelValues(stage, "g-"+stage, part).Set(rd)
		toGo.WithLabelValues(stage, "g-"+stage, part).Set(tg)
		rate.WithLabelValues(stage, "g-"+stage, part).Set(rt)
		eta.WithLabelValues(stage, "g-"+stage, part).Set(e)
	}
	set("ingest", "10", 1, 1_200_000, 2_200_000, 370_000, 6)
	set("ingest", "2", 1, 5, 95, 0, -1)
	set("ingest", "0", 0, 3_400_000, 0, 0, 0) // done
	set("sink-features", "1", 1, 7, 3, 1, 3)
	_, r := ScrapeStage(ctx, srv.Client(), srv.URL)
	want := []RestorePartition{
		{Stage: "ingest", Group: "g-ingest", Partition: "2", Restored: 5, ToGo: 95, Rate: 0, ETA: -1},
		{Stage: "ingest", Group: "g-ingest", Partition: "10", Restored: 1_200_000, ToGo: 2_200_000, Rate: 370_000, ETA: 6},
		{Stage: "sink-features", Group: "g-sink-features", Partition: "1", Restored: 7, ToGo: 3, Rate: 1, ETA: 3},
	}
	if r.Error != "" || !reflect.DeepEqual(r.Restoring, want) || r.Source != srv.URL {
		t.Fatalf("restore %+v, want %+v", r, want)
	}
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	if b, r := ScrapeStage(ctx, srv.Client(), down.URL); r.Error == "" || b.State != "unknown" || len(r.Restoring) != 0 {
		t.Fatalf("unreachable: %+v %+v", b, r)
	}
}

// TestJudgeLag: a group no member reads is not ok while its topics have records or a backflow
// process is down, though its lag is 0. Before, the page coloured by the lag alone, and a
// stopped pipeline's cards read "0 · Empty, 0 members" in green while BackflowProcessDown fired.
func TestJudgeLag(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	tests := []struct {
		name        string
		g           GroupLag
		processDown bool
		want        string
		why         string
	}{
		{name: "running, caught up", g: GroupLag{Members: 2, Lag: n(0), LogEnd: 90}, want: "ok"},
		{name: "running, behind", g: GroupLag{Members: 1, Lag: n(500), LogEnd: 90}, want: "warn"},
		{name: "running, far behind", g: GroupLag{Members: 1, Lag: n(LagBad), LogEnd: 90}, want: "bad"},
		{name: "stopped with records", g: GroupLag{State: "Empty", Lag: n(0), LogEnd: 90}, want: "bad", why: "no member consumes its topics"},
		{name: "stopped, process down", g: GroupLag{State: "Empty", Lag: n(0)}, processDown: true, want: "bad", why: ProcessDownAlert},
		{name: "stopped, nothing ever written", g: GroupLag{State: "Empty", Lag: n(0)}, want: "ok"},
		{name: "running while another process is down", g: GroupLag{Members: 1, Lag: n(0), LogEnd: 90}, processDown: true, want: "ok"},
		{name: "no commits", g: GroupLag{State: "Dead"}, want: "warn", why: "no committed offsets"},
		{name: "Kafka failed", g: GroupLag{Error: "kafka: lag: boom", Lag: n(0)}, want: "warn", why: "boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lags := []GroupLag{tt.g}
			JudgeLag(lags, tt.processDown)
			if lags[0].Status != tt.want || (tt.why == "") != (lags[0].Why == "") || !strings.Contains(lags[0].Why, tt.why) {
				t.Errorf("status %q, why %q; want %q, why containing %q", lags[0].Status, lags[0].Why, tt.want, tt.why)
			}
		})
	}
	if !processDown(Alerts{Firing: []alerts.Alert{{Name: "BackflowConsumerLagHigh"}, {Name: ProcessDownAlert}}}) || processDown(Alerts{Firing: []alerts.Alert{{Name: "BackflowConsumerLagHigh"}}}) {
		t.Error("processDown does not tell a firing BackflowProcessDown from other alerts")
	}
}

// TestRangeTakesDays: ?range= takes backflow's one duration form, days included, as the
// config and `dashboard --range` do; before, range=7d was refused.
func TestRangeTakesDays(t *testing.T) {
	now := time.Unix(1796116860, 0)
	s := &Server{cfg: Config{Range: 30 * time.Minute}.withDefaults(), deps: Deps{Now: func() time.Time { return now }}}
	tests := []struct {
		name, q string
		want    time.Duration
		wantErr bool
	}{
		{name: "days", q: "range=7d", want: 7 * 24 * time.Hour},
		{name: "days and hours", q: "range=1d12h", want: 36 * time.Hour},
		{name: "ISO-8601", q: "range=P1D", want: 24 * time.Hour},
		{name: "Go's form", q: "range=15m", want: 15 * time.Minute},
		{name: "default", q: "", want: 30 * time.Minute},
		{name: "too long", q: "range=32d", wantErr: true},
		{name: "no unit", q: "range=7", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rg, err := s.rangeOf(httptest.NewRequest(http.MethodGet, "/api/panels/freshness?"+tt.q, nil))
			if tt.wantErr {
				if !errors.Is(err, ErrBadRange) || !strings.Contains(fmt.Sprint(err), "7d") {
					t.Fatalf("%s: %v, want ErrBadRange naming the form", tt.q, err)
				}
				return
			}
			if err != nil || rg.To.Sub(rg.From) < tt.want || rg.To.Sub(rg.From) > tt.want+rg.Interval {
				t.Fatalf("%s: %v .. %v (%v), want %v", tt.q, rg.From, rg.To, err, tt.want)
			}
		})
	}
}
