package alerts_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/backflowhq/backflow/internal/alerts"
	"github.com/backflowhq/backflow/test/testenv"
)

func TestConnValidate(t *testing.T) {
	for _, tt := range []struct {
		name, url string
		timeout   time.Duration
		wantErr   string
	}{
		{name: "none", url: ""},
		{name: "http", url: "http://127.0.0.1:19090"},
		{name: "https with a path", url: "https://prom.example.com/prometheus/"},
		{name: "not http", url: "ftp://127.0.0.1:19090", wantErr: "want an http:// or https:// URL"},
		{name: "no scheme", url: "127.0.0.1:19090", wantErr: "url: parse"},
		{name: "no host", url: "http://", wantErr: "has no host"},
		{name: "negative timeout", url: "http://a", timeout: -time.Second, wantErr: "timeout: -1s is negative"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := alerts.Conn{URL: tt.url, Timeout: tt.timeout}.Validate()
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Validate() = %v, want %q", err, tt.wantErr)
			}
		})
	}
	if _, err := alerts.New(alerts.Conn{}); !errors.Is(err, alerts.ErrNoURL) {
		t.Fatalf("New without a URL: %v, want ErrNoURL", err)
	}
}

// TestFiringFromPrometheus: against a real Prometheus, Firing returns the firing alert with
// its name, labels and annotations, and not the pending one; Active returns both, firing first.
func TestFiringFromPrometheus(t *testing.T) {
	testenv.Integration(t)
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, []byte(`groups:
  - name: test
    rules:
      - alert: TestFiring
        expr: vector(3)
        labels: {severity: warning}
        annotations: {summary: "three is {{ $value }}"}
      - alert: TestPending
        expr: vector(1)
        for: 1h
`), 0o600); err != nil {
		t.Fatal(err)
	}
	p := testenv.StartPrometheus(t, testenv.PrometheusOptions{Rules: rules})
	c := p.Alerts(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		active, err := c.Active(ctx)
		if err == nil && len(active) == 2 {
			if active[0].Name != "TestFiring" || active[0].State != "firing" || active[1].Name != "TestPending" || active[1].State != "pending" {
				t.Fatalf("active: %+v", active)
			}
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no two active alerts in a minute: %v %+v", err, active)
		case <-time.After(200 * time.Millisecond):
		}
	}
	firing, err := c.Firing(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(firing) != 1 || firing[0].Labels["severity"] != "warning" || firing[0].Annotations["summary"] != "three is 3" || firing[0].ActiveAt.IsZero() {
		t.Fatalf("firing: %+v", firing)
	}

	// A URL where nothing answers is an error, not an empty list.
	down, err := alerts.New(alerts.Conn{URL: "http://127.0.0.1:" + strconv.Itoa(testenv.FreePort(t)), Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if a, err := down.Firing(ctx); err == nil {
		t.Fatalf("Firing against nothing: %v, no error", a)
	}
}
