package pipelines_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/backflowhq/backflow/pipelines"
	"github.com/backflowhq/backflow/test/testenv"
)

// TestCheckStack asks every service of the local stack for a real answer.
func TestCheckStack(t *testing.T) {
	testenv.Integration(t)
	cfg, err := pipelines.FromEnv(testenv.Get)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	results := pipelines.Check(ctx, cfg)
	want := []string{"kafka", "registry", "clickhouse", "redis", "sensitive-words"}
	if len(results) != len(want) {
		t.Fatalf("%d results, want %d", len(results), len(want))
	}
	for i, r := range results {
		if r.System != want[i] || r.Err != nil || r.Detail == "" {
			t.Errorf("result %d: %+v, want %s answering with a detail", i, r, want[i])
		}
	}
}

// TestCheckReportsDown points every system at a closed port: each must be reported down.
func TestCheckReportsDown(t *testing.T) {
	testenv.Integration(t)
	closed := "127.0.0.1:1" // nothing listens on port 1 here
	cfg, err := pipelines.FromEnv(func(k string) string {
		switch k {
		case "BACKFLOW_KAFKA_BROKERS", "BACKFLOW_CLICKHOUSE_ADDR", "BACKFLOW_REDIS_ADDR":
			return closed
		case "BACKFLOW_REGISTRY_URL", "BACKFLOW_SENSITIVE_WORDS_URL":
			return "http://" + closed
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, r := range pipelines.Check(ctx, cfg) {
		if r.Err == nil {
			t.Errorf("%s at %s reported up: %q", r.System, r.Address, r.Detail)
		}
	}
}

// TestPreflightRefusesAMisaddressedRegistry: a registry URL with a wrong path (the real
// registry answers 404 to its subject list there) showed as DOWN, and the stages waited for
// it forever. It is a configuration error: Preflight refuses to start, naming the URL variable.
func TestPreflightRefusesAMisaddressedRegistry(t *testing.T) {
	testenv.Integration(t)
	u, err := url.Parse(testenv.Get(testenv.RegistryURL))
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/wrong/path"
	cfg, err := pipelines.FromEnv(func(k string) string {
		if k == "BACKFLOW_REGISTRY_URL" {
			return u.String()
		}
		return testenv.Get(k)
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	results, err := pipelines.Preflight(ctx, cfg, 0, pipelines.SystemRegistry)
	if !errors.Is(err, pipelines.ErrRefused) || !strings.Contains(err.Error(), "BACKFLOW_REGISTRY_URL") || !strings.Contains(err.Error(), "HTTP 404") {
		t.Fatalf("Preflight = %v, want a refusal naming BACKFLOW_REGISTRY_URL", err)
	}
	if len(results) != 1 || !errors.Is(results[0].Err, pipelines.ErrMisaddressed) {
		t.Fatalf("results %+v, want the registry misaddressed", results)
	}
	// The right path still answers.
	if _, err := pipelines.Preflight(ctx, func() pipelines.Conns { c, _ := pipelines.FromEnv(testenv.Get); return c }(), 0, pipelines.SystemRegistry); err != nil {
		t.Fatalf("the stack's own registry URL: %v", err)
	}
}
