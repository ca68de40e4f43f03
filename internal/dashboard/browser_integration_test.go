package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/internal/alerts"
	"github.com/backflowhq/backflow/internal/dashboard"
	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/test/testenv"
)

// chromiumPath is Debian's Chromium, which deploy/local/chromium installs (make test runs it).
func chromiumPath(t *testing.T) string {
	t.Helper()
	p := os.Getenv("BACKFLOW_CHROMIUM")
	if p == "" {
		p = "/usr/bin/chromium"
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("no Chromium at %s (%v): run deploy/local/chromium, as make test does, or set BACKFLOW_CHROMIUM", p, err)
	}
	return p
}

// screenshotDir is where the browser test saves its screenshot: $BACKFLOW_SCREENSHOT_DIR, or
// .stack/screenshots in the repository (git-ignored).
func screenshotDir(t *testing.T) string {
	dir := os.Getenv("BACKFLOW_SCREENSHOT_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", ".stack", "screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// pageState is what the page reports of itself through its data attributes and its text.
type pageState struct {
	Refreshed string
	Updated   string // the header's "updated …"
	Panels    []struct {
		ID, Kind, State, Points, RawFrom, Note string
		YTicks, XTicks                         []string // a chart's axis labels
		Cells                                  []string // a table's cells, as "column=text"
		Notes                                  []string // a table's notes under it
	}
	Health []struct{ Kind, Key, Value, Raw, Status, Detail string }
	Alerts []string // the firing alerts' lines of the alerts card
}

const readPage = `({
  refreshed: document.body.dataset.refreshed || "",
  updated: document.getElementById("updated").textContent,
  panels: [...document.querySelectorAll(".panel[data-panel]")].map(p => ({id: p.dataset.panel, kind: p.dataset.kind, state: p.dataset.state, points: p.dataset.points || "",
    rawFrom: p.dataset.rawFrom || "", note: p.querySelector(".source").textContent,
    yTicks: [...p.querySelectorAll("text.ytick")].map(t => t.textContent), xTicks: [...p.querySelectorAll("text.xtick")].map(t => t.textContent),
    cells: [...p.querySelectorAll("td[data-col]")].map(td => td.dataset.col + "=" + td.textContent), notes: [...p.querySelectorAll(".note")].map(n => n.textContent)})),
  health: [...document.querySelectorAll("#health .card")].map(c => ({kind: c.dataset.health, key: c.querySelector(".k").textContent, value: c.querySelector(".v").textContent,
    raw: c.dataset.value || "", status: c.dataset.status || "", detail: c.querySelector(".d") ? c.querySelector(".d").textContent : ""})),
  alerts: [...document.querySelectorAll("#health .card .alert")].map(a => a.textContent),
})`

// readState reads the page's state.
func readState(t *testing.T, ctx context.Context) pageState {
	t.Helper()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[json.RawMessage](readPage))
	if err != nil {
		t.Fatal(err)
	}
	var ps pageState
	if err := json.Unmarshal(raw, &ps); err != nil {
		t.Fatal(err)
	}
	return ps
}

// browserZone is the zone the browser runs in: half an hour off any whole-hour zone, so that a
// time written in the browser's zone never reads as UTC.
const browserZone = "Asia/Kolkata"

// liveMember joins group as a consumer of topic that commits nothing, and returns once Kafka
// lists it as the group's one member of a stable group.
func (d *demo) liveMember(t *testing.T, group, topic string) {
	t.Helper()
	cl, err := d.Kafka.NewClient(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			cl.PollFetches(ctx)
		}
	}()
	t.Cleanup(func() { cancel(); <-done; cl.Close() })
	adm := kadm.NewClient(d.Admin)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		gs, err := adm.DescribeGroups(context.Background(), group)
		if err == nil && gs[group].State == "Stable" && len(gs[group].Members) == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s has no stable member after a minute: %+v %v", group, gs[group], err)
		}
	}
}

var (
	utcTime  = regexp.MustCompile(`^(\d{4}-\d{2}-\d{2} )?\d{2}:\d{2}:\d{2} UTC$`)
	axisTime = regexp.MustCompile(`^(\d{4}-\d{2}-\d{2} )?\d{2}:\d{2}( UTC)?$`)
)

// utcText is how the page writes a time: UTC, with the date unless it is today (UTC).
func utcText(at time.Time, layout string) string {
	at = at.UTC()
	if at.Format(time.DateOnly) != time.Now().UTC().Format(time.DateOnly) {
		layout = time.DateOnly + " " + layout
	}
	return at.Format(layout) + " UTC"
}

// checkBrowser serves the dashboard on the demo data, loads it in headless Chromium, checks that
// every panel drew data and says which minutes it read from its rollup, and that the health
// strip shows lag, dead letters, the breaker, a table restore and the rollups' lag, and saves
// a screenshot; then checks that the range selector and auto-refresh redraw it.
func (d *demo) checkBrowser(t *testing.T) {
	// The ingest stage's /metrics, as Prometheus's client serves it: the breaker gauge, closed.
	reg := prometheus.NewRegistry()
	breaker := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: dashboard.BreakerMetric, Help: "0 closed, 1 half-open, 2 open"}, []string{"group"})
	reg.MustRegister(breaker)
	breaker.WithLabelValues(d.Ingest.Group).Set(0)
	// and a table restore in progress on partition 2 of the ingest group (one done on 0)
	for name, vals := range map[string][2]float64{kafka.MetricTableRestoring: {1, 0}, kafka.MetricTableRestored: {1_200_000, 3_400_000},
		kafka.MetricTableRestoreToGo: {2_200_000, 0}, kafka.MetricTableRestoreRate: {370_000, 0}, kafka.MetricTableRestoreETA: {6, 0}} {
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: name}, []string{"stage", "group", "partition"})
		reg.MustRegister(g)
		g.WithLabelValues("ingest", d.Ingest.Group, "2").Set(vals[0])
		g.WithLabelValues("ingest", d.Ingest.Group, "0").Set(vals[1])
	}
	metrics := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer metrics.Close()

	// A real Prometheus with one alert firing and one pending: the page shows the firing one.
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, []byte(`groups:
  - name: test
    rules:
      - alert: BackflowConsumerLagHigh
        expr: label_replace(vector(25000), "group", "`+d.SinkGroup+`", "", "")
        labels: {severity: critical}
        annotations: {summary: "Consumer group {{ $labels.group }} is {{ $value }} records behind", runbook: docs/operations.md#backflowconsumerlaghigh}
      - alert: BackflowStageNotReady
        expr: vector(0)
        for: 1h
`), 0o600); err != nil {
		t.Fatal(err)
	}
	prom := testenv.StartPrometheus(t, testenv.PrometheusOptions{Rules: rules})
	promAlerts := prom.Alerts(t)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if f, err := promAlerts.Firing(context.Background()); err == nil && len(f) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the test's Prometheus has no alert firing after a minute")
		}
	}

	groups := []string{d.Ingest.Group, d.SinkGroup, d.MirrorGroup}
	const user, password = "ops", "browser-test-password"
	srv, err := dashboard.New(dashboard.Config{Groups: groups, BreakerURL: metrics.URL + "/metrics", Range: 30 * time.Minute,
		Auth: dashboard.Auth{User: user, Password: password}},
		dashboard.Deps{ClickHouse: d.Conn, Kafka: kadm.NewClient(d.Admin), Alerts: promAlerts})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	ranges := map[string]int{} // panel requests per ?range= the page sent
	var slow atomic.Bool       // panel answers take longer than a 1 s auto-refresh period
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/panels/") {
			mu.Lock()
			ranges[r.URL.Query().Get("range")]++
			mu.Unlock()
			if slow.Load() {
				time.Sleep(1500 * time.Millisecond)
			}
		}
		srv.Handler().ServeHTTP(w, r)
	}))
	defer web.Close()

	// Chromium with the flags this machine needs (no network but loopback), a fresh profile.
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromiumPath(t)), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1440, 900),
		chromedp.Env("TZ="+browserZone))
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	// The browser meets the Basic challenge as a person would: the test answers each one (the
	// login prompt) through the DevTools Fetch domain, first by cancelling it, then with the
	// password. A headless browser left alone would wait on the prompt for ever.
	var withPassword atomic.Bool
	var challenges, cancelled atomic.Int64
	events := make(chan any, 256)
	if err := chromedp.Listen(bctx, func(ev any) {
		switch ev.(type) {
		case *fetch.EventAuthRequired, *fetch.EventRequestPaused:
			events <- ev
		}
	}); err != nil {
		t.Fatalf("chromium: listen: %v", err)
	}
	go func() {
		for ev := range events {
			switch e := ev.(type) {
			case *fetch.EventRequestPaused:
				_, _ = chromedp.Call(bctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: e.RequestID})
			case *fetch.EventAuthRequired:
				challenges.Add(1)
				answer := &fetch.AuthChallengeResponse{Response: fetch.AuthChallengeResponseResponseCancelAuth}
				if withPassword.Load() {
					answer = &fetch.AuthChallengeResponse{Response: fetch.AuthChallengeResponseResponseProvideCredentials, Username: user, Password: password}
				} else {
					cancelled.Add(1)
				}
				_, _ = chromedp.Call(bctx, fetch.ContinueWithAuth, fetch.ContinueWithAuthParams{RequestID: e.RequestID, AuthChallengeResponse: answer})
			}
		}
	}()
	defer close(events)
	handle := true
	if _, err := chromedp.Call(bctx, fetch.Enable, fetch.EnableParams{HandleAuthRequests: &handle}); err != nil {
		t.Fatalf("chromium: enable auth handling: %v", err)
	}
	// Without credentials the page is a 401 and shows nothing of the data; its assets and its
	// API answer 401 with the challenge too.
	resp, err := chromedp.RunResponse(bctx, chromedp.Navigate(web.URL+"/#range=30m&refresh=0"))
	if err != nil {
		t.Fatalf("chromium: load %s without credentials: %v", web.URL, err)
	}
	if resp.Status != http.StatusUnauthorized {
		t.Fatalf("chromium: the page without credentials answered %d, want 401", resp.Status)
	}
	refused, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`Promise.all(['/', '/app.js', '/api/panels', '/api/health'].map(
		p => fetch(p).then(r => r.status + ' ' + r.headers.get('WWW-Authenticate'))))`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("chromium: fetch without credentials: %v", err)
	}
	if len(refused) != 4 {
		t.Fatalf("without credentials: %d answers, want 4", len(refused))
	}
	for i, got := range refused {
		if got != `401 Basic realm="backflow dashboard", charset="UTF-8"` {
			t.Errorf("without credentials, request %d: %q, want 401 with the Basic challenge", i, got)
		}
	}
	if n, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('.panel').length`)); err != nil || n != 0 {
		t.Fatalf("the page without credentials shows %d panels (%v), want none", n, err)
	}
	if c := cancelled.Load(); c < 1 {
		t.Fatalf("the browser met %d challenges without credentials, want at least 1", c)
	}
	// The sink's group gets a live member; ingest's and the mirror's have none, while their
	// topics have records: the stages stopped.
	d.liveMember(t, d.SinkGroup, d.Ingest.EnrichedTopic)
	// With the password typed into the prompt it renders as before.
	withPassword.Store(true)
	if resp, err := chromedp.RunResponse(bctx, chromedp.Navigate(web.URL+"/?auth#range=30m&refresh=0")); err != nil || resp.Status != http.StatusOK {
		t.Fatalf("chromium: load %s with credentials: %v %+v", web.URL, err, resp)
	}
	wctx, cancel := context.WithTimeout(bctx, 60*time.Second)
	defer cancel()
	// Done when a refresh finished and no panel is still loading.
	if _, err := chromedp.Run(wctx, chromedp.Poll[bool](`document.body.dataset.refreshed && !document.querySelector('.panel[data-state="loading"]')`,
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(0))); err != nil {
		t.Fatalf("the page did not finish drawing: %v", err)
	}
	ps := readState(t, bctx)

	shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(screenshotDir(t), "dashboard.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d KiB)", path, len(shot)>>10)

	// Every panel but the health strip's drew data.
	want := 0
	for _, p := range dashboard.Panels {
		if p.Section != dashboard.HealthSection {
			want++
		}
	}
	if len(ps.Panels) != want {
		t.Fatalf("the page shows %d panels, want %d: %+v", len(ps.Panels), want, ps.Panels)
	}
	for _, p := range ps.Panels {
		n, _ := strconv.Atoi(p.Points)
		if p.State != "ok" || n == 0 {
			t.Errorf("panel %s (%s): state %q, %s points drawn", p.ID, p.Kind, p.State, p.Points)
		}
		// Under each panel that reads a rollup, the minute from which it read raw rows: the
		// watermark, inside the 30 minutes shown.
		if panel, _ := dashboard.PanelByID(p.ID); panel.Rollup != "" {
			if p.RawFrom != strconv.FormatInt(d.watermark.Unix(), 10) || !strings.HasPrefix(p.Note, "rollups before ") || !strings.HasSuffix(p.Note, " UTC, raw rows from then on") {
				t.Errorf("panel %s says %q (raw from %q), want rollups before %s UTC (%d), raw rows from then on", p.ID, p.Note, p.RawFrom, d.watermark.Format("15:04"), d.watermark.Unix())
			}
		} else if p.RawFrom != "" || p.Note != "" {
			t.Errorf("panel %s reads no rollup, yet says %q (raw from %q)", p.ID, p.Note, p.RawFrom)
		}
		t.Logf("panel %-24s %-10s drew %s; %s", p.ID, p.Kind, p.Points, p.Note)
	}
	// The health strip: a known lag per group (0 for the sink, which read everything), the
	// dead letters in the range, and the breaker as the gauge says.
	poison := 0
	for _, n := range d.poison {
		poison += n
	}
	// The rollup card: the newest event the ledger holds (at most now), less the end of the
	// newest minute rolled up.
	newest := int64(d.scalar(t, "SELECT toUInt64(least(max(max_event_time), now())) FROM sink_ledger"))
	rollupLag := max(newest-(d.watermark.Unix()+60), 0)
	if rollupLag == 0 {
		t.Fatalf("the newest event landed (%v) is not after the rollups' watermark %v: the card would show no lag", time.Unix(newest, 0), d.watermark)
	}
	lags, sawDLQ, sawBreaker, sawAlerts, sawRollup, sawRestore := 0, false, false, false, false, false
	for _, h := range ps.Health {
		t.Logf("health %-8s %-48s %s", h.Kind, h.Key, h.Value)
		switch h.Kind {
		case "lag":
			lags++
			if h.Raw == "" || (h.Key == "lag · "+d.SinkGroup && h.Raw != "0") {
				t.Errorf("%s shows %q (raw %q), want a known lag (0 for the sink)", h.Key, h.Value, h.Raw)
			}
			// A group no member reads is not green, though its lag is 0: the stage stopped.
			// The sink's group, with its live member and lag 0, is.
			if h.Key == "lag · "+d.SinkGroup {
				if h.Status != "ok" || h.Detail != "Stable, 1 member" {
					t.Errorf("%s with a live member and lag 0: %s, %q; want ok, \"Stable, 1 member\"", h.Key, h.Status, h.Detail)
				}
			} else if h.Status != "bad" || !strings.Contains(h.Detail, "0 members: no member consumes its topics, which have records") {
				t.Errorf("%s with no member and records in its topics: %s, %q; want bad, saying nothing consumes", h.Key, h.Status, h.Detail)
			}
		case "dlq":
			sawDLQ = true
			if h.Raw != fmt.Sprint(poison) {
				t.Errorf("dead letters in range %q (raw %q), manifest has %d poison records", h.Value, h.Raw, poison)
			}
		case "breaker":
			sawBreaker = true
			if h.Value != "closed" {
				t.Errorf("breaker shows %q, the gauge says closed", h.Value)
			}
		case "rollup":
			sawRollup = true
			if h.Key != "rollup lag" || h.Raw != strconv.FormatInt(rollupLag, 10) {
				t.Errorf("rollup card %q shows %q (raw %q), want the lag %d s", h.Key, h.Value, h.Raw, rollupLag)
			}
		case "restore":
			sawRestore = true
			if h.Key != "table restore" || h.Raw != "2200000" {
				t.Errorf("restore card %q shows %q (raw %q), want 2200000 records to go (partition 2 only)", h.Key, h.Value, h.Raw)
			}
		case "alerts":
			sawAlerts = true
			if h.Raw != "1" {
				t.Errorf("alerts card shows %q (raw %q), Prometheus has 1 firing", h.Value, h.Raw)
			}
		}
	}
	if lags != len(groups) || !sawDLQ || !sawBreaker || !sawAlerts || !sawRollup || !sawRestore {
		t.Fatalf("health strip: %d lag cards (want %d), dlq %v, breaker %v, alerts %v, rollup %v, restore %v", lags, len(groups), sawDLQ, sawBreaker, sawAlerts, sawRollup, sawRestore)
	}
	if want := "critical · BackflowConsumerLagHigh: Consumer group " + d.SinkGroup + " is 25000 records behind"; len(ps.Alerts) != 1 || ps.Alerts[0] != want {
		t.Errorf("the alerts card lists %q, want [%q]", ps.Alerts, want)
	}
	d.checkUnitsAndTimes(t, ps)

	// The range selector: choosing the last hour refreshes every panel with range=1h.
	if _, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`(() => { const s = document.getElementById("range"); s.value = "1h"; return s.dispatchEvent(new Event("change")); })()`)); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(wctx, chromedp.Poll[bool](fmt.Sprintf(`Number(document.body.dataset.refreshed) > %s && !document.querySelector('.panel[data-state="loading"]') && location.hash.includes("range=1h")`, ps.Refreshed),
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(0))); err != nil {
		t.Fatalf("choosing the last hour did not redraw the page: %v", err)
	}
	mu.Lock()
	hour := ranges["1h"]
	mu.Unlock()
	if hour != want {
		t.Fatalf("after choosing the last hour the page asked for %d panels with range=1h, want %d (requests per range: %v)", hour, want, ranges)
	}
	// Auto-refresh: opened with a 1 s period, the page redraws by itself, also when each
	// round takes longer than the period (as on a busy server): a fixed interval started
	// every round before the last had drawn, so the page never finished one.
	slow.Store(true)
	if err := chromedp.Do(bctx, chromedp.Navigate(web.URL+"/?again#range=15m&refresh=1")); err != nil {
		t.Fatal(err)
	}
	rctx, cancelRefresh := context.WithTimeout(bctx, 60*time.Second) // the polls below wait on their context, not chromedp's 30 s
	defer cancelRefresh()
	if _, err := chromedp.Run(rctx, chromedp.Poll[bool](`Number(document.body.dataset.refreshed) >= 3`, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(0))); err != nil {
		t.Fatalf("the page did not refresh by itself: %v", err)
	}
	slow.Store(false)
	mu.Lock()
	t.Logf("panel requests per range: %v", ranges)
	if ranges["15m"] < 3*want {
		t.Errorf("auto-refresh asked for %d panels with range=15m, want at least %d", ranges["15m"], 3*want)
	}
	mu.Unlock()

	d.checkEventsAhead(t, bctx, web.URL)

	// Without a metrics URL, and with one that does not answer, the breaker shows as unknown.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/metrics"
	ln.Close()
	for name, url := range map[string]string{"not configured": "", "unreachable": closed} {
		srv, err := dashboard.New(dashboard.Config{Groups: groups, BreakerURL: url}, dashboard.Deps{ClickHouse: d.Conn})
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/health?range=30m", nil))
		var h dashboard.Health
		if err := json.Unmarshal(rec.Body.Bytes(), &h); err != nil || h.Breaker.State != "unknown" || h.Breaker.Error == "" {
			t.Fatalf("%s breaker: %s (%v), want state unknown with a reason", name, rec.Body.String(), err)
		}
		if h.Alerts.Source != "" || len(h.Alerts.Firing) != 0 {
			t.Fatalf("no Prometheus configured, yet alerts %+v", h.Alerts)
		}
	}
	// A Prometheus that does not answer: no alerts, and the reason.
	down, err := alerts.New(alerts.Conn{URL: strings.TrimSuffix(closed, "/metrics"), Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	noProm, err := dashboard.New(dashboard.Config{Groups: groups}, dashboard.Deps{ClickHouse: d.Conn, Alerts: down})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	noProm.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/health?range=30m", nil))
	var h dashboard.Health
	if err := json.Unmarshal(rec.Body.Bytes(), &h); err != nil || h.Alerts.Source == "" || h.Alerts.Error == "" || len(h.Alerts.Firing) != 0 {
		t.Fatalf("unreachable Prometheus: alerts %s (%v), want its URL, an error and none firing", rec.Body.String(), err)
	}
}

// checkUnitsAndTimes: a chart's value axis carries the unit its panel declares, and every time
// on the page (axes, tables, the header, the notes) is in UTC in one format, though the browser
// runs in another zone. Before, the axes had no unit, the time axes and the header were in the
// browser's zone without saying so, and the tables in the browser's locale (12/6/2026, 19:53:14).
func (d *demo) checkUnitsAndTimes(t *testing.T, ps pageState) {
	if !strings.HasPrefix(ps.Updated, "updated ") || !utcTime.MatchString(strings.TrimPrefix(ps.Updated, "updated ")) {
		t.Errorf("the header says %q, want \"updated HH:MM:SS UTC\"", ps.Updated)
	}
	from := time.Now().Add(-30 * time.Minute).UTC()
	units := 0
	for _, p := range ps.Panels {
		panel, _ := dashboard.PanelByID(p.ID)
		if p.State != "ok" { // reported above
			continue
		}
		if panel.Kind == dashboard.TimeSeries {
			if len(p.YTicks) < 2 || len(p.XTicks) < 2 {
				t.Fatalf("panel %s: axis labels %q and %q, want 2 or more each", p.ID, p.YTicks, p.XTicks)
			}
			if panel.Unit != "" {
				units++
				for _, y := range p.YTicks {
					if !strings.HasSuffix(y, " "+panel.Unit) {
						t.Errorf("panel %s: value axis label %q does not carry its unit %q (all: %q)", p.ID, y, panel.Unit, p.YTicks)
					}
				}
			}
			for i, x := range p.XTicks {
				if !axisTime.MatchString(x) || strings.HasSuffix(x, " UTC") != (i == len(p.XTicks)-1) {
					t.Errorf("panel %s: time axis label %d %q, want HH:MM in UTC, the zone on the last only (all: %q)", p.ID, i, x, p.XTicks)
				}
			}
			// The first tick is the range's start, 30 minutes ago, written in UTC (the page's
			// range starts on its interval's grid, so within a few minutes of it).
			hhmm := strings.TrimSuffix(p.XTicks[0], " UTC")
			first, err := time.Parse("15:04", hhmm[len(hhmm)-5:])
			if err != nil {
				t.Fatalf("panel %s: first time tick %q: %v", p.ID, p.XTicks[0], err)
			}
			got := first.Hour()*60 + first.Minute()
			want := from.Hour()*60 + from.Minute()
			if diff := (got - want + 1440) % 1440; diff > 5 && diff < 1435 {
				t.Errorf("panel %s: the time axis starts at %q, %d minutes off %s UTC, the range's start", p.ID, p.XTicks[0], diff, from.Format("15:04"))
			}
		}
		for _, c := range p.Cells {
			col, text, _ := strings.Cut(c, "=")
			if col == "last_event_time" || col == "last_flush" || col == "executed_at" {
				if !utcTime.MatchString(text) {
					t.Errorf("panel %s: %s %q, want HH:MM:SS UTC", p.ID, col, text)
				}
			}
			if col == "executed_at" && text != utcText(d.replayAt, time.TimeOnly) {
				t.Errorf("panel %s: the replay executed at %s shows as %q, want %q", p.ID, d.replayAt, text, utcText(d.replayAt, time.TimeOnly))
			}
		}
	}
	if units != 3 {
		t.Errorf("%d charts carry a unit, want 3 (latency ms, risk-hit %%, sink rows/s)", units)
	}
}

// checkEventsAhead: a sink whose newest event is dated after the clock (a producer's clock
// ahead) shows no negative lag in the freshness table: the cell says the events are ahead,
// and a note under the table says why. Before, the cell read -1,200.
func (d *demo) checkEventsAhead(t *testing.T, bctx context.Context, url string) {
	ctx, cancel := context.WithTimeout(bctx, time.Minute) // a chromedp context: it carries the browser
	defer cancel()
	now := time.Now().UTC()
	group := "backflow-stream-ahead"
	if err := d.Conn.Exec(ctx, fmt.Sprintf(`INSERT INTO sink_ledger (batch_id, group, topic, partition, min_offset, max_offset, rows, hit_rows, epoch, flushed_at, max_event_time)
		SELECT 'ahead', '%s', 'ahead-topic', 0, 0, 9, 10, 0, 0, toDateTime(%d), toDateTime(%d)`, group, now.Unix(), now.Add(20*time.Minute).Unix())); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(url+"/?ahead#range=30m&refresh=0")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.body.dataset.refreshed && !document.querySelector('.panel[data-state="loading"]')`,
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(0))); err != nil {
		t.Fatalf("the page did not finish drawing: %v", err)
	}
	ps := readState(t, bctx)
	for _, p := range ps.Panels {
		if p.ID != "freshness" {
			continue
		}
		ahead := 0
		for _, c := range p.Cells {
			col, text, _ := strings.Cut(c, "=")
			if col != "event_lag_s" {
				continue
			}
			if strings.HasPrefix(text, "-") || strings.HasPrefix(text, "−") {
				t.Errorf("freshness shows a negative event lag %q", text)
			}
			if strings.HasPrefix(text, "ahead of the clock by ") {
				ahead++
			}
		}
		if ahead != 1 || len(p.Notes) != 1 || !strings.Contains(p.Notes[0], group+" on ahead-topic") || !strings.Contains(p.Notes[0], "clock") {
			t.Errorf("freshness: %d cells say ahead of the clock (want 1), notes %q (want one naming %s on ahead-topic); cells %q", ahead, p.Notes, group, p.Cells)
		}
		return
	}
	t.Fatal("no freshness panel on the page")
}
