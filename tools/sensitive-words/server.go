package sensitivewords

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gojson "github.com/goccy/go-json"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Server is the sensitive-word service: a dictionary, its matcher, and the HTTP API described
// in the package doc. Build it with New, serve Handler, and run Watch to follow the dictionary
// file. All methods are safe for concurrent use.
type Server struct {
	cfg     Config
	log     *slog.Logger
	th      Thresholds
	matcher atomic.Pointer[Matcher]
	// faults is nil unless Config.TestFaults: then and only then can a fault trigger.
	faults  *atomic.Pointer[Faults]
	metrics *metrics
	handler http.Handler

	reloadMu sync.Mutex
	stamp    os.FileInfo // the dictionary file as last loaded (or tried); guarded by reloadMu
}

// New validates cfg, loads the dictionary and builds its matcher. It fails when the dictionary
// cannot be loaded: the service never starts without one.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Server{
		cfg:     cfg,
		log:     cfg.Logger,
		th:      Thresholds{Block: cfg.BlockThreshold, Review: cfg.ReviewThreshold},
		metrics: newMetrics(),
	}
	if cfg.TestFaults {
		s.faults = new(atomic.Pointer[Faults])
		f := cfg.Faults
		s.faults.Store(&f)
	}
	s.reloadMu.Lock()
	m, err := s.load()
	s.reloadMu.Unlock()
	if err != nil {
		return nil, err
	}
	s.matcher.Store(m)
	s.metrics.entries.Set(float64(len(m.dict.Entries)))
	s.handler = s.routes()
	s.log.Info("dictionary loaded", "path", cfg.DictionaryPath, "version", m.dict.Version, "entries", len(m.dict.Entries))
	if cfg.TestFaults {
		s.log.Warn("test faults enabled: this instance misbehaves on purpose", "faults", cfg.Faults.toJSON())
	}
	return s, nil
}

// Handler returns the HTTP API.
func (s *Server) Handler() http.Handler { return s.handler }

// Matcher returns the matcher in use now.
func (s *Server) Matcher() *Matcher { return s.matcher.Load() }

// Reload reads the dictionary file again and, when it parses, swaps the new matcher in
// atomically. Requests already running finish on the matcher they started with. On failure
// the old dictionary stays in use, and the failure is logged, counted and returned. main calls
// it on SIGHUP; Watch calls it when the file changes.
func (s *Server) Reload() error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	return s.reloadLocked("requested")
}

// Watch polls the dictionary file every Config.ReloadInterval and reloads it when its
// modification time, size or identity (a new file renamed over it) changed since the last
// load or attempt. A file that stays broken is therefore tried once, not every poll. Watch
// returns when ctx ends.
func (s *Server) Watch(ctx context.Context) {
	t := time.NewTicker(s.cfg.ReloadInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fi, _ := os.Stat(s.cfg.DictionaryPath)
		s.reloadMu.Lock()
		if changed(s.stamp, fi) {
			_ = s.reloadLocked("file changed") // logged and counted there
		}
		s.reloadMu.Unlock()
	}
}

func changed(old, cur os.FileInfo) bool {
	if old == nil || cur == nil {
		return (old == nil) != (cur == nil)
	}
	return !os.SameFile(old, cur) || !old.ModTime().Equal(cur.ModTime()) || old.Size() != cur.Size()
}

// load reads the dictionary and builds its matcher; it records the file's stamp first, so a
// change during the read is seen by the next poll. reloadMu must be held.
func (s *Server) load() (*Matcher, error) {
	s.stamp, _ = os.Stat(s.cfg.DictionaryPath)
	d, err := LoadDictionary(s.cfg.DictionaryPath)
	if err != nil {
		return nil, err
	}
	return NewMatcher(d), nil
}

func (s *Server) reloadLocked(reason string) error {
	start := time.Now()
	old := s.matcher.Load()
	m, err := s.load()
	if err != nil {
		s.metrics.reloads.WithLabelValues("failed").Inc()
		s.log.Error("dictionary reload failed; keeping the dictionary in use",
			"reason", reason, "path", s.cfg.DictionaryPath, "version", old.dict.Version, "err", err)
		return fmt.Errorf("reload: %w", err)
	}
	s.matcher.Store(m)
	s.metrics.reloads.WithLabelValues("ok").Inc()
	s.metrics.entries.Set(float64(len(m.dict.Entries)))
	s.log.Info("dictionary reloaded", "reason", reason, "path", s.cfg.DictionaryPath,
		"version", m.dict.Version, "previous", old.dict.Version, "entries", len(m.dict.Entries),
		"took", time.Since(start).Round(time.Microsecond))
	return nil
}

// Faults returns the faults in force; ErrFaultsDisabled without Config.TestFaults.
func (s *Server) Faults() (Faults, error) {
	if s.faults == nil {
		return Faults{}, ErrFaultsDisabled
	}
	return *s.faults.Load(), nil
}

// SetFaults replaces the faults in force; ErrFaultsDisabled without Config.TestFaults.
func (s *Server) SetFaults(f Faults) error {
	if s.faults == nil {
		return ErrFaultsDisabled
	}
	if err := f.Validate(); err != nil {
		return err
	}
	s.faults.Store(&f)
	s.log.Warn("test faults changed", "faults", f.toJSON())
	return nil
}

// Routes, also the values of the metrics' route label.
const (
	routeCheck   = "/v1/check"
	routeHealth  = "/healthz"
	routeMetrics = "/metrics"
	routeFaults  = "/debug/faults"
	routeOther   = "other"
)

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle(routeCheck, s.instrument(routeCheck, http.HandlerFunc(s.handleCheck)))
	mux.Handle(routeHealth, s.instrument(routeHealth, http.HandlerFunc(s.handleHealth)))
	mux.Handle(routeMetrics, s.instrument(routeMetrics, s.onlyGet(promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))))
	if s.faults != nil {
		mux.Handle(routeFaults, s.instrument(routeFaults, http.HandlerFunc(s.handleFaults)))
	}
	mux.Handle("/", s.instrument(routeOther, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, http.StatusNotFound, "not_found", "no such endpoint")
	})))
	return mux
}

// statusWriter remembers the status code written.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (s *Server) instrument(route string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		if sw.code == 0 {
			sw.code = http.StatusOK
		}
		s.metrics.observe(route, sw.code, time.Since(start).Seconds())
	})
}

func (s *Server) onlyGet(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			s.fail(w, r, http.StatusMethodNotAllowed, "method_not_allowed", "use GET")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// errorBody is every error answer.
type errorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// fail answers an error and logs it (route, status and code; never a text).
func (s *Server) fail(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	level := slog.LevelWarn
	if status >= 500 {
		level = slog.LevelError
	}
	s.log.Log(r.Context(), level, "request failed", "method", r.Method, "path", r.URL.Path,
		"status", status, "code", code, "error", msg, "remote", r.RemoteAddr)
	writeJSON(w, status, errorBody{Error: msg, Code: code})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = gojson.NewEncoder(w).Encode(v)
}

// authorized reports whether r carries the configured bearer token (always, without one).
func (s *Server) authorized(r *http.Request) bool {
	if s.cfg.Token == "" {
		return true
	}
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), []byte(s.cfg.Token)) == 1
}

func (s *Server) refuseUnauthorized(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="sensitive-words"`)
	s.fail(w, r, http.StatusUnauthorized, "unauthorized", "missing or wrong bearer token")
}

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// Wire types of /v1/check (see the package doc).
type (
	checkRequest struct {
		Items []checkItem `json:"items"`
	}
	checkItem struct {
		ID   string  `json:"id"`
		Text *string `json:"text"`
	}
	checkResponse struct {
		Items      []itemResult `json:"items"`
		Dictionary string       `json:"dictionary"`
	}
	itemResult struct {
		ID         string    `json:"id"`
		RiskScore  float64   `json:"riskScore"`
		Verdict    string    `json:"verdict"`
		Categories []string  `json:"categories"`
		Hits       []hitJSON `json:"hits"`
	}
	hitJSON struct {
		Word     string  `json:"word"`
		Category string  `json:"category"`
		Weight   float64 `json:"weight"`
		Start    int     `json:"start"`
		End      int     `json:"end"`
	}
)

// requestError is a refusal of a request, before any checking.
type requestError struct {
	status int
	code   string
	msg    string
}

func badRequest(format string, args ...any) *requestError {
	return &requestError{http.StatusBadRequest, "bad_request", fmt.Sprintf(format, args...)}
}

// readCheck reads and validates a /v1/check request body.
func (s *Server) readCheck(w http.ResponseWriter, r *http.Request) (*checkRequest, *requestError) {
	tooLarge := &requestError{http.StatusRequestEntityTooLarge, "body_too_large",
		fmt.Sprintf("request body larger than %d bytes", s.cfg.MaxBodyBytes)}
	if r.ContentLength > s.cfg.MaxBodyBytes {
		return nil, tooLarge
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, tooLarge
		}
		return nil, badRequest("reading the body: %v", err)
	}
	var req checkRequest
	// goccy/go-json: encoding/json's behaviour at about a third of its CPU on these requests
	// (internal/moderation's BenchmarkWireCodec); the service decodes every text it checks.
	dec := gojson.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return nil, badRequest("malformed JSON: %v", err)
	}
	if err := dec.Decode(new(gojson.RawMessage)); err != io.EOF {
		return nil, badRequest("malformed JSON: data after the request object")
	}
	if req.Items == nil {
		return nil, badRequest(`"items": missing or null, want an array of {"id","text"}`)
	}
	if len(req.Items) > s.cfg.MaxItems {
		return nil, &requestError{http.StatusRequestEntityTooLarge, "too_many_items",
			fmt.Sprintf("%d items, at most %d per request", len(req.Items), s.cfg.MaxItems)}
	}
	seen := make(map[string]int, len(req.Items))
	for i, it := range req.Items {
		switch {
		case it.ID == "":
			return nil, badRequest("items[%d].id: missing or empty", i)
		case len(it.ID) > MaxIDBytes:
			return nil, badRequest("items[%d].id: %d bytes, at most %d", i, len(it.ID), MaxIDBytes)
		case it.Text == nil:
			return nil, badRequest("items[%d].text: missing", i)
		}
		if j, dup := seen[it.ID]; dup {
			return nil, badRequest("items[%d].id: %q duplicates items[%d].id", i, it.ID, j)
		}
		seen[it.ID] = i
	}
	return &req, nil
}

func (s *Server) handleCheck(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		s.fail(w, r, http.StatusMethodNotAllowed, "method_not_allowed", "use POST")
		return
	}
	if !s.authorized(r) {
		s.refuseUnauthorized(w, r)
		return
	}
	if !isJSON(r.Header.Get("Content-Type")) {
		s.fail(w, r, http.StatusUnsupportedMediaType, "unsupported_media_type", "Content-Type must be application/json")
		return
	}
	// The whole request is answered by the matcher in use now, whatever reloads happen
	// while it reads, waits or checks.
	m := s.matcher.Load()
	req, rerr := s.readCheck(w, r)
	if rerr != nil {
		s.fail(w, r, rerr.status, rerr.code, rerr.msg)
		return
	}

	var f Faults
	if s.faults != nil {
		f = *s.faults.Load()
		if !s.injectBefore(w, r, f) {
			return
		}
	}

	resp := checkResponse{Items: make([]itemResult, len(req.Items)), Dictionary: m.dict.Version}
	perCategory := map[string]int{}
	for i, it := range req.Items {
		hits := m.Find(*it.Text)
		res := m.Evaluate(hits, s.th, s.cfg.MaxHitsPerItem)
		for _, h := range hits {
			perCategory[m.dict.Entries[h.Entry].Category]++
		}
		out := itemResult{ID: it.ID, RiskScore: res.Score, Verdict: res.Verdict, Categories: res.Categories, Hits: make([]hitJSON, len(res.Hits))}
		for j, h := range res.Hits {
			e := m.dict.Entries[h.Entry]
			out.Hits[j] = hitJSON{Word: e.Word, Category: e.Category, Weight: e.Weight, Start: h.Start, End: h.End}
		}
		resp.Items[i] = out
	}
	s.metrics.items.Add(float64(len(req.Items)))
	for c, n := range perCategory {
		s.metrics.hits.WithLabelValues(c).Add(float64(n))
	}

	if s.faults != nil {
		s.injectAfter(&resp, f)
	}
	writeJSON(w, http.StatusOK, resp)
}

// injectBefore applies the latency, error and 429 faults; false when it answered r.
func (s *Server) injectBefore(w http.ResponseWriter, r *http.Request, f Faults) bool {
	if f.Latency > 0 {
		t := time.NewTimer(f.Latency)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return false // the client is gone; nobody reads an answer
		}
	}
	if roll(f.ErrorRate) {
		status := http.StatusServiceUnavailable
		if roll(0.5) {
			status = http.StatusInternalServerError
		}
		s.fail(w, r, status, "injected_fault", "test fault: error")
		return false
	}
	if roll(f.Rate429) {
		w.Header().Set("Retry-After", "1")
		s.fail(w, r, http.StatusTooManyRequests, "rate_limited", "test fault: rate limited")
		return false
	}
	return true
}

// injectAfter spoils a correct answer: a missing last item, or the items reversed.
func (s *Server) injectAfter(resp *checkResponse, f Faults) {
	if len(resp.Items) > 0 && roll(f.WrongCountRate) {
		resp.Items = resp.Items[:len(resp.Items)-1]
		s.log.Warn("test fault: dropped the last item of an answer")
	}
	if len(resp.Items) > 1 && roll(f.WrongOrderRate) {
		slices.Reverse(resp.Items)
		s.log.Warn("test fault: reversed the items of an answer")
	}
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		s.fail(w, r, http.StatusMethodNotAllowed, "method_not_allowed", "use GET")
		return
	}
	d := s.matcher.Load().dict
	writeJSON(w, http.StatusOK, struct {
		Status     string `json:"status"`
		Dictionary string `json:"dictionary"`
		Entries    int    `json:"entries"`
	}{"ok", d.Version, len(d.Entries)})
}

// maxFaultsBody bounds a POST /debug/faults body.
const maxFaultsBody = 64 << 10

func (s *Server) handleFaults(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		s.refuseUnauthorized(w, r)
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
	case http.MethodPost:
		if !isJSON(r.Header.Get("Content-Type")) {
			s.fail(w, r, http.StatusUnsupportedMediaType, "unsupported_media_type", "Content-Type must be application/json")
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxFaultsBody))
		if err != nil {
			s.fail(w, r, http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("faults body larger than %d bytes", maxFaultsBody))
			return
		}
		f, err := parseFaults(body)
		if err != nil {
			s.fail(w, r, http.StatusBadRequest, "bad_request", "faults: "+err.Error())
			return
		}
		if err := s.SetFaults(f); err != nil {
			s.fail(w, r, http.StatusBadRequest, "bad_request", "faults: "+err.Error())
			return
		}
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		s.fail(w, r, http.StatusMethodNotAllowed, "method_not_allowed", "use GET or POST")
		return
	}
	writeJSON(w, http.StatusOK, s.faults.Load().toJSON())
}
