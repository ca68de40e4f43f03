package ops

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestServerEndpoints: /healthz is always 200; /readyz is 503 until every stage is ready and
// every check passes, lists each condition, and turns 503 again when a check fails; /metrics
// serves the injected registry.
func TestServerEndpoints(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	st := m.Stage("ingest")
	st.In(5)
	st.Out(4)
	st.DLQ("corrupt", 1)
	ready := NewReadiness(time.Second)
	var depErr error = errors.New("connection refused")
	ready.AddCheck(Check{Name: "kafka", Run: func(context.Context) error { return depErr }})
	ready.AddStage("ingest")
	srv := NewServer("127.0.0.1:0", reg, ready, slog.New(slog.DiscardHandler))
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	base := "http://" + srv.Addr()

	if code, body := get(t, base+"/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("/healthz %d %q", code, body)
	}
	code, body := get(t, base+"/readyz")
	if code != 503 || !strings.Contains(body, "fail stage ingest: starting") || !strings.Contains(body, "fail kafka: connection refused") {
		t.Fatalf("/readyz before ready: %d\n%s", code, body)
	}
	ready.SetStage("ingest", nil)
	depErr = nil
	if code, body = get(t, base+"/readyz"); code != 200 || body != "ok   stage ingest\nok   kafka\n" {
		t.Fatalf("/readyz when ready: %d\n%q", code, body)
	}
	depErr = errors.New("i/o timeout")
	if code, body = get(t, base+"/readyz"); code != 503 || !strings.Contains(body, "fail kafka: i/o timeout") {
		t.Fatalf("/readyz with kafka down: %d\n%s", code, body)
	}
	code, body = get(t, base+"/metrics")
	for _, want := range []string{`backflow_stage_records_in_total{stage="ingest"} 5`, `backflow_stage_records_out_total{stage="ingest"} 4`,
		`backflow_stage_records_dlq_total{class="corrupt",stage="ingest"} 1`} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("/metrics (%d) lacks %s", code, want)
		}
	}
}

// TestServerPprof: /debug/pprof/ is served only after EnablePprof, and its heap profile is a
// real one (gzipped protobuf).
func TestServerPprof(t *testing.T) {
	for _, on := range []bool{false, true} {
		srv := NewServer("127.0.0.1:0", prometheus.NewRegistry(), nil, slog.New(slog.DiscardHandler))
		if on {
			srv.EnablePprof()
		}
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		code, body := get(t, "http://"+srv.Addr()+"/debug/pprof/heap")
		srv.Shutdown(context.Background())
		switch {
		case !on && code != http.StatusNotFound:
			t.Fatalf("pprof off: /debug/pprof/heap answered %d, want 404", code)
		case on && (code != http.StatusOK || !strings.HasPrefix(body, "\x1f\x8b")):
			t.Fatalf("pprof on: /debug/pprof/heap answered %d with %d bytes, want 200 and a gzipped profile", code, len(body))
		}
	}
}

// TestReadinessCheckTimeout: a check that hangs is cut at the timeout and reported failing.
func TestReadinessCheckTimeout(t *testing.T) {
	r := NewReadiness(50 * time.Millisecond)
	r.AddCheck(Check{Name: "hung", Run: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }})
	res := r.Evaluate(context.Background())
	if len(res) != 1 || !errors.Is(res[0].Err, context.DeadlineExceeded) {
		t.Fatalf("results %+v", res)
	}
}

// TestNilStageIsSafe: code running without metrics passes a nil *Stage.
func TestNilStageIsSafe(t *testing.T) {
	var s *Stage
	s.In(1)
	s.Out(1)
	s.DLQ("x", 1)
	s.Batch(3)
	s.Flush(time.Second)
	s.SinkError("retryable")
	s.SetReady(true)
	if s.Registerer() != nil || s.Name() != "" {
		t.Fatal("nil stage has a registerer or name")
	}
	var m *Metrics
	if m.Stage("x") != nil {
		t.Fatal("nil metrics gave a stage")
	}
}

// TestRegisterSharesACollector: two stages of one kind in a process share one family.
func TestRegisterSharesACollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x_total", Help: "x"}, []string{"g"}))
	b := Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x_total", Help: "x"}, []string{"g"}))
	a.WithLabelValues("1").Inc()
	b.WithLabelValues("1").Inc()
	if v := testutil.ToFloat64(a.WithLabelValues("1")); v != 2 {
		t.Fatalf("shared counter = %v, want 2", v)
	}
	// Two Metrics on one registry (a test building two pipelines) share the families too.
	NewMetrics(reg).Stage("s").In(1)
	NewMetrics(reg).Stage("s").In(1)
	if n := testutil.ToFloat64(NewMetrics(reg).Stage("s").in); n != 2 {
		t.Fatalf("records in = %v, want 2", n)
	}
}

func TestNewLogger(t *testing.T) {
	var b strings.Builder
	log, err := NewLogger(&b, "json", "warn")
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hidden")
	log.Warn("shown", "k", 1)
	if out := b.String(); strings.Contains(out, "hidden") || !strings.Contains(out, `"msg":"shown","k":1`) {
		t.Fatalf("json warn logger wrote %q", out)
	}
	for _, bad := range [][2]string{{"xml", "info"}, {"text", "loud"}} {
		if _, err := NewLogger(io.Discard, bad[0], bad[1]); err == nil {
			t.Errorf("NewLogger(%q, %q) accepted", bad[0], bad[1])
		}
	}
}
