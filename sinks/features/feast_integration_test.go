package features_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/backflowhq/backflow/internal/testenv"
	"github.com/backflowhq/backflow/sinks/features"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// feastSetup runs deploy/feast/setup.sh (venv with the pinned Feast, feast apply against the
// stack's Redis) and returns the venv's python and the applied repo. A venv that cannot be
// built fails the test.
// project "" keeps the yaml's; repoDir "" renders into the stack folder.
func feastSetup(t *testing.T, project, repoDir string) (python, repo string) {
	t.Helper()
	root := repoRoot(t)
	stack := os.Getenv("BACKFLOW_STACK_DIR")
	if stack == "" {
		stack = filepath.Join(root, ".stack")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "deploy", "feast", "setup.sh"))
	cmd.Env = append(os.Environ(), "BACKFLOW_REDIS_ADDR="+testenv.Get(testenv.RedisAddr))
	if project != "" {
		cmd.Env = append(cmd.Env, "BACKFLOW_FEAST_PROJECT="+project)
	}
	if repoDir != "" {
		cmd.Env = append(cmd.Env, "BACKFLOW_FEAST_REPO_DIR="+repoDir)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("deploy/feast/setup.sh failed (%v) after %v:\n%s", err, time.Since(start), stderr.String())
	}
	t.Logf("setup.sh took %v", time.Since(start).Round(time.Millisecond))
	return filepath.Join(stack, "feast-venv", "bin", "python"), string(bytes.TrimSpace(out))
}

func readOnline(t *testing.T, python, repo string, feats []string, rows []map[string]any) map[string][]any {
	t.Helper()
	req, _ := json.Marshal(map[string]any{"features": feats, "entity_rows": rows})
	cmd := exec.Command(python, filepath.Join(repoRoot(t), "deploy", "feast", "read_online.py"), repo)
	cmd.Stdin = bytes.NewReader(req)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("read_online.py: %v\n%s", err, stderr.String())
	}
	var got map[string][]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("read_online.py output %q: %v", out, err)
	}
	return got
}

// TestFeastReadsOurLayout writes request, tenant, user and model rows with the sink's writer, then
// reads them back through Feast's own SDK (get_online_features) and compares every value.
func TestFeastReadsOurLayout(t *testing.T) {
	testenv.Integration(t)
	python, repo := feastSetup(t, "", "")

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rdb, err := features.Open(ctx, features.Config{Addr: testenv.Get(testenv.RedisAddr)})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	w := features.NewWriter(rdb, features.WriterConfig{})
	wctx, wstop := context.WithCancel(ctx)
	defer wstop()
	go w.Run(wctx)

	run := fmt.Sprintf("feast-it-%d", time.Now().UnixNano())
	ts := time.Now().UTC().Truncate(time.Second)
	var ops []features.Op
	var keys []string
	type reqRow struct {
		id string
		st features.RequestState
	}
	var reqs []reqRow
	for i := 0; i < 3; i++ {
		st := features.RequestState{Model: fmt.Sprintf("model-%d", i), RiskScore: float32(i) * 0.25, Verdict: []string{"ALLOW", "REVIEW", "BLOCK"}[i],
			Categories: []string{"pii", "violence"}[:i], LatencyMs: int64(100 + i), TotalTokens: int64(1000 * i), EventTime: ts}
		id := fmt.Sprintf("%s-req-%d", run, i)
		reqs = append(reqs, reqRow{id, st})
		op := features.RequestOp("backflow", id, &st, time.Hour)
		ops = append(ops, op)
		keys = append(keys, op.Key)
	}
	tenants := map[string]*features.TenantState{
		run + "-tenant-a": {RequestCount: 10, FlaggedCount: 3, Tokens: 12345, LastSeen: ts},
		run + "-tenant-b": {RequestCount: 0, LastSeen: ts},
	}
	for id, st := range tenants {
		op := features.TenantOp("backflow", id, st)
		ops = append(ops, op)
		keys = append(keys, op.Key)
	}
	// Users: the same user id in two tenants is two rows.
	type userRow struct {
		tenant, user string
		st           features.UserState
	}
	users := []userRow{
		{run + "-tenant-a", "user-00001", features.UserState{RequestCount: 4, FlaggedCount: 1, Tokens: 900, LastSeen: ts}},
		{run + "-tenant-b", "user-00001", features.UserState{RequestCount: 2, FlaggedCount: 2, Tokens: 55, LastSeen: ts}},
	}
	for _, u := range users {
		op := features.UserOp("backflow", u.tenant, u.user, &u.st)
		ops = append(ops, op)
		keys = append(keys, op.Key)
	}
	mid := run + "-model"
	mst := &features.ModelState{RequestCount: 4, ErrorCount: 1, LatencySumMs: 410, LatencyMaxMs: 200, LastSeen: ts}
	op := features.ModelOp("backflow", mid, mst)
	ops = append(ops, op)
	keys = append(keys, op.Key)
	t.Cleanup(func() { rdb.Del(context.Background(), keys...) })
	if err := w.Write(ctx, ops...); err != nil {
		t.Fatal(err)
	}
	if ttl := rdb.TTL(ctx, keys[0]).Val(); ttl <= 59*time.Minute {
		t.Fatalf("request key ttl = %v, want ~1h", ttl)
	}

	// Requests.
	var rows []map[string]any
	for _, r := range reqs {
		rows = append(rows, map[string]any{"request_id": r.id})
	}
	got := readOnline(t, python, repo, []string{"request_features:risk_score", "request_features:verdict", "request_features:categories",
		"request_features:latency_ms", "request_features:total_tokens", "request_features:model"}, rows)
	t.Logf("request_features via Feast: %v", got)
	for i, r := range reqs {
		if v := got["risk_score"][i].(float64); math.Abs(v-float64(r.st.RiskScore)) > 1e-6 {
			t.Errorf("%s risk_score = %v, want %v", r.id, v, r.st.RiskScore)
		}
		if got["verdict"][i] != r.st.Verdict || got["model"][i] != r.st.Model {
			t.Errorf("%s verdict/model = %v/%v", r.id, got["verdict"][i], got["model"][i])
		}
		if got["latency_ms"][i].(float64) != float64(r.st.LatencyMs) || got["total_tokens"][i].(float64) != float64(r.st.TotalTokens) {
			t.Errorf("%s latency/tokens = %v/%v", r.id, got["latency_ms"][i], got["total_tokens"][i])
		}
		cats, _ := got["categories"][i].([]any)
		if len(cats) != len(r.st.Categories) {
			t.Errorf("%s categories = %v, want %v", r.id, got["categories"][i], r.st.Categories)
		}
		for j := range cats {
			if cats[j] != r.st.Categories[j] {
				t.Errorf("%s categories = %v, want %v", r.id, cats, r.st.Categories)
			}
		}
	}

	// Tenants.
	ids := []string{run + "-tenant-a", run + "-tenant-b", run + "-tenant-missing"}
	rows = nil
	for _, id := range ids {
		rows = append(rows, map[string]any{"tenant_id": id})
	}
	got = readOnline(t, python, repo, []string{"tenant_features:request_count", "tenant_features:flagged_count",
		"tenant_features:flagged_ratio", "tenant_features:tokens", "tenant_features:last_seen"}, rows)
	t.Logf("tenant_features via Feast: %v", got)
	for i, id := range ids[:2] {
		st := tenants[id]
		ratio := 0.0
		if st.RequestCount > 0 {
			ratio = float64(st.FlaggedCount) / float64(st.RequestCount)
		}
		if got["request_count"][i].(float64) != float64(st.RequestCount) || got["flagged_count"][i].(float64) != float64(st.FlaggedCount) ||
			got["tokens"][i].(float64) != float64(st.Tokens) || got["flagged_ratio"][i].(float64) != ratio {
			t.Errorf("%s: got %v %v %v %v, want %+v", id, got["request_count"][i], got["flagged_count"][i], got["tokens"][i], got["flagged_ratio"][i], st)
		}
		if got["last_seen"][i].(float64) != float64(ts.Unix()) {
			t.Errorf("%s last_seen = %v, want %d", id, got["last_seen"][i], ts.Unix())
		}
	}
	if got["request_count"][2] != nil {
		t.Errorf("missing tenant request_count = %v, want null", got["request_count"][2])
	}

	// Users, by (tenant_id, user_id); the last pair does not exist.
	rows = nil
	for _, u := range users {
		rows = append(rows, map[string]any{"tenant_id": u.tenant, "user_id": u.user})
	}
	rows = append(rows, map[string]any{"tenant_id": run + "-tenant-missing", "user_id": "user-00001"})
	got = readOnline(t, python, repo, []string{"user_features:request_count", "user_features:flagged_count",
		"user_features:flagged_ratio", "user_features:tokens", "user_features:last_seen"}, rows)
	t.Logf("user_features via Feast: %v", got)
	for i, u := range users {
		ratio := float64(u.st.FlaggedCount) / float64(u.st.RequestCount)
		if got["request_count"][i].(float64) != float64(u.st.RequestCount) || got["flagged_count"][i].(float64) != float64(u.st.FlaggedCount) ||
			got["tokens"][i].(float64) != float64(u.st.Tokens) || got["flagged_ratio"][i].(float64) != ratio ||
			got["last_seen"][i].(float64) != float64(ts.Unix()) {
			t.Errorf("%s/%s: got %v %v %v %v %v, want %+v", u.tenant, u.user, got["request_count"][i], got["flagged_count"][i],
				got["tokens"][i], got["flagged_ratio"][i], got["last_seen"][i], u.st)
		}
	}
	if got["request_count"][2] != nil {
		t.Errorf("missing user request_count = %v, want null", got["request_count"][2])
	}

	// Model.
	got = readOnline(t, python, repo, []string{"model_features:request_count", "model_features:error_count",
		"model_features:latency_avg_ms", "model_features:latency_max_ms"}, []map[string]any{{"model": mid}})
	t.Logf("model_features via Feast: %v", got)
	if got["request_count"][0].(float64) != 4 || got["error_count"][0].(float64) != 1 || got["latency_avg_ms"][0].(float64) != 102.5 || got["latency_max_ms"][0].(float64) != 200 {
		t.Errorf("model row = %v", got)
	}
}
