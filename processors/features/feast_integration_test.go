package features_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/backflowhq/backflow/internal/feast"
	"github.com/backflowhq/backflow/processors/features"
	"github.com/backflowhq/backflow/sinks/redis"
	"github.com/backflowhq/backflow/test/testenv"
)

// TestFeastReadsOurLayout writes request, tenant, user and model rows with the sink's writer, then
// reads them back through Feast's own SDK (get_online_features) and compares every value.
func TestFeastReadsOurLayout(t *testing.T) {
	testenv.Integration(t)
	python, repo := testenv.FeastSetup(t, "", "")
	feastReadsOurLayout(t, redis.Conn{Addr: testenv.Get(testenv.RedisAddr)}, python, repo)
}

// TestFeastReadsOurLayoutOnRedisCluster is TestFeastReadsOurLayout on a Redis Cluster: the sink
// writes through a ClusterClient (its pipelines split per node by slot), and Feast reads with
// redis_type: redis_cluster. The keys must land on more than one master, or the cluster
// proved nothing.
func TestFeastReadsOurLayoutOnRedisCluster(t *testing.T) {
	testenv.Integration(t)
	cl := testenv.Cluster(t)
	seeds := cl.List(testenv.ClusterRedisAddrs)
	python, repo := testenv.FeastSetup(t, "", t.TempDir(), "BACKFLOW_REDIS_MODE=cluster", "BACKFLOW_REDIS_ADDRS="+strings.Join(seeds, ","))
	rcfg := redis.Conn{Mode: redis.ModeCluster, Addrs: seeds}
	run := feastReadsOurLayout(t, rcfg, python, repo)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rdb, err := redis.Open(ctx, rcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	cc, ok := rdb.(*goredis.ClusterClient)
	if !ok {
		t.Fatalf("redis.Open in cluster mode gave %T, want *redis.ClusterClient", rdb)
	}
	var mu sync.Mutex
	perMaster := map[string]int{}
	if err := cc.ForEachMaster(ctx, func(ctx context.Context, node *goredis.Client) error {
		keys, err := node.Keys(ctx, "*"+run+"*").Result()
		mu.Lock()
		perMaster[node.Options().Addr] = len(keys)
		mu.Unlock()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	used, total := 0, 0
	for _, n := range perMaster {
		total += n
		if n > 0 {
			used++
		}
	}
	t.Logf("keys per master: %v", perMaster)
	if total != 8 || used < 2 {
		t.Fatalf("keys per master %v: want the test's 8 keys on 2 or more masters", perMaster)
	}
}

// feastReadsOurLayout writes rows through the sink's writer on rcfg and reads them back with
// Feast (python, repo), comparing every value. It returns the run id in every key it wrote
// (3 requests, 2 tenants, 2 users, 1 model).
func feastReadsOurLayout(t *testing.T, rcfg redis.Conn, python, repo string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rdb, err := redis.Open(ctx, rcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	w := redis.NewWriter(rdb, redis.Config{})
	wctx, wstop := context.WithCancel(ctx)
	defer wstop()
	go w.Run(wctx)

	run := testenv.ID("feast-it-") // in every entity id, so in every key written
	testenv.RedisKeys(t, rcfg, "*"+run+"*")
	ts := time.Now().UTC().Truncate(time.Second)
	var ops []feast.Op
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
	// tenant-a is built from deltas, so it has windows: 10 requests of 100 tokens, 3 of them
	// flagged (at 0, 2 h and 30 h before ts). The 1h window as of ts holds the 3 requests of the
	// last 50 minutes (1 flagged), the 24h window the 7 of the last 23 hours (2 flagged).
	var tenantA *features.TenantState
	for i, ago := range []time.Duration{0, 10 * time.Minute, 50 * time.Minute, 2 * time.Hour, 5 * time.Hour, 20 * time.Hour, 23 * time.Hour, 26 * time.Hour, 30 * time.Hour, 40 * time.Hour} {
		at := ts.Add(-ago)
		d := &features.Delta{From: features.Pos{Partition: 0, Offset: int64(i)}, Count: true, Tokens: 100, EventTime: at}
		if i == 0 || i == 3 || i == 8 {
			d.Flag, d.FlagAt = true, at
		}
		tenantA, _ = features.ApplyTenant(tenantA, d)
	}
	tenants := map[string]*features.TenantState{
		run + "-tenant-a": tenantA,
		run + "-tenant-b": {RequestCount: 0, LastSeen: ts},
	}
	wantWin := map[string][]float64{ // tenant -> request_count_1h, flagged_count_1h, flagged_ratio_1h, tokens_1h, then _24h
		run + "-tenant-a": {3, 1, 1.0 / 3, 300, 7, 2, 2.0 / 7, 700},
		run + "-tenant-b": {0, 0, 0, 0, 0, 0, 0, 0},
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
	// The model from deltas too: latencies 100, 200, 300, 5000 ms at 0, 20 min, 3 h and 30 h
	// before ts, errors at 20 min and 30 h.
	mid := run + "-model"
	var mst *features.ModelState
	for i, c := range []struct {
		ago     time.Duration
		latency int64
		err     bool
	}{{0, 100, false}, {20 * time.Minute, 200, true}, {3 * time.Hour, 300, false}, {30 * time.Hour, 5000, true}} {
		mst, _ = features.ApplyModel(mst, &features.Delta{From: features.Pos{Partition: 0, Offset: int64(i)}, Count: true, Error: c.err, LatencyMs: c.latency, EventTime: ts.Add(-c.ago)})
	}
	op := features.ModelOp("backflow", mid, mst)
	ops = append(ops, op)
	keys = append(keys, op.Key)
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
	got := testenv.FeastReadOnline(t, python, repo, []string{"request_features:risk_score", "request_features:verdict", "request_features:categories",
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
	windowed := []string{"request_count_1h", "flagged_count_1h", "flagged_ratio_1h", "tokens_1h",
		"request_count_24h", "flagged_count_24h", "flagged_ratio_24h", "tokens_24h"}
	feats := []string{"tenant_features:request_count", "tenant_features:flagged_count",
		"tenant_features:flagged_ratio", "tenant_features:tokens", "tenant_features:last_seen"}
	for _, f := range windowed {
		feats = append(feats, "tenant_features:"+f)
	}
	got = testenv.FeastReadOnline(t, python, repo, feats, rows)
	t.Logf("tenant_features via Feast: %v", got)
	for i, id := range ids[:2] {
		for j, f := range windowed {
			if v, ok := got[f][i].(float64); !ok || math.Abs(v-wantWin[id][j]) > 1e-12 {
				t.Errorf("%s %s = %v, want %v", id, f, got[f][i], wantWin[id][j])
			}
		}
	}
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
	got = testenv.FeastReadOnline(t, python, repo, []string{"user_features:request_count", "user_features:flagged_count",
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
	mwant := map[string]float64{"request_count": 4, "error_count": 2, "latency_avg_ms": 1400, "latency_max_ms": 5000, "latency_p95_ms": 5000,
		"last_seen":        float64(ts.Unix()),
		"request_count_1h": 2, "error_count_1h": 1, "latency_avg_ms_1h": 150, "latency_p95_ms_1h": 200, "latency_max_ms_1h": 200,
		"request_count_24h": 3, "error_count_24h": 1, "latency_avg_ms_24h": 200, "latency_p95_ms_24h": 300, "latency_max_ms_24h": 300}
	feats = nil
	for f := range mwant {
		feats = append(feats, "model_features:"+f)
	}
	got = testenv.FeastReadOnline(t, python, repo, feats, []map[string]any{{"model": mid}})
	t.Logf("model_features via Feast: %v", got)
	for f, want := range mwant {
		if v, ok := got[f][0].(float64); !ok || v != want {
			t.Errorf("model %s = %v, want %v", f, got[f][0], want)
		}
	}
	return run
}
