package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/backflowhq/backflow/test/testenv"
)

// TestOutputFormatsOnTheStack: groups, replay status and the replay plan print the same group
// as tables and as json/yaml documents, with the same names and the same offsets: a group that
// committed 3 of 10 records on each of two partitions.
func TestOutputFormatsOnTheStack(t *testing.T) {
	testenv.Integration(t)
	kcfg := testenv.Kafka(t, "output-test")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t.Setenv("BACKFLOW_KAFKA_BROKERS", kcfg.Endpoint())
	topic, group := laggingGroup(t, ctx, kcfg, "output")
	run := func(args ...string) string {
		t.Helper()
		code, out, errOut := runDLQ(t, ctx, args...)
		if code != exitOK {
			t.Fatalf("%v: exit %d\nstdout:\n%s\nstderr:\n%s", args, code, out, errOut)
		}
		return out
	}
	checkPartitions := func(what string, ps []partitionRow) {
		t.Helper()
		if len(ps) != 2 {
			t.Fatalf("%s: %d partitions, want 2: %+v", what, len(ps), ps)
		}
		for i, p := range ps {
			if p.Topic != topic || p.Partition != int32(i) || p.CurrentOffset != 3 || p.LogEndOffset != 10 || p.Lag != 7 {
				t.Errorf("%s: partition %d = %+v, want current 3, log end 10, lag 7", what, i, p)
			}
		}
	}

	var groups []groupDoc
	if err := json.Unmarshal([]byte(run("groups", "-o", "json", group)), &groups); err != nil || len(groups) != 1 {
		t.Fatalf("groups -o json: %v, %+v", err, groups)
	}
	g := groups[0]
	if g.Group != group || g.State != "Empty" || g.Lag != 14 || len(g.Topics) != 1 || g.Topics[0].CurrentOffset != 6 || g.Topics[0].LogEndOffset != 20 {
		t.Errorf("groups -o json: %+v", g)
	}
	checkPartitions("groups -o json", g.Partitions)
	// members has one shape: the list of live members, at group level only. Before, it was a
	// list at group level and a number inside topics.
	var raw []map[string]any
	if err := json.Unmarshal([]byte(run("groups", "-o", "json", group)), &raw); err != nil || len(raw) != 1 {
		t.Fatalf("groups -o json: %v", err)
	}
	if m, ok := raw[0]["members"].([]any); !ok || len(m) != 0 {
		t.Errorf("groups -o json: members %#v, want an empty list", raw[0]["members"])
	}
	for _, tp := range raw[0]["topics"].([]any) {
		if m, ok := tp.(map[string]any)["members"]; ok {
			t.Errorf("groups -o json: a topic carries members %#v", m)
		}
	}
	// groups' errors are its own: a group Kafka does not know is named, with what lists them.
	missing := testenv.ID("output-missing-")
	if _, _, err := execRoot(ctx, "groups", missing); classify(err) != exitFailure ||
		!strings.HasPrefix(fmt.Sprint(err), "groups: group "+missing+": Kafka knows no such group") {
		t.Errorf("groups %s: exit %d, %v; want exit 1 with a groups: error naming the group", missing, classify(err), err)
	}

	var st statusDoc
	if err := yaml.Unmarshal([]byte(run("replay", "status", "--group", group, "--control-topic", testenv.ID("output-control-"), "-o", "yaml")), &st); err != nil {
		t.Fatalf("replay status -o yaml: %v", err)
	}
	checkPartitions("replay status -o yaml", st.Partitions)
	if st.Progress.Lag != 14 || st.Progress.Total != 14 || st.Since != "since now" {
		t.Errorf("replay status -o yaml: %+v", st)
	}

	var plan planDoc
	if err := json.Unmarshal([]byte(run("replay", "--group", group, "--topic", topic, "--to-earliest", "-o", "json")), &plan); err != nil {
		t.Fatalf("replay -o json: %v", err)
	}
	if plan.Group != group || !plan.Exists || plan.Reread != 6 || len(plan.Partitions) != 2 {
		t.Fatalf("replay -o json: %+v", plan)
	}
	for _, p := range plan.Partitions {
		if p.CurrentOffset != 3 || p.NewOffset != 0 || p.Reread == nil || *p.Reread != 3 || p.LagAfter != 10 {
			t.Errorf("plan partition %+v", p)
		}
	}

	// The tables say the same under the same names.
	for _, out := range []string{run("groups", group, "--partitions"), run("replay", "status", "--group", group, "--control-topic", testenv.ID("output-control-"))} {
		if !strings.Contains(out, "CURRENT-OFFSET") || !strings.Contains(out, "LOG-END-OFFSET") || strings.Contains(out, "COMMITTED") {
			t.Errorf("table headers:\n%s", out)
		}
	}
	if out := run("replay", "--group", group, "--topic", topic, "--to-earliest"); !strings.Contains(out, "NEW-OFFSET") || !strings.Contains(out, "6 record(s) to re-read") {
		t.Errorf("plan table:\n%s", out)
	}
}

// TestPingMisaddressedOnTheStack: ping with ClickHouse pointed at its HTTP port, or Kafka at
// Redis' port, says MISADDRESSED and names the variable, as the registry's wrong path does;
// before, both said DOWN after the timeout.
func TestPingMisaddressedOnTheStack(t *testing.T) {
	testenv.Integration(t)
	httpAddr, redisAddr := testenv.Get("BACKFLOW_CLICKHOUSE_HTTP_ADDR"), testenv.Get(testenv.RedisAddr)
	if httpAddr == "" || redisAddr == "" {
		t.Fatal("the stack's env file names no ClickHouse HTTP or Redis address")
	}
	t.Setenv("BACKFLOW_CLICKHOUSE_ADDR", httpAddr)
	t.Setenv("BACKFLOW_KAFKA_BROKERS", redisAddr)
	for _, k := range []string{"BACKFLOW_REGISTRY_URL", "BACKFLOW_REDIS_ADDR", "BACKFLOW_SENSITIVE_WORDS_URL"} {
		t.Setenv(k, testenv.Get(k))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code, out, _ := runDLQ(t, ctx, "ping", "--timeout", "30s", "-o", "json")
	var rows []pingRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil || code != exitFailure {
		t.Fatalf("ping: exit %d, %v\n%s", code, err, out)
	}
	want := map[string]string{
		"kafka":      "answers as Redis, not as kafka: check BACKFLOW_KAFKA_BROKERS",
		"clickhouse": "answers as an HTTP server, not as clickhouse; this looks like ClickHouse's HTTP port",
	}
	for _, r := range rows {
		w, ok := want[r.System]
		switch {
		case ok && (r.State != "MISADDRESSED" || !strings.Contains(r.Detail, w)):
			t.Errorf("%s at %s: %s %q, want MISADDRESSED saying %q", r.System, r.Address, r.State, r.Detail, w)
		case !ok && r.State != "ok":
			t.Errorf("%s: %s %q, want ok", r.System, r.State, r.Detail)
		}
	}
}
