package pipelines_test

import (
	"context"
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
