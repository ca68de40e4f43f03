package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/backflowhq/backflow/internal/dashboard"
	"github.com/backflowhq/backflow/internal/rollup"
	"github.com/backflowhq/backflow/pipelines/replay"
	"github.com/backflowhq/backflow/test/pipelinetest"
	"github.com/backflowhq/backflow/tools/loadgen"
)

// demo is the data every test in this file reads: loadgen → ingest → ClickHouse sink → DLQ
// mirror on the real stack, 3,000 requests whose event times span the last 20 minutes, plus
// one recorded replay of two partitions.
type demo struct {
	*pipelinetest.Data
	rg        dashboard.Range
	originals map[string]int // per topic/phase slot: "inference", "REQUEST", "RESPONSE"
	poison    map[string]int // per DLQ class
	replayAt  time.Time
	// watermark is the minute up to which every source is rolled up, 5 minutes before the
	// data ends: each panel reads rollups, then raw rows.
	watermark time.Time
}

const replayWho = "ops@example.com"

// The demo also holds newerCount inference results of newerModel written by a newer producer
// with status CANCELLED, which this version reads as UNKNOWN.
const (
	newerCount = 5
	newerModel = "model-newer"
)

func newDemo(t *testing.T) *demo {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	newer, _ := pipelinetest.NewerStatuses(newerCount, newerModel, "CANCELLED")
	d := &demo{Data: pipelinetest.RunWith(t, ctx, loadgen.Config{Requests: 3000, Backfill: 20 * time.Minute, DuplicateRate: 0.03,
		PoisonRate: 0.02, SensitiveShare: 0.2, Seed: 21}, newer), originals: map[string]int{"inference": newerCount}, poison: map[string]int{}}
	for _, e := range d.Manifest.Entries {
		switch {
		case e.Kind == loadgen.KindOriginal && e.Phase == "":
			d.originals["inference"]++
		case e.Kind == loadgen.KindOriginal:
			d.originals[e.Phase]++
		case e.Kind == loadgen.KindPoison:
			d.poison[e.Class]++
		}
	}
	// A replay as the replay command records it: one row per partition moved.
	d.replayAt = time.Now().UTC().Add(-5 * time.Minute).Truncate(time.Second)
	var rows []replay.ReplayLogRow
	for p, off := range []int64{1200, 900} {
		rows = append(rows, replay.ReplayLogRow{ReplayID: "r-dashboard", ReplayedAt: d.replayAt, Who: replayWho, Group: d.SinkGroup,
			Spec: "earliest", EpochFrom: -1, EpochTo: 1, Topic: d.Ingest.EnrichedTopic, Partition: int32(p), FromOffset: off, ToOffset: 0})
	}
	if err := replay.InsertReplayLog(ctx, d.Conn, rows); err != nil {
		t.Fatal(err)
	}
	// The rollups of what landed, as an existing deployment's backfill makes them.
	upTo := time.Now().UTC().Add(-5 * time.Minute)
	for _, src := range rollup.Sources() {
		if err := rollup.Backfill(ctx, d.Conn, src, upTo.Add(-time.Hour), upTo); err != nil {
			t.Fatal(err)
		}
	}
	d.watermark = upTo.Truncate(time.Minute)
	var err error
	if d.rg, err = dashboard.NewRange(time.Now().Add(-30*time.Minute), time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	return d
}

func (d *demo) scalar(t *testing.T, sql string) uint64 {
	t.Helper()
	var v uint64
	if err := d.Conn.QueryRow(context.Background(), sql).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

// TestDashboardOnDemoData runs every panel against the real ClickHouse on demo-like data: as the
// built-in server runs them, as the committed Grafana JSON holds them, over the HTTP API, and
// in headless Chromium.
func TestDashboardOnDemoData(t *testing.T) {
	d := newDemo(t)
	t.Logf("originals %v, poison %v, range %s .. %s by %v", d.originals, d.poison, d.rg.From.Format(time.TimeOnly), d.rg.To.Format(time.TimeOnly), d.rg.Interval)
	t.Run("panels", func(t *testing.T) { d.checkPanels(t) })
	t.Run("grafana", func(t *testing.T) { d.checkGrafana(t) })
	t.Run("api", func(t *testing.T) { d.checkAPI(t) })
	t.Run("browser", func(t *testing.T) { d.checkBrowser(t) })
}

func (d *demo) run(t *testing.T, p dashboard.Panel) dashboard.Result {
	t.Helper()
	res, err := dashboard.RunPanel(context.Background(), d.Conn, p, d.rg, 100000)
	if err != nil {
		t.Fatalf("%s: %v", p.ID, err)
	}
	var names []string
	for _, c := range res.Columns {
		names = append(names, c.Name)
	}
	if !slices.Equal(names, p.Columns) {
		t.Fatalf("%s returns columns %v, want %v", p.ID, names, p.Columns)
	}
	if len(res.Rows) == 0 {
		t.Fatalf("%s returned no rows on the demo data", p.ID)
	}
	return res
}

func num(t *testing.T, v any) float64 {
	t.Helper()
	switch x := v.(type) {
	case uint64:
		return float64(x)
	case uint32:
		return float64(x)
	case uint16:
		return float64(x)
	case uint8:
		return float64(x)
	case int64:
		return float64(x)
	case int32:
		return float64(x)
	case float64:
		return x
	}
	t.Fatalf("%v (%T) is not a number", v, v)
	return 0
}

// sums adds up column col of res per value of column key ("" for all rows).
func sums(t *testing.T, res dashboard.Result, key, col int) map[string]float64 {
	out := map[string]float64{}
	for _, r := range res.Rows {
		k := ""
		if key >= 0 {
			k = fmt.Sprint(r[key])
		}
		out[k] += num(t, r[col])
	}
	return out
}

// checkPanels checks each panel's figures against the manifest or the deduplicated tables.
func (d *demo) checkPanels(t *testing.T) {
	inference := float64(d.originals["inference"])
	poison := 0.0
	for _, n := range d.poison {
		poison += float64(n)
	}
	seen := map[string]bool{}
	for _, p := range dashboard.Panels {
		res := d.run(t, p)
		seen[p.ID] = true
		if p.Kind == dashboard.TimeSeries {
			buckets := map[int64]bool{}
			for _, r := range res.Rows {
				ts := r[0].(int64)
				if ts < d.rg.From.Unix()-res.IntervalS || ts > d.rg.To.Unix() || ts%res.IntervalS != 0 {
					t.Fatalf("%s: bucket %d outside the range or off the %d s grid", p.ID, ts, res.IntervalS)
				}
				if s, ok := r[1].(string); !ok || s == "" {
					t.Fatalf("%s: series name %v", p.ID, r[1])
				}
				buckets[ts] = true
			}
			if p.ID != "dlq_over_time" && p.ID != "sink_throughput" && len(buckets) < 10 {
				// Event times span 20 minutes: a chart over them has a bucket a minute.
				t.Fatalf("%s: %d time buckets over 20 minutes of event times, want 10 or more", p.ID, len(buckets))
			}
		}
		switch p.ID {
		case "dlq_in_range":
			if got := num(t, res.Rows[0][0]); got != poison {
				t.Fatalf("dlq_in_range %v, manifest has %v poison records", got, poison)
			}
		case "requests_per_model":
			if got := sums(t, res, -1, 2)[""]; got != inference {
				t.Fatalf("requests per model add up to %v, manifest has %v inference originals", got, inference)
			}
		case "errors_per_model":
			want := float64(d.scalar(t, `SELECT toUInt64(countIf(status NOT IN ('OK', 'UNKNOWN'))) FROM v_inference_results`))
			if got := sums(t, res, -1, 2)[""]; got != want || want == 0 {
				t.Fatalf("errors per model add up to %v, v_inference_results has %v", got, want)
			}
		case "latency_per_model":
			if got := sums(t, res, -1, 1)[""]; got != inference {
				t.Fatalf("latency table counts %v requests, manifest has %v", got, inference)
			}
			// A newer producer's CANCELLED lands as UNKNOWN: counted apart, not as an error.
			if got := sums(t, res, 0, 3)[newerModel]; got != newerCount {
				t.Fatalf("latency table counts %v unknown statuses for %s, want %d", got, newerModel, newerCount)
			}
			if got := sums(t, res, -1, 3)[""]; got != newerCount {
				t.Fatalf("latency table counts %v unknown statuses in all, want %d", got, newerCount)
			}
			if got := sums(t, res, 0, 2)[newerModel]; got != 0 {
				t.Fatalf("latency table counts %v errors for %s, want 0", got, newerModel)
			}
			for _, r := range res.Rows {
				p50, p95, p99 := num(t, r[4]), num(t, r[5]), num(t, r[6])
				if p50 <= 0 || p50 > p95 || p95 > p99 {
					t.Fatalf("latency of %v: p50 %v p95 %v p99 %v", r[0], p50, p95, p99)
				}
			}
		case "latency_p95":
			for _, r := range res.Rows {
				if v := num(t, r[2]); v <= 0 || v > 60000 {
					t.Fatalf("p95 of %v at %v: %v ms", r[1], r[0], v)
				}
			}
		case "tokens_per_tenant":
			top := res.Rows[0]
			want := d.scalar(t, fmt.Sprintf(`SELECT toUInt64(sum(prompt_tokens + completion_tokens)) FROM v_gateway_logs WHERE phase = 'RESPONSE' AND tenant_id = '%s'`, top[0]))
			if num(t, top[1]) != float64(want) || len(res.Rows) != 10 {
				t.Fatalf("top tenant %v: %v tokens, v_gateway_logs has %d; %d bars, want 10", top[0], top[1], want, len(res.Rows))
			}
		case "tokens_per_tenant_model":
			for _, r := range res.Rows {
				if num(t, r[3])+num(t, r[4]) != num(t, r[5]) {
					t.Fatalf("%v/%v: prompt %v + completion %v != total %v", r[0], r[1], r[3], r[4], r[5])
				}
			}
		case "risk_hit_rate":
			hits := 0
			for _, r := range res.Rows {
				v := num(t, r[2])
				if v < 0 || v > 100 {
					t.Fatalf("hit rate %v%%", v)
				}
				if v > 0 {
					hits++
				}
			}
			if hits == 0 {
				t.Fatal("20 % of texts carry a planted word, every hit rate is 0")
			}
		case "top_categories":
			want := float64(d.scalar(t, `SELECT toUInt64(count()) FROM v_moderation_hits`))
			if n := d.scalar(t, `SELECT toUInt64(uniqExact(category)) FROM v_moderation_hits`); n <= 10 && sums(t, res, -1, 1)[""] != want {
				t.Fatalf("categories add up to %v matches, v_moderation_hits holds %v", sums(t, res, -1, 1)[""], want)
			}
		case "verdict_mix":
			want := float64(d.originals["inference"] + d.originals["REQUEST"] + d.originals["RESPONSE"])
			if got := sums(t, res, -1, 1)[""]; got != want {
				t.Fatalf("verdict mix counts %v texts, manifest has %v originals", got, want)
			}
		case "dlq_over_time":
			got := sums(t, res, 1, 2)
			for class, n := range d.poison {
				if got[class] != float64(n) {
					t.Fatalf("dead letters per class %v, manifest's poison %v", got, d.poison)
				}
			}
		case "dlq_by_class_origin":
			got := sums(t, res, 0, 3)
			if len(got) != len(d.poison) {
				t.Fatalf("dead letters by class %v, manifest's poison %v", got, d.poison)
			}
			for class, n := range d.poison {
				if got[class] != float64(n) {
					t.Fatalf("dead letters by class %v, manifest's poison %v", got, d.poison)
				}
			}
			for _, r := range res.Rows {
				if r[1] != "ingest" || (r[2] != d.Ingest.InferenceTopic && r[2] != d.Ingest.GatewayTopic) {
					t.Fatalf("dead letter row %v: want stage ingest and a source topic", r)
				}
			}
		case "sink_throughput":
			got := sums(t, res, 1, 2)
			if len(got) != 1 || got[d.SinkGroup] <= 0 {
				t.Fatalf("sink throughput %v, want one group %s", got, d.SinkGroup)
			}
		case "freshness":
			r := res.Rows[0]
			lag, age, total := num(t, r[3]), num(t, r[5]), num(t, r[6])
			want := float64(d.originals["inference"] + d.originals["REQUEST"] + d.originals["RESPONSE"])
			if len(res.Rows) != 1 || r[0] != d.SinkGroup || lag < 0 || lag > 600 || age < 0 || age > 600 || total != want {
				t.Fatalf("freshness %v: want %s with event lag and flush age in [0, 600] s and %v rows", res.Rows, d.SinkGroup, want)
			}
			if last := r[2].(int64); last < time.Now().Add(-10*time.Minute).Unix() {
				t.Fatalf("newest event time landed %v, traffic ended just now", time.Unix(last, 0))
			}
		case "replay_history":
			r := res.Rows[0]
			if len(res.Rows) != 1 || r[0].(int64) != d.replayAt.Unix() || r[1] != replayWho || num(t, r[4]) != 2 || num(t, r[5]) != -2100 {
				t.Fatalf("replay history %v: want one replay at %v by %s of 2 partitions, -2100 offsets", res.Rows, d.replayAt, replayWho)
			}
		default:
			t.Fatalf("panel %s has no check here", p.ID)
		}
		t.Logf("%-24s %4d rows in %3d ms: %v", p.ID, len(res.Rows), res.TookMs, res.Rows[0])
	}
	if len(seen) != len(dashboard.Panels) {
		t.Fatalf("panel ids are not unique: %d distinct of %d", len(seen), len(dashboard.Panels))
	}
}

// checkGrafana runs the SQL of every panel of the committed Grafana dashboard, with the
// macros replaced as the plugin does, and checks it returns the panel's columns and rows.
func (d *demo) checkGrafana(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", dashboard.GrafanaJSONPath))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Type, Title string
			Targets     []struct {
				RawSQL string `json:"rawSql"`
			}
		}
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	byTitle := map[string]dashboard.Panel{}
	for _, p := range dashboard.Panels {
		byTitle[p.Title] = p
	}
	ran := 0
	for _, gp := range dash.Panels {
		if gp.Type == "row" {
			continue
		}
		p, ok := byTitle[gp.Title]
		if !ok || len(gp.Targets) != 1 {
			t.Fatalf("grafana panel %q: no such panel, or %d targets", gp.Title, len(gp.Targets))
		}
		p.SQL = gp.Targets[0].RawSQL
		res := d.run(t, p)
		ran++
		t.Logf("grafana %-32q %4d rows", gp.Title, len(res.Rows))
	}
	if ran != len(dashboard.Panels) {
		t.Fatalf("ran %d grafana panels, want %d", ran, len(dashboard.Panels))
	}
}

// checkAPI exercises the JSON endpoints the page polls: the panel list, a panel by explicit
// range (the same rows as RunPanel), and the errors a caller can make.
func (d *demo) checkAPI(t *testing.T) {
	srv, err := dashboard.New(dashboard.Config{Groups: []string{d.SinkGroup}}, dashboard.Deps{ClickHouse: d.Conn})
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string, wantCode int, into any) {
		t.Helper()
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != wantCode {
			t.Fatalf("GET %s: %d %s, want %d", path, rec.Code, rec.Body.String(), wantCode)
		}
		if err := json.Unmarshal(rec.Body.Bytes(), into); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
	}
	var layout dashboard.Layout
	get("/api/panels", http.StatusOK, &layout)
	if len(layout.Panels) != len(dashboard.Panels) || layout.RangeS != 1800 || layout.RefreshS != 10 {
		t.Fatalf("layout: %d panels, range %d s, refresh %d s", len(layout.Panels), layout.RangeS, layout.RefreshS)
	}
	var res dashboard.Result
	get(fmt.Sprintf("/api/panels/requests_per_model?from=%d&to=%d", d.rg.From.Unix(), d.rg.To.Unix()), http.StatusOK, &res)
	direct := d.run(t, dashboard.Panels[1])
	if res.Panel != "requests_per_model" || len(res.Rows) != len(direct.Rows) || res.IntervalS != 60 || res.Columns[0].Type != "time" {
		t.Fatalf("over HTTP: %d rows, interval %d, columns %v; directly %d rows", len(res.Rows), res.IntervalS, res.Columns, len(direct.Rows))
	}
	// It says which minutes it read from the rollup: those before the watermark.
	if want := (dashboard.Coverage{Rollup: rollup.Model.Name, RawFrom: d.watermark.Unix()}); res.Rollup == nil || *res.Rollup != want {
		t.Fatalf("over HTTP, requests_per_model's rollup note %+v, want %+v", res.Rollup, want)
	}
	var replays dashboard.Result
	get("/api/panels/replay_history?range=1h", http.StatusOK, &replays)
	if replays.Rollup != nil || len(replays.Rows) != 1 {
		t.Fatalf("over HTTP, replay_history (no rollup): rollup note %+v, %d rows", replays.Rollup, len(replays.Rows))
	}
	var e struct{ Error string }
	get("/api/panels/nope", http.StatusNotFound, &e)
	get("/api/panels/freshness?range=banana", http.StatusBadRequest, &e)
	get("/api/panels/freshness?from=20&to=10", http.StatusBadRequest, &e)
	if !strings.Contains(e.Error, "bad time range") {
		t.Fatalf("bad range error %q", e.Error)
	}
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `<script src="app.js">`) {
		t.Fatalf("GET /: %d %.200s", rec.Code, rec.Body.String())
	}
	for _, asset := range []string{"/app.js", "/style.css"} {
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, asset, nil))
		if rec.Code != http.StatusOK || rec.Body.Len() < 1000 {
			t.Fatalf("GET %s: %d, %d bytes", asset, rec.Code, rec.Body.Len())
		}
	}
}
