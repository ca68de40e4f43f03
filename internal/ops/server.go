package ops

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// DefaultAddr is where a backflow process serves /metrics, /healthz and /readyz unless told
// otherwise: loopback only, Prometheus's port range.
const DefaultAddr = "127.0.0.1:9464"

// Check is one readiness condition: a dependency that must answer, or a stage that must be
// consuming. Run returns nil when the condition holds; it must honour ctx.
type Check struct {
	Name string
	Run  func(ctx context.Context) error
}

// Readiness is the set of conditions /readyz reports. Checks are added before the server
// starts; stage states are set at any time from any goroutine.
type Readiness struct {
	mu      sync.Mutex
	checks  []Check
	stages  map[string]error
	timeout time.Duration
	// one evaluation at a time: concurrent probes share its answer
	eval sync.Mutex
}

// NewReadiness returns an empty Readiness whose checks each get timeout (default 3s).
func NewReadiness(timeout time.Duration) *Readiness {
	if timeout <= 0 {
		timeout = 3 * time.Second
	}
	return &Readiness{stages: map[string]error{}, timeout: timeout}
}

// errStarting is a stage's state until it reports ready.
var errStarting = errors.New("starting: no partitions assigned yet")

// AddCheck adds a condition evaluated on every /readyz request.
func (r *Readiness) AddCheck(c Check) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checks = append(r.checks, c)
}

// AddStage adds a stage, not ready until SetStage(name, nil).
func (r *Readiness) AddStage(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stages[name] = errStarting
}

// SetStage records a stage's state: nil when consuming with partitions assigned, otherwise
// why not.
func (r *Readiness) SetStage(name string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stages[name] = err
}

// Result is one condition's state.
type Result struct {
	Name string
	Err  error
}

// Evaluate runs every check concurrently (each bounded by the timeout) and returns all
// results, stages first, sorted by name within each kind.
func (r *Readiness) Evaluate(ctx context.Context) []Result {
	r.eval.Lock()
	defer r.eval.Unlock()
	r.mu.Lock()
	checks := append([]Check(nil), r.checks...)
	var out []Result
	for name, err := range r.stages {
		out = append(out, Result{Name: "stage " + name, Err: err})
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	res := make([]Result, len(checks))
	var wg sync.WaitGroup
	for i, c := range checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, r.timeout)
			defer cancel()
			res[i] = Result{Name: c.Name, Err: c.Run(cctx)}
		}()
	}
	wg.Wait()
	sort.Slice(res, func(i, j int) bool { return res[i].Name < res[j].Name })
	return append(out, res...)
}

// Server serves /metrics, /healthz and /readyz.
//
// Lifecycle: NewServer, Start (binds the address; an address in use fails here), then
// Shutdown once. /healthz answers 200 while the process runs. /readyz answers 200 when every
// condition of the Readiness holds and 503 otherwise, one line per condition either way.
type Server struct {
	srv   *http.Server
	mux   *http.ServeMux
	ln    net.Listener
	log   *slog.Logger
	ready *Readiness
	done  chan struct{}
}

// NewServer returns a server for addr (host:port; port 0 picks a free one).
func NewServer(addr string, reg *prometheus.Registry, ready *Readiness, log *slog.Logger) *Server {
	if log == nil {
		log = slog.Default()
	}
	if ready == nil {
		ready = NewReadiness(0)
	}
	s := &Server{log: log, ready: ready, done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg, ErrorLog: slogPrinter{log}}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", s.readyz)
	s.mux = mux
	s.srv = &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	return s
}

// EnablePprof serves Go's runtime profiles under /debug/pprof/ (net/http/pprof): the live heap,
// goroutines, and a CPU profile on request, e.g. go tool pprof http://ADDR/debug/pprof/heap.
// Call it before Start. Off by default: a profile exposes code paths and data sizes, and a CPU
// profile costs while it runs.
func (s *Server) EnablePprof() {
	s.mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	s.mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	s.mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	s.mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	s.mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	res := s.ready.Evaluate(r.Context())
	var b strings.Builder
	code := http.StatusOK
	for _, x := range res {
		if x.Err != nil {
			code = http.StatusServiceUnavailable
			fmt.Fprintf(&b, "fail %s: %v\n", x.Name, x.Err)
		} else {
			fmt.Fprintf(&b, "ok   %s\n", x.Name)
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	fmt.Fprint(w, b.String())
}

// Start binds the address and serves in the background.
func (s *Server) Start() error {
	ln, err := net.Listen("tcp", s.srv.Addr)
	if err != nil {
		return fmt.Errorf("ops: metrics address %s: %w", s.srv.Addr, err)
	}
	s.ln = ln
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("metrics server stopped", "error", err)
		}
	}()
	return nil
}

// Addr is the bound address (after Start).
func (s *Server) Addr() string {
	if s.ln == nil {
		return s.srv.Addr
	}
	return s.ln.Addr().String()
}

// Shutdown stops serving, waiting for requests in progress until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	if s.ln == nil {
		return nil
	}
	err := s.srv.Shutdown(ctx)
	<-s.done
	return err
}

type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Println(v ...any) { p.log.Error("metrics: " + fmt.Sprint(v...)) }
