package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/backflowhq/backflow/test/testenv"
)

func TestDashboardUsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{{"dashboard", "extra"}, {"dashboard", "--range", "1s"}, {"dashboard", "--addr", "nope"},
		{"dashboard", "--breaker-metrics-url", "ftp://host/metrics"}, {"dashboard", "--refresh", "10ms"}} {
		if code, _ := runCLI(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}
	// An address other than loopback without a password is refused before any connection.
	t.Setenv("BACKFLOW_DASHBOARD_PASSWORD", "")
	t.Setenv("BACKFLOW_DASHBOARD_PASSWORD_FILE", "")
	_, _, err := execRoot(context.Background(), "dashboard", "--addr", "0.0.0.0:0")
	if code := classify(err); code != exitUsage || !strings.Contains(fmt.Sprint(err), "dashboard.password_file") || !strings.Contains(fmt.Sprint(err), "--insecure-no-auth") {
		t.Errorf("dashboard --addr 0.0.0.0:0 without a password: exit %d, want %d naming the keys: %v", code, exitUsage, err)
	}
	code, out := runCLI(t, "dashboard", "--help")
	for _, want := range []string{"--breaker-metrics-url", "backflow_moderation_breaker_state", "/api/panels", "--range",
		"--insecure-no-auth", "--password-file", "BACKFLOW_DASHBOARD_PASSWORD"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("dashboard --help (exit %d) does not mention %q", code, want)
		}
	}
}

// TestDashboardCommandServes runs `backflow dashboard` against the stack on a free port: it
// answers the health strip with every default group's lag from Kafka, and exits 0 on its
// context's end (SIGTERM).
func TestDashboardCommandServes(t *testing.T) {
	testenv.Integration(t)
	for _, k := range []string{testenv.KafkaBrokers, testenv.ClickHouseAddr} {
		if v := testenv.Get(k); v != "" {
			t.Setenv(k, v)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var out bytes.Buffer
	root := newRootCmd()
	root.SetOut(&out)
	root.SetArgs([]string{"dashboard", "--addr", addr, "--range", "7d"})
	done := make(chan int, 1)
	go func() { done <- classify(root.ExecuteContext(ctx)) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/api/health?range=15m")
		if err == nil {
			var h struct {
				Lag []struct{ Group, State, Error string }
			}
			err = json.NewDecoder(resp.Body).Decode(&h)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK || len(h.Lag) != 4 || h.Lag[0].Group != "backflow-ingest" {
				t.Fatalf("health: %d %+v %v, want the lag of the 4 default groups", resp.StatusCode, h, err)
			}
			// A fresh cluster answers group requests only once its offsets topic is up, so
			// the first polls may say "unknown" (with Kafka's error); the state must settle.
			if h.Lag[0].State != "unknown" {
				// --range 7d and ?range=7d take days, in the config's one duration form.
				var l struct {
					RangeS int64 `json:"range_s"`
				}
				resp, err := http.Get("http://" + addr + "/api/panels")
				if err != nil {
					t.Fatal(err)
				}
				err = json.NewDecoder(resp.Body).Decode(&l)
				resp.Body.Close()
				if err != nil || l.RangeS != 7*24*3600 {
					t.Fatalf("--range 7d: the page opens with %d s (%v), want 604800", l.RangeS, err)
				}
				if resp, err = http.Get("http://" + addr + "/api/health?range=7d"); err != nil || resp.StatusCode != http.StatusOK {
					t.Fatalf("/api/health?range=7d: %v %v, want 200", resp, err)
				}
				resp.Body.Close()
				break
			}
			err = fmt.Errorf("health still unknown: %+v", h.Lag)
		}
		select {
		case code := <-done:
			t.Fatalf("dashboard exited %d before serving: %s", code, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("dashboard did not answer on %s: %v", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	stop()
	if code := <-done; code != exitOK || !strings.Contains(out.String(), "dashboard: http://"+addr+"/") {
		t.Fatalf("exit %d, output %q", code, out.String())
	}
}

// TestDashboardAddrInUse: on an address another process holds, dashboard fails before it says
// it serves, naming --addr. Before, it printed "dashboard: http://…" and "dashboard serving",
// then failed to bind.
func TestDashboardAddrInUse(t *testing.T) {
	testenv.Integration(t)
	for _, k := range []string{testenv.KafkaBrokers, testenv.ClickHouseAddr} {
		if v := testenv.Get(k); v != "" {
			t.Setenv(k, v)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, errOut, err := execRoot(ctx, "dashboard", "--addr", ln.Addr().String())
	if code := classify(err); code != exitFailure || strings.Contains(out, "dashboard: http") || strings.Contains(errOut, "dashboard serving") ||
		!strings.Contains(fmt.Sprint(err), "--addr "+ln.Addr().String()+" cannot be bound") || !strings.Contains(fmt.Sprint(err), "address already in use") {
		t.Fatalf("exit %d, err %v\nstdout %q\nstderr %q\nwant exit %d naming --addr, and nothing saying it serves", code, err, out, errOut, exitFailure)
	}
}
