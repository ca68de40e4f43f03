package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/backflowhq/backflow/internal/alerts"
	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/test/testenv"
	"github.com/backflowhq/backflow/tools/loadgen"
)

// shippedRulesFaster returns the path of a copy of deploy/prometheus/rules.yaml in which only
// alert's for: and the threshold of its expression are changed (threshold old → new must occur
// once), so a test proves the shipped expression in seconds rather than the shipped minutes.
func shippedRulesFaster(t *testing.T, alert, forDur, old, new string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "deploy", "prometheus", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	// value returns the value node of key in mapping m.
	value := func(m *yaml.Node, key string) *yaml.Node {
		for i := 0; i+1 < len(m.Content); i += 2 {
			if m.Content[i].Value == key {
				return m.Content[i+1]
			}
		}
		return nil
	}
	found := 0
	for _, g := range value(doc.Content[0], "groups").Content {
		for _, r := range value(g, "rules").Content {
			if a := value(r, "alert"); a == nil || a.Value != alert {
				continue
			}
			found++
			expr := value(r, "expr")
			if n := strings.Count(expr.Value, old); n != 1 {
				t.Fatalf("%s: %q occurs %d times in its expression, want once:\n%s", alert, old, n, expr.Value)
			}
			expr.Value = strings.Replace(expr.Value, old, new, 1)
			value(r, "for").Value = forDur
		}
	}
	if found != 1 {
		t.Fatalf("%d rules named %s in rules.yaml, want 1", found, alert)
	}
	out, err := yaml.Marshal(&doc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestLagAlertFiresAndResolves stops sink-clickhouse while traffic flows and waits until a real
// Prometheus (Debian's, evaluating the shipped rules every second) has BackflowConsumerLagHigh
// firing for the sink's group, with its labels and summary; then starts the sink again and waits
// until the alert is gone. The shipped rule's expression is used as it is, except its threshold
// (10000 records → 300) and for: (10m → 5s). The sink's lag is exported, while the sink is down,
// by the ingest process, which names the sink's group in metrics.lag_groups.
func TestLagAlertFiresAndResolves(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	e := newPipelineEnv(t, ctx)
	bin := testenv.Build(t, "cmd/backflow")
	ingestCfg := e.config(t, "ingest", map[string]string{"metrics": "lag_groups: [" + e.SinkGroup + "]"})
	sinkCfg := e.config(t, "sink-clickhouse", nil)
	ingestAddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	sinkAddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))

	rules := shippedRulesFaster(t, "BackflowConsumerLagHigh", "5s", "> 10000", "> 300")
	prom := testenv.StartPrometheus(t, testenv.PrometheusOptions{Rules: rules, Targets: map[string][]string{"backflow": {ingestAddr, sinkAddr}}})
	client := prom.Alerts(t)

	e.SourceTopics(t, ctx, 3)
	ingest := startRun(t, bin, e.vars, "run", "--config", ingestCfg, "--metrics-addr", ingestAddr)
	ingest.base(ctx)
	sink := startRun(t, bin, e.vars, "run", "--config", sinkCfg, "--metrics-addr", sinkAddr)
	sink.base(ctx)

	// Traffic for the whole test, ended when it returns.
	loadCtx, stopLoad := context.WithCancel(ctx)
	loadDone := make(chan struct{})
	var loadErr error // set once loadDone is closed
	go func() {
		defer close(loadDone)
		// loadgen waits out a registry overloaded while the whole suite starts.
		_, _, loadErr = e.TryLoad(loadCtx, loadgen.Config{Duration: 6 * time.Minute, Rate: 100, Seed: 19})
	}()
	defer func() { stopLoad(); <-loadDone }()

	// The ingest process exports the sink's lag once the sink has committed.
	deadline := time.Now().Add(2 * time.Minute)
	for sum(scrape(t, "http://"+ingestAddr), kafka.MetricConsumerCommitted, map[string]string{"group": e.SinkGroup}) <= 0 {
		if time.Now().After(deadline) {
			load := "loadgen still sending"
			select {
			case <-loadDone:
				load = fmt.Sprintf("loadgen ended: %v", loadErr)
			default:
			}
			t.Fatalf("the ingest process exports no committed offset of %s after 2 minutes (%s)\ningest's log:\n%s\nsink-clickhouse's log:\n%s",
				e.SinkGroup, load, ingest.log(), sink.log())
		}
		time.Sleep(500 * time.Millisecond)
	}
	if a := lagAlert(t, ctx, client, e.SinkGroup); len(a) != 0 {
		t.Fatalf("BackflowConsumerLagHigh is active while the sink runs: %+v", a)
	}

	if code := sink.signal(syscall.SIGTERM, 2*time.Minute); code != exitOK {
		t.Fatalf("sink-clickhouse exit code %d after SIGTERM:\n%s", code, sink.log())
	}
	stopped := time.Now()
	var firing []alerts.Alert
	for {
		active := lagAlert(t, ctx, client, e.SinkGroup)
		firing = firing[:0]
		for _, a := range active {
			if a.State == "firing" {
				firing = append(firing, a)
			}
		}
		if len(firing) > 0 {
			break
		}
		if time.Since(stopped) > 3*time.Minute {
			t.Fatalf("BackflowConsumerLagHigh not firing for %s 3 minutes after the sink stopped (active: %+v)", e.SinkGroup, active)
		}
		time.Sleep(250 * time.Millisecond)
	}
	fired := time.Since(stopped)
	a := firing[0]
	if a.Labels["severity"] != "critical" || a.Labels["topic"] != e.Ingest.EnrichedTopic || a.Labels["partition"] == "" ||
		!strings.HasPrefix(a.Annotations["summary"], "Consumer group "+e.SinkGroup+" is ") ||
		!strings.Contains(a.Annotations["summary"], " records behind on "+e.Ingest.EnrichedTopic+"/"+a.Labels["partition"]) ||
		a.Annotations["runbook"] != "docs/operations.md#backflowconsumerlaghigh" {
		t.Errorf("the firing alert: %+v", a)
	}
	t.Logf("BackflowConsumerLagHigh firing %.1f s after sink-clickhouse stopped (for: 5s, evaluated every 1 s): %s", fired.Seconds(), a.Annotations["summary"])

	sink = startRun(t, bin, e.vars, "run", "--config", sinkCfg, "--metrics-addr", sinkAddr)
	sink.base(ctx)
	restarted := time.Now()
	for {
		active := lagAlert(t, ctx, client, e.SinkGroup)
		if len(active) == 0 {
			break
		}
		if time.Since(restarted) > 3*time.Minute {
			t.Fatalf("BackflowConsumerLagHigh still active 3 minutes after the sink restarted: %+v", active)
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("BackflowConsumerLagHigh resolved %.1f s after sink-clickhouse started again", time.Since(restarted).Seconds())
}

// lagAlert returns the active BackflowConsumerLagHigh alerts of group.
func lagAlert(t *testing.T, ctx context.Context, c *alerts.Client, group string) []alerts.Alert {
	t.Helper()
	all, err := c.Active(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []alerts.Alert
	for _, a := range all {
		if a.Name == "BackflowConsumerLagHigh" && a.Labels["group"] == group {
			out = append(out, a)
		}
	}
	return out
}
