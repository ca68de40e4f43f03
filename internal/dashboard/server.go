package dashboard

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kadm"
	"golang.org/x/sync/errgroup"

	"github.com/backflowhq/backflow/internal/alerts"
	"github.com/backflowhq/backflow/internal/conf"
	"github.com/backflowhq/backflow/internal/rollup"
)

//go:embed assets
var assets embed.FS

// Deps are the connections the server uses; it does not close them.
type Deps struct {
	// ClickHouse runs the panels' SQL. Required.
	ClickHouse driver.Conn
	// Kafka reads consumer-group lag for the health strip; nil shows the lag as unknown.
	Kafka *kadm.Client
	// Alerts reads Prometheus's firing alerts for the health strip; nil (no prometheus.url)
	// shows none.
	Alerts *alerts.Client
	// HTTP scrapes the breaker gauge. Default: a client with Config.QueryTimeout.
	HTTP *http.Client
	// Logger receives one line per failed query. Default: slog.Default().
	Logger *slog.Logger
	// Now is the clock for relative ranges. Default: time.Now.
	Now func() time.Time
}

// Server serves the built-in dashboard: the page and its assets (embedded in the binary, no
// CDN) at /, the panel list at /api/panels, one panel's rows at /api/panels/<id>, the health
// strip (lag, dead letters, breaker, rollup lag, Prometheus's firing alerts) at /api/health, and /healthz;
// with Config.Auth's password every route but /healthz asks for basic auth. Handler may be served by any number of goroutines; Run
// listens on Config.Addr until its context ends.
type Server struct {
	cfg     Config
	deps    Deps
	sem     chan struct{} // bounds concurrent ClickHouse queries
	mux     *http.ServeMux
	handler http.Handler // mux behind the basic auth, when a password is set
}

// New validates cfg and builds a server; it touches no network.
func New(cfg Config, deps Deps) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.ClickHouse == nil {
		return nil, errors.New("dashboard: deps: a ClickHouse connection is required")
	}
	cfg = cfg.withDefaults()
	if deps.HTTP == nil {
		deps.HTTP = &http.Client{Timeout: cfg.QueryTimeout}
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	s := &Server{cfg: cfg, deps: deps, sem: make(chan struct{}, cfg.Parallel), mux: http.NewServeMux()}
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, err
	}
	s.mux.Handle("GET /", http.FileServerFS(static))
	s.mux.HandleFunc("GET /api/panels", s.panels)
	s.mux.HandleFunc("GET /api/panels/{id}", s.panel)
	s.mux.HandleFunc("GET /api/health", s.health)
	s.handler = s.mux
	pw, err := cfg.Auth.password()
	if err != nil {
		return nil, err
	}
	if pw != "" {
		s.handler = basicAuth(cfg.Auth.User, pw, s.mux)
	}
	// /healthz stays open: it says "ok" and nothing else, for probes that carry no credentials.
	outer := http.NewServeMux()
	outer.Handle("/", s.handler)
	outer.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	s.handler = outer
	return s, nil
}

// Handler is the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.handler }

// URL is the address the page is served at.
func (s *Server) URL() string { return "http://" + s.cfg.Addr + "/" }

// Run listens on Config.Addr and serves until ctx ends, then shuts down (in-flight requests get
// 5 s). It fails at once when the address cannot be bound.
func (s *Server) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("dashboard: listen on %s: %w", s.cfg.Addr, err)
	}
	return s.Serve(ctx, ln)
}

// Serve is Run on a listener of the caller's.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("dashboard: serve: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		return hs.Shutdown(sctx)
	})
	return g.Wait()
}

// PanelInfo is what the page needs to lay out a panel.
type PanelInfo struct {
	ID      string   `json:"id"`
	Title   string   `json:"title"`
	Section string   `json:"section"`
	Help    string   `json:"help"`
	Kind    Kind     `json:"kind"`
	Unit    string   `json:"unit"`
	Width   int      `json:"width"`
	Columns []string `json:"columns"`
	SQL     string   `json:"sql"`
	Rollup  string   `json:"rollup"`
}

// Layout is /api/panels: the panels, and how the page opens.
type Layout struct {
	Panels   []PanelInfo `json:"panels"`
	RefreshS int64       `json:"refresh_s"`
	RangeS   int64       `json:"range_s"`
	Groups   []string    `json:"groups"`
}

func (s *Server) panels(w http.ResponseWriter, _ *http.Request) {
	l := Layout{RefreshS: int64(s.cfg.Refresh / time.Second), RangeS: int64(s.cfg.Range / time.Second), Groups: s.cfg.Groups}
	for _, p := range Panels {
		l.Panels = append(l.Panels, PanelInfo{ID: p.ID, Title: p.Title, Section: p.Section, Help: p.Help, Kind: p.Kind,
			Unit: p.Unit, Width: p.Width, Columns: p.Columns, SQL: p.SQL, Rollup: p.Rollup})
	}
	writeJSON(w, http.StatusOK, l)
}

// rangeOf reads ?from=&to= (Unix seconds) or ?range=<duration> (the last one, e.g. 15m or 7d,
// in backflow's one duration form, conf.ParseDuration), or else the configured default range.
func (s *Server) rangeOf(r *http.Request) (Range, error) {
	q := r.URL.Query()
	if q.Has("from") || q.Has("to") {
		from, err1 := strconv.ParseInt(q.Get("from"), 10, 64)
		to, err2 := strconv.ParseInt(q.Get("to"), 10, 64)
		if err1 != nil || err2 != nil {
			return Range{}, fmt.Errorf("%w: from and to must both be Unix seconds, got %q and %q", ErrBadRange, q.Get("from"), q.Get("to"))
		}
		return NewRange(time.Unix(from, 0), time.Unix(to, 0))
	}
	d := s.cfg.Range
	if v := q.Get("range"); v != "" {
		var err error
		if d, err = conf.ParseDuration(v); err != nil || d < MinInterval || d > 31*24*time.Hour {
			return Range{}, fmt.Errorf("%w: range %q, want a duration from 1m to 31d (such as 15m, 6h, 7d or P1D)", ErrBadRange, v)
		}
	}
	return LastRange(s.deps.Now(), d)
}

type apiError struct {
	Error string `json:"error"`
}

func (s *Server) panel(w http.ResponseWriter, r *http.Request) {
	p, ok := PanelByID(r.PathValue("id"))
	if !ok {
		writeJSON(w, http.StatusNotFound, apiError{fmt.Sprintf("%v: %q", ErrUnknownPanel, r.PathValue("id"))})
		return
	}
	rg, err := s.rangeOf(r)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, apiError{err.Error()})
		return
	}
	res, err := s.run(r.Context(), p, rg)
	if err != nil {
		s.deps.Logger.Warn("dashboard panel failed", "panel", p.ID, "err", err)
		writeJSON(w, http.StatusBadGateway, apiError{err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// run runs one panel within the concurrency bound and the query timeout. For a panel with a
// rollup it reads the watermarks first and says in the result which minutes the panel read
// from raw rows (the watermarks may move between the two reads: the note is for the reader).
func (s *Server) run(ctx context.Context, p Panel, rg Range) (Result, error) {
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
	defer func() { <-s.sem }()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.QueryTimeout)
	defer cancel()
	var cov *Coverage
	if r, ok := rollup.ByName(p.Rollup); ok {
		if wm, err := rollup.ReadWatermarks(ctx, s.deps.ClickHouse); err != nil {
			s.deps.Logger.Warn("dashboard: no rollup note", "panel", p.ID, "err", err)
		} else {
			c := CoverageOf(r, wm)
			cov = &c
		}
	}
	res, err := RunPanel(ctx, s.deps.ClickHouse, p, rg, s.cfg.MaxRows)
	res.Rollup = cov
	return res, err
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	rg, err := s.rangeOf(r)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, apiError{err.Error()})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.QueryTimeout)
	defer cancel()
	var h Health
	var wg sync.WaitGroup
	wg.Add(5)
	go func() { defer wg.Done(); h.Lag = ReadLag(ctx, s.deps.Kafka, s.cfg.Groups) }()
	go func() { defer wg.Done(); h.Alerts = ReadAlerts(ctx, s.deps.Alerts) }()
	go func() { defer wg.Done(); h.Breaker, h.Restore = ScrapeStage(ctx, s.deps.HTTP, s.cfg.BreakerURL) }()
	go func() { defer wg.Done(); h.Rollups = ReadRollupLag(ctx, s.deps.ClickHouse) }()
	go func() {
		defer wg.Done()
		p, _ := PanelByID("dlq_in_range")
		res, err := s.run(ctx, p, rg)
		switch {
		case err != nil:
			h.DLQErr = err.Error()
		case len(res.Rows) != 1 || len(res.Rows[0]) != 1:
			h.DLQErr = fmt.Sprintf("dlq_in_range returned %d rows, want 1", len(res.Rows))
		default:
			if n, ok := res.Rows[0][0].(uint64); ok {
				h.DLQ = &n
			} else {
				h.DLQErr = fmt.Sprintf("dlq_in_range returned %T, want a count", res.Rows[0][0])
			}
		}
	}()
	wg.Wait()
	JudgeLag(h.Lag, processDown(h.Alerts))
	writeJSON(w, http.StatusOK, h)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
