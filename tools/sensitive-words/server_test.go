package sensitivewords

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backflowhq/backflow/test/testenv"
)

const (
	dictA = "bluefin\tdemo-fraud\t0.5\nquasar\tdemo-spam\t0.4\n测试词\tdemo-zh\t0.5\n"
	// dictB is dictA plus nightjar.
	dictB = dictA + "nightjar\tdemo-violence\t0.45\n"
)

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type testServer struct {
	*Server
	URL  string
	Dict string // dictionary path
	Logs *syncBuffer
}

// newTestServer starts the real handler on httptest with dictionary content dict; cfg's
// DictionaryPath and Logger are filled in.
func newTestServer(t testing.TB, dict string, cfg Config) *testServer {
	t.Helper()
	path := filepath.Join(t.TempDir(), "dict.tsv")
	testenv.WriteFile(t, path, dict)
	logs := &syncBuffer{}
	cfg.DictionaryPath = path
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	return &testServer{Server: s, URL: hs.URL, Dict: path, Logs: logs}
}

type request struct {
	method, path, contentType, token, body string
	chunked                                bool // no Content-Length
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func do(t testing.TB, base string, r request) response {
	t.Helper()
	if r.method == "" {
		r.method = http.MethodPost
	}
	if r.path == "" {
		r.path = "/v1/check"
	}
	var body io.Reader = strings.NewReader(r.body)
	if r.chunked {
		body = io.MultiReader(strings.NewReader(r.body)) // hides the length from net/http
	}
	req, err := http.NewRequest(r.method, base+r.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if r.contentType != "" {
		req.Header.Set("Content-Type", r.contentType)
	}
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{resp.StatusCode, resp.Header, b}
}

func checkBody(items ...string) string {
	var parts []string
	for i := 0; i < len(items); i += 2 {
		b, _ := json.Marshal(map[string]string{"id": items[i], "text": items[i+1]})
		parts = append(parts, string(b))
	}
	return `{"items":[` + strings.Join(parts, ",") + `]}`
}

func decodeCheck(t testing.TB, r response) checkResponse {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("status %d, body %s", r.status, r.body)
	}
	var out checkResponse
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("decoding %s: %v", r.body, err)
	}
	return out
}

func TestCheckAnswers(t *testing.T) {
	ts := newTestServer(t, dictB, Config{})
	r := do(t, ts.URL, request{contentType: "application/json; charset=utf-8",
		body: checkBody("r1", "is bluefin now", "r2", "测 试 词 and Q-U-A-S-A-R", "r3", "", "r4", "nothing here")})
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	// The field names are the contract: compare the raw JSON of one item.
	var raw struct {
		Items      []json.RawMessage `json:"items"`
		Dictionary string            `json:"dictionary"`
	}
	if err := json.Unmarshal(r.body, &raw); err != nil {
		t.Fatal(err)
	}
	wantR1 := `{"id":"r1","riskScore":0.5,"verdict":"REVIEW","categories":["demo-fraud"],"hits":[{"word":"bluefin","category":"demo-fraud","weight":0.5,"start":3,"end":10}]}`
	if len(raw.Items) != 4 || string(raw.Items[0]) != wantR1 {
		t.Fatalf("first item\n got %s\nwant %s", raw.Items[0], wantR1)
	}
	resp := decodeCheck(t, r)
	if resp.Dictionary != ts.Matcher().Dictionary().Version {
		t.Errorf("dictionary %q, want %q", resp.Dictionary, ts.Matcher().Dictionary().Version)
	}
	ids := []string{}
	for _, it := range resp.Items {
		ids = append(ids, it.ID)
	}
	if !slices.Equal(ids, []string{"r1", "r2", "r3", "r4"}) {
		t.Errorf("ids %v, want request order", ids)
	}
	r2 := resp.Items[1]
	wantHits := []hitJSON{
		{Word: "测试词", Category: "demo-zh", Weight: 0.5, Start: 0, End: 5},
		{Word: "quasar", Category: "demo-spam", Weight: 0.4, Start: 10, End: 21},
	}
	if !slices.Equal(r2.Hits, wantHits) || r2.RiskScore != 0.7 || r2.Verdict != VerdictReview ||
		!slices.Equal(r2.Categories, []string{"demo-spam", "demo-zh"}) {
		t.Errorf("r2 = %+v, want hits %+v, score 0.7, REVIEW, [demo-spam demo-zh]", r2, wantHits)
	}
	for _, it := range resp.Items[2:] {
		if it.RiskScore != 0 || it.Verdict != VerdictAllow || it.Categories == nil || len(it.Categories) != 0 || it.Hits == nil || len(it.Hits) != 0 {
			t.Errorf("%s = %+v, want score 0, ALLOW, [] and []", it.ID, it)
		}
	}
	if !bytes.Contains(r.body, []byte(`"id":"r3","riskScore":0,"verdict":"ALLOW","categories":[],"hits":[]`)) {
		t.Errorf("an item without hits must carry empty arrays, not null: %s", r.body)
	}
}

func TestCheckEmptyItems(t *testing.T) {
	ts := newTestServer(t, dictA, Config{})
	resp := decodeCheck(t, do(t, ts.URL, request{contentType: "application/json", body: `{"items":[]}`}))
	if resp.Items == nil || len(resp.Items) != 0 {
		t.Errorf("items %#v, want []", resp.Items)
	}
}

// TestCheckHitsCapped: the listed hits stop at MaxHitsPerItem; the score counts them all.
func TestCheckHitsCapped(t *testing.T) {
	ts := newTestServer(t, dictB, Config{MaxHitsPerItem: 2})
	resp := decodeCheck(t, do(t, ts.URL, request{contentType: "application/json",
		body: checkBody("a", "bluefin bluefin bluefin nightjar")}))
	it := resp.Items[0]
	if len(it.Hits) != 2 || it.RiskScore != 0.725 || !slices.Equal(it.Categories, []string{"demo-fraud", "demo-violence"}) {
		t.Errorf("item = %+v, want 2 hits, score 0.725, both categories", it)
	}
}

func TestHTTPErrors(t *testing.T) {
	ts := newTestServer(t, dictA, Config{MaxItems: 3, MaxBodyBytes: 2048})
	const js = "application/json"
	tests := []struct {
		name       string
		req        request
		wantStatus int
		wantCode   string
		wantAllow  string
	}{
		{"GET check", request{method: "GET"}, 405, "method_not_allowed", "POST"},
		{"PUT check", request{method: "PUT", contentType: js, body: checkBody("a", "b")}, 405, "method_not_allowed", "POST"},
		{"no content type", request{body: checkBody("a", "b")}, 415, "unsupported_media_type", ""},
		{"text/plain", request{contentType: "text/plain", body: checkBody("a", "b")}, 415, "unsupported_media_type", ""},
		{"malformed JSON", request{contentType: js, body: `{"items":[{"id":"a","text":"b"`}, 400, "bad_request", ""},
		{"not an object", request{contentType: js, body: `[1,2]`}, 400, "bad_request", ""},
		{"empty body", request{contentType: js, body: ``}, 400, "bad_request", ""},
		{"unknown top-level field", request{contentType: js, body: `{"items":[],"mode":"x"}`}, 400, "bad_request", ""},
		{"unknown item field", request{contentType: js, body: `{"items":[{"id":"a","text":"b","lang":"en"}]}`}, 400, "bad_request", ""},
		{"data after the object", request{contentType: js, body: `{"items":[]} {}`}, 400, "bad_request", ""},
		{"items missing", request{contentType: js, body: `{}`}, 400, "bad_request", ""},
		{"items null", request{contentType: js, body: `{"items":null}`}, 400, "bad_request", ""},
		{"id missing", request{contentType: js, body: `{"items":[{"text":"b"}]}`}, 400, "bad_request", ""},
		{"id empty", request{contentType: js, body: checkBody("", "b")}, 400, "bad_request", ""},
		{"id too long", request{contentType: js, body: checkBody(strings.Repeat("i", MaxIDBytes+1), "b")}, 400, "bad_request", ""},
		{"id duplicated", request{contentType: js, body: checkBody("a", "x", "b", "y", "a", "z")}, 400, "bad_request", ""},
		{"id not a string", request{contentType: js, body: `{"items":[{"id":7,"text":"b"}]}`}, 400, "bad_request", ""},
		{"text missing", request{contentType: js, body: `{"items":[{"id":"a"}]}`}, 400, "bad_request", ""},
		{"too many items", request{contentType: js, body: checkBody("a", "1", "b", "2", "c", "3", "d", "4")}, 413, "too_many_items", ""},
		{"body too large", request{contentType: js, body: checkBody("a", strings.Repeat("x", 4096))}, 413, "body_too_large", ""},
		{"body too large, chunked", request{contentType: js, body: checkBody("a", strings.Repeat("x", 4096)), chunked: true}, 413, "body_too_large", ""},
		{"unknown path", request{method: "GET", path: "/v2/check"}, 404, "not_found", ""},
		{"faults without --test-faults (GET)", request{method: "GET", path: "/debug/faults"}, 404, "not_found", ""},
		{"faults without --test-faults (POST)", request{path: "/debug/faults", contentType: js, body: `{"errorRate":1}`}, 404, "not_found", ""},
		{"POST healthz", request{path: "/healthz"}, 405, "method_not_allowed", "GET, HEAD"},
		{"POST metrics", request{path: "/metrics"}, 405, "method_not_allowed", "GET, HEAD"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := do(t, ts.URL, tt.req)
			if r.status != tt.wantStatus {
				t.Fatalf("status %d, want %d (body %s)", r.status, tt.wantStatus, r.body)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q, want application/json", ct)
			}
			var e map[string]string
			if err := json.Unmarshal(r.body, &e); err != nil {
				t.Fatalf("error body %s: %v", r.body, err)
			}
			if len(e) != 2 || e["code"] != tt.wantCode || e["error"] == "" {
				t.Errorf("body %s, want {error, code:%q}", r.body, tt.wantCode)
			}
			if got := r.header.Get("Allow"); got != tt.wantAllow {
				t.Errorf("Allow %q, want %q", got, tt.wantAllow)
			}
		})
	}
	// A request at the limits is fine: 3 items, a body just under 2048 bytes.
	body := checkBody("a", "bluefin", "b", "", "c", strings.Repeat("y", 1900))
	if len(body) > 2048 {
		t.Fatalf("test body %d bytes", len(body))
	}
	if resp := decodeCheck(t, do(t, ts.URL, request{contentType: js, body: body})); len(resp.Items) != 3 {
		t.Errorf("%d items at the limits, want 3", len(resp.Items))
	}
}

func TestAuth(t *testing.T) {
	ts := newTestServer(t, dictA, Config{Token: "s3cret-token", TestFaults: true})
	const js = "application/json"
	body := checkBody("a", "bluefin")
	for _, tt := range []struct {
		name   string
		header string
		want   int
	}{
		{"no header", "", 401},
		{"wrong token", "Bearer nope", 401},
		{"token prefix", "Bearer s3cret", 401},
		{"basic scheme", "Basic czNjcmV0LXRva2Vu", 401},
		{"bare token", "s3cret-token", 401},
		{"right token", "Bearer s3cret-token", 200},
		{"scheme is case-insensitive", "bearer s3cret-token", 200},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", ts.URL+"/v1/check", strings.NewReader(body))
			req.Header.Set("Content-Type", js)
			if tt.header != "" {
				req.Header.Set("Authorization", tt.header)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.want, b)
			}
			if tt.want == 401 {
				if !bytes.Contains(b, []byte(`"code":"unauthorized"`)) || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
					t.Errorf("401 body %s, WWW-Authenticate %q", b, resp.Header.Get("WWW-Authenticate"))
				}
			}
		})
	}
	// Probes and scrapes need no token; the faults endpoint does.
	for _, p := range []string{"/healthz", "/metrics"} {
		if r := do(t, ts.URL, request{method: "GET", path: p}); r.status != 200 {
			t.Errorf("GET %s without token: %d", p, r.status)
		}
	}
	if r := do(t, ts.URL, request{method: "GET", path: "/debug/faults"}); r.status != 401 {
		t.Errorf("GET /debug/faults without token: %d, want 401", r.status)
	}
	if r := do(t, ts.URL, request{method: "GET", path: "/debug/faults", token: "s3cret-token"}); r.status != 200 {
		t.Errorf("GET /debug/faults with token: %d, want 200", r.status)
	}
	if strings.Contains(ts.Logs.String(), "s3cret") {
		t.Errorf("the token appears in the logs")
	}
}

func TestHealthz(t *testing.T) {
	ts := newTestServer(t, dictB, Config{})
	r := do(t, ts.URL, request{method: "GET", path: "/healthz"})
	var h map[string]any
	if err := json.Unmarshal(r.body, &h); err != nil || r.status != 200 {
		t.Fatalf("status %d body %s: %v", r.status, r.body, err)
	}
	want := map[string]any{"status": "ok", "dictionary": ts.Matcher().Dictionary().Version, "entries": float64(4)}
	if fmt.Sprint(h) != fmt.Sprint(want) {
		t.Errorf("healthz %v, want %v", h, want)
	}
}

// metricValue returns the value of one series (name with its labels, as exposed, labels
// sorted by name), or -1 when it is absent.
func metricValue(t testing.TB, base, series string) float64 {
	t.Helper()
	r := do(t, base, request{method: "GET", path: "/metrics"})
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", sc.Text(), err)
			}
			return f
		}
	}
	return -1
}

func TestMetrics(t *testing.T) {
	ts := newTestServer(t, dictA, Config{})
	const js = "application/json"
	decodeCheck(t, do(t, ts.URL, request{contentType: js, body: checkBody("a", "bluefin BLUEFIN", "b", "quasar", "c", "x")}))
	decodeCheck(t, do(t, ts.URL, request{contentType: js, body: checkBody("a", "测试词")}))
	do(t, ts.URL, request{contentType: "text/plain", body: "{}"})
	do(t, ts.URL, request{contentType: js, body: "{"})

	testenv.WriteFile(t, ts.Dict, dictB)
	if err := ts.Reload(); err != nil {
		t.Fatal(err)
	}
	testenv.WriteFile(t, ts.Dict, "broken line\n")
	if err := ts.Reload(); err == nil {
		t.Fatal("reload of a broken file succeeded")
	}

	for series, want := range map[string]float64{
		`sensitive_words_requests_total{code="200",route="/v1/check"}`:      2,
		`sensitive_words_requests_total{code="415",route="/v1/check"}`:      1,
		`sensitive_words_requests_total{code="400",route="/v1/check"}`:      1,
		`sensitive_words_items_checked_total`:                               4,
		`sensitive_words_hits_total{category="demo-fraud"}`:                 2,
		`sensitive_words_hits_total{category="demo-spam"}`:                  1,
		`sensitive_words_hits_total{category="demo-zh"}`:                    1,
		`sensitive_words_request_duration_seconds_count{route="/v1/check"}`: 4,
		`sensitive_words_dictionary_entries`:                                4,
		`sensitive_words_dictionary_reloads_total{result="ok"}`:             1,
		`sensitive_words_dictionary_reloads_total{result="failed"}`:         1,
	} {
		if got := metricValue(t, ts.URL, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	if got := metricValue(t, ts.URL, "go_goroutines"); got <= 0 {
		t.Errorf("go_goroutines = %v: runtime collector missing", got)
	}
}

func TestFaultsDisabled(t *testing.T) {
	ts := newTestServer(t, dictA, Config{})
	if err := ts.SetFaults(Faults{ErrorRate: 1}); !errors.Is(err, ErrFaultsDisabled) {
		t.Errorf("SetFaults without TestFaults: %v, want ErrFaultsDisabled", err)
	}
	if _, err := ts.Faults(); !errors.Is(err, ErrFaultsDisabled) {
		t.Errorf("Faults without TestFaults: %v, want ErrFaultsDisabled", err)
	}
	_, err := New(Config{DictionaryPath: ts.Dict, Faults: Faults{Rate429: 1}})
	if !errors.Is(err, ErrFaultsDisabled) || !errors.Is(err, ErrConfig) {
		t.Errorf("New with faults but without TestFaults: %v, want ErrConfig and ErrFaultsDisabled", err)
	}
	if r := do(t, ts.URL, request{path: "/debug/faults", contentType: "application/json", body: `{"errorRate":1}`}); r.status != 404 {
		t.Errorf("POST /debug/faults: %d, want 404", r.status)
	}
	// And nothing misbehaves.
	for range 20 {
		resp := decodeCheck(t, do(t, ts.URL, request{contentType: "application/json", body: checkBody("a", "x", "b", "y")}))
		if len(resp.Items) != 2 || resp.Items[0].ID != "a" {
			t.Fatalf("answer %+v", resp)
		}
	}
}

func setFaults(t testing.TB, ts *testServer, body string) {
	t.Helper()
	r := do(t, ts.URL, request{path: "/debug/faults", contentType: "application/json", body: body})
	if r.status != 200 {
		t.Fatalf("POST /debug/faults %s: %d %s", body, r.status, r.body)
	}
}

func TestFaultsEnabled(t *testing.T) {
	ts := newTestServer(t, dictA, Config{TestFaults: true, Faults: Faults{WrongOrderRate: 1}})
	const js = "application/json"
	body := checkBody("a", "bluefin", "b", "quasar", "c", "x")
	ids := func(r checkResponse) []string {
		var out []string
		for _, it := range r.Items {
			out = append(out, it.ID)
		}
		return out
	}

	t.Run("start-up faults apply", func(t *testing.T) {
		if got := ids(decodeCheck(t, do(t, ts.URL, request{contentType: js, body: body}))); !slices.Equal(got, []string{"c", "b", "a"}) {
			t.Errorf("ids %v, want reversed", got)
		}
	})
	t.Run("GET shows the faults", func(t *testing.T) {
		r := do(t, ts.URL, request{method: "GET", path: "/debug/faults"})
		want := `{"latency":"0s","errorRate":0,"rate429":0,"wrongCountRate":0,"wrongOrderRate":1}`
		if strings.TrimSpace(string(r.body)) != want {
			t.Errorf("GET /debug/faults = %s, want %s", r.body, want)
		}
	})
	t.Run("wrong count", func(t *testing.T) {
		setFaults(t, ts, `{"wrongCountRate":1}`)
		if got := ids(decodeCheck(t, do(t, ts.URL, request{contentType: js, body: body}))); !slices.Equal(got, []string{"a", "b"}) {
			t.Errorf("ids %v, want the last dropped", got)
		}
	})
	t.Run("errors are 500 or 503", func(t *testing.T) {
		setFaults(t, ts, `{"errorRate":1}`)
		seen := map[int]int{}
		for range 40 {
			r := do(t, ts.URL, request{contentType: js, body: body})
			seen[r.status]++
			if !bytes.Contains(r.body, []byte(`"code":"injected_fault"`)) {
				t.Fatalf("body %s", r.body)
			}
		}
		if seen[500] == 0 || seen[503] == 0 || seen[500]+seen[503] != 40 {
			t.Errorf("statuses %v, want only and both of 500 and 503", seen)
		}
	})
	t.Run("429", func(t *testing.T) {
		setFaults(t, ts, `{"rate429":1}`)
		r := do(t, ts.URL, request{contentType: js, body: body})
		if r.status != 429 || r.header.Get("Retry-After") != "1" || !bytes.Contains(r.body, []byte(`"code":"rate_limited"`)) {
			t.Errorf("status %d Retry-After %q body %s", r.status, r.header.Get("Retry-After"), r.body)
		}
	})
	t.Run("latency", func(t *testing.T) {
		setFaults(t, ts, `{"latency":"300ms"}`)
		start := time.Now()
		decodeCheck(t, do(t, ts.URL, request{contentType: js, body: body}))
		if took := time.Since(start); took < 300*time.Millisecond {
			t.Errorf("answered in %v, want ≥ 300ms", took)
		}
	})
	t.Run("an empty body clears all faults", func(t *testing.T) {
		setFaults(t, ts, `{}`)
		for range 20 {
			if got := ids(decodeCheck(t, do(t, ts.URL, request{contentType: js, body: body}))); !slices.Equal(got, []string{"a", "b", "c"}) {
				t.Fatalf("ids %v after clearing", got)
			}
		}
	})
	t.Run("bad faults are refused and change nothing", func(t *testing.T) {
		for _, b := range []string{`{"errorRate":2}`, `{"rate429":-0.1}`, `{"latency":"soon"}`, `{"latency":"1h"}`, `{"chaos":1}`, `{`} {
			r := do(t, ts.URL, request{path: "/debug/faults", contentType: js, body: b})
			if r.status != 400 || !bytes.Contains(r.body, []byte(`"code":"bad_request"`)) {
				t.Errorf("POST %s: %d %s, want 400 bad_request", b, r.status, r.body)
			}
		}
		if f, _ := ts.Faults(); f != (Faults{}) {
			t.Errorf("faults %+v after refused changes, want none", f)
		}
		if r := do(t, ts.URL, request{method: "DELETE", path: "/debug/faults"}); r.status != 405 {
			t.Errorf("DELETE /debug/faults: %d, want 405", r.status)
		}
	})
}

func TestReload(t *testing.T) {
	ts := newTestServer(t, dictA, Config{})
	const js = "application/json"
	check := func() checkResponse {
		return decodeCheck(t, do(t, ts.URL, request{contentType: js, body: checkBody("n", "a nightjar sang", "b", "bluefin")}))
	}
	before := check()
	if len(before.Items[0].Hits) != 0 {
		t.Fatalf("nightjar matched before the reload: %+v", before.Items[0])
	}

	testenv.WriteFile(t, ts.Dict, dictB)
	if err := ts.Reload(); err != nil {
		t.Fatal(err)
	}
	after := check()
	if len(after.Items[0].Hits) != 1 || after.Items[0].Hits[0].Word != "nightjar" || after.Dictionary == before.Dictionary {
		t.Fatalf("after reload: %+v (dictionary %s, before %s)", after.Items[0], after.Dictionary, before.Dictionary)
	}

	testenv.WriteFile(t, ts.Dict, dictB+"broken\tline\n")
	err := ts.Reload()
	if !errors.Is(err, ErrDictionary) || !strings.Contains(err.Error(), "line 5") {
		t.Fatalf("reload of a broken file: %v, want ErrDictionary naming line 5", err)
	}
	kept := check()
	if kept.Dictionary != after.Dictionary || len(kept.Items[0].Hits) != 1 {
		t.Fatalf("after a failed reload: %+v, want dictionary %s still in use", kept, after.Dictionary)
	}
	if !strings.Contains(ts.Logs.String(), "dictionary reload failed") {
		t.Errorf("failed reload not logged:\n%s", ts.Logs)
	}

	if err := os.Remove(ts.Dict); err != nil {
		t.Fatal(err)
	}
	if err := ts.Reload(); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("reload of a missing file: %v", err)
	}
	if check().Dictionary != after.Dictionary {
		t.Fatal("a missing file replaced the dictionary")
	}
}

// TestWatch: a changed file is picked up by polling; a broken one is tried once, not on every
// poll, and the next good version is picked up again.
func TestWatch(t *testing.T) {
	ts := newTestServer(t, dictA, Config{ReloadInterval: 10 * time.Millisecond})
	ctx := t.Context()
	go ts.Watch(ctx)
	v0 := ts.Matcher().Dictionary().Version

	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	testenv.WriteFile(t, ts.Dict, dictB)
	waitFor("the new dictionary", func() bool { return ts.Matcher().Dictionary().Version != v0 })
	if len(ts.Matcher().Find("nightjar")) != 1 {
		t.Fatal("nightjar not found after the watched reload")
	}
	v1 := ts.Matcher().Dictionary().Version

	testenv.WriteFile(t, ts.Dict, "not a dictionary\n")
	waitFor("a failed reload", func() bool {
		return metricValue(t, ts.URL, `sensitive_words_dictionary_reloads_total{result="failed"}`) == 1
	})
	time.Sleep(100 * time.Millisecond) // ten more polls
	if got := metricValue(t, ts.URL, `sensitive_words_dictionary_reloads_total{result="failed"}`); got != 1 {
		t.Errorf("a broken file was tried %v times, want once", got)
	}
	if ts.Matcher().Dictionary().Version != v1 {
		t.Fatal("the broken file replaced the dictionary")
	}

	testenv.WriteFile(t, ts.Dict, dictA)
	waitFor("the fixed dictionary", func() bool { return ts.Matcher().Dictionary().Version == v0 })
}

// TestReloadInFlight: a request that started before a reload is answered entirely by the
// dictionary it started with.
func TestReloadInFlight(t *testing.T) {
	ts := newTestServer(t, dictA, Config{TestFaults: true, Faults: Faults{Latency: 400 * time.Millisecond}})
	vA := ts.Matcher().Dictionary().Version
	done := make(chan checkResponse)
	go func() {
		done <- decodeCheck(t, do(t, ts.URL, request{contentType: "application/json", body: checkBody("n", "nightjar")}))
	}()
	time.Sleep(150 * time.Millisecond) // the request is waiting out its latency
	testenv.WriteFile(t, ts.Dict, dictB)
	if err := ts.Reload(); err != nil {
		t.Fatal(err)
	}
	resp := <-done
	if resp.Dictionary != vA || len(resp.Items[0].Hits) != 0 {
		t.Errorf("in-flight answer %+v, want dictionary %s without nightjar", resp, vA)
	}
}

// TestReloadUnderLoad: requests racing with many reloads (good and broken files) all succeed,
// and each answer is consistent with the dictionary version it names. Run with -race.
func TestReloadUnderLoad(t *testing.T) {
	ts := newTestServer(t, dictA, Config{})
	vA := ts.Matcher().Dictionary().Version
	vB := NewMatcher(mustDict(t, dictB)).Dictionary().Version

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := map[string]int{}
	for w := range 8 {
		wg.Go(func() {
			client := &http.Client{}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				body := checkBody(fmt.Sprintf("w%d-%d", w, i), "nightjar and bluefin")
				resp, err := client.Post(ts.URL+"/v1/check", "application/json", strings.NewReader(body))
				if err != nil {
					t.Error(err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Errorf("status %d during reloads: %s", resp.StatusCode, b)
					return
				}
				var cr checkResponse
				if err := json.Unmarshal(b, &cr); err != nil {
					t.Error(err)
					return
				}
				hits := len(cr.Items[0].Hits)
				switch {
				case cr.Dictionary == vA && hits == 1, cr.Dictionary == vB && hits == 2:
				default:
					t.Errorf("dictionary %s with %d hits: inconsistent (A=%s has 1, B=%s has 2)", cr.Dictionary, hits, vA, vB)
					return
				}
				mu.Lock()
				counts[cr.Dictionary]++
				mu.Unlock()
			}
		})
	}
	for i := range 60 {
		switch i % 3 {
		case 0:
			testenv.WriteFile(t, ts.Dict, dictB)
			if err := ts.Reload(); err != nil {
				t.Error(err)
			}
		case 1:
			testenv.WriteFile(t, ts.Dict, "broken\n")
			if err := ts.Reload(); err == nil {
				t.Error("broken file reloaded")
			}
		case 2:
			testenv.WriteFile(t, ts.Dict, dictA)
			if err := ts.Reload(); err != nil {
				t.Error(err)
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if counts[vA] == 0 || counts[vB] == 0 {
		t.Errorf("answers per dictionary %v: want both dictionaries to have answered", counts)
	}
	if got := metricValue(t, ts.URL, `sensitive_words_dictionary_reloads_total{result="ok"}`); got != 40 {
		t.Errorf("ok reloads %v, want 40", got)
	}
}

// TestLogsHaveNoTexts: texts never reach the logs, whether the request succeeds or fails.
func TestLogsHaveNoTexts(t *testing.T) {
	ts := newTestServer(t, dictA, Config{MaxItems: 1, TestFaults: true})
	const secret = "PRIVATEPROMPT"
	const js = "application/json"
	do(t, ts.URL, request{contentType: js, body: checkBody("a", secret+" bluefin")})
	do(t, ts.URL, request{contentType: js, body: checkBody("a", secret, "b", secret)})
	do(t, ts.URL, request{contentType: js, body: `{"items":[{"id":"a","text":"` + secret + `"}],"x":1}`})
	do(t, ts.URL, request{contentType: js, body: `{"items":[{"id":"a","text":` + secret + `}]}`})
	do(t, ts.URL, request{contentType: "text/plain", body: secret})
	setFaults(t, ts, `{"errorRate":1}`)
	do(t, ts.URL, request{contentType: js, body: checkBody("a", secret)})
	logs := ts.Logs.String()
	if strings.Contains(logs, secret) || strings.Contains(logs, secret[1:]) {
		t.Errorf("a text reached the logs:\n%s", logs)
	}
	if !strings.Contains(logs, "request failed") {
		t.Errorf("refusals not logged:\n%s", logs)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"ok", Config{DictionaryPath: "d.tsv"}, ""},
		{"no dictionary", Config{}, "dictionary path"},
		{"max items", Config{DictionaryPath: "d", MaxItems: -1}, "max items"},
		{"max body", Config{DictionaryPath: "d", MaxBodyBytes: 10}, "max body bytes"},
		{"review above block", Config{DictionaryPath: "d", ReviewThreshold: 0.95}, "review threshold"},
		{"block above 1", Config{DictionaryPath: "d", BlockThreshold: 1.5}, "block threshold"},
		{"negative review", Config{DictionaryPath: "d", ReviewThreshold: -0.1}, "review threshold"},
		{"faults without the flag", Config{DictionaryPath: "d", Faults: Faults{Latency: time.Second}}, "test faults"},
		{"bad fault rate", Config{DictionaryPath: "d", TestFaults: true, Faults: Faults{ErrorRate: 1.5}}, "error rate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate: %v, want ErrConfig mentioning %q", err, tt.wantErr)
			}
		})
	}
	if _, err := New(Config{DictionaryPath: filepath.Join(t.TempDir(), "missing.tsv")}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("New without a dictionary file: %v", err)
	}
}
