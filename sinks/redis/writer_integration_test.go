package redis_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/backflowhq/backflow/internal/feast"
	"github.com/backflowhq/backflow/processors/features"
	"github.com/backflowhq/backflow/sinks/redis"
	"github.com/backflowhq/backflow/test/faultproxy"
	"github.com/backflowhq/backflow/test/testenv"
)

// TestWriterRetriesWhileRedisDown: the writer's Redis is unreachable until it has retried three
// times. Jobs submitted
// meanwhile are neither dropped nor acknowledged; once Redis answers they land, in order, and
// their done callbacks run in submission order.
func TestWriterRetriesWhileRedisDown(t *testing.T) {
	testenv.Integration(t)
	target := testenv.Get(testenv.RedisAddr)
	px, err := faultproxy.New(faultproxy.Config{Target: target})
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	px.Set(faultproxy.Refuse) // down: nothing listens
	addr := px.Addr()
	rdb := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer rdb.Close()
	w := redis.NewWriter(rdb, redis.Config{MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, MaxBatch: 7})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go w.Run(ctx)

	key := testenv.ID("writer-it-")
	real := goredis.NewClient(&goredis.Options{Addr: target})
	defer real.Close()
	defer real.Del(context.Background(), key)
	const n = 50
	order := make(chan int, n)
	for i := 0; i < n; i++ {
		op := feast.Op{Key: key, Fields: map[string]any{fmt.Sprintf("f%02d", i): []byte{byte(i)}, "last": fmt.Sprint(i)}, TTL: time.Minute}
		if err := w.Submit(ctx, []feast.Op{op}, func(err error) {
			if err != nil {
				t.Errorf("job %d: %v", i, err)
			}
			order <- i
		}); err != nil {
			t.Fatal(err)
		}
	}
	// Down until the writer has failed and retried a few times (a state, not a pause that a
	// loaded machine may spend before the writer's first attempt).
	for w.Retries() < 3 {
		if ctx.Err() != nil {
			t.Fatalf("%d retries while Redis was down, want 3", w.Retries())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(order) != 0 {
		t.Fatalf("%d jobs acknowledged while Redis was down", len(order))
	}
	if err := px.Set(faultproxy.Forward); err != nil { // up again
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		select {
		case got := <-order:
			if got != i {
				t.Fatalf("done #%d was job %d", i, got)
			}
		case <-ctx.Done():
			t.Fatalf("only %d of %d jobs written", i, n)
		}
	}
	m, err := real.HGetAll(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != n+1 || m["last"] != fmt.Sprint(n-1) {
		t.Fatalf("hash has %d fields, last=%q; want %d, %d", len(m), m["last"], n+1, n-1)
	}
	if ttl := real.TTL(ctx, key).Val(); ttl <= 0 {
		t.Fatalf("ttl %v", ttl)
	}
	t.Logf("%d retries while down; %d ops written after Redis came back", w.Retries(), w.Written())
}

// TestWriterCoalescesOnRedis: 200 updates of one tenant and 100 of one model, interleaved with
// 100 request rows, submitted while the writer holds one pipeline open. Redis must end with the
// tenant's and the model's last rows byte for byte, every request row with its TTL, and the
// writer must have sent each hot key once per pipeline, not once per update.
func TestWriterCoalescesOnRedis(t *testing.T) {
	testenv.Integration(t)
	rdb := goredis.NewClient(&goredis.Options{Addr: testenv.Get(testenv.RedisAddr)})
	defer rdb.Close()
	// One pipeline for everything: 500 ops at most, and a linger long enough to submit them all.
	w := redis.NewWriter(rdb, redis.Config{MaxBatch: 500, Linger: 2 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go w.Run(ctx)

	project := testenv.ID("coalesce")
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var lastTenant, lastModel feast.Op
	var reqKeys []string
	var ops []feast.Op
	for i := 1; i <= 200; i++ {
		lastTenant = features.TenantOp(project, "t1", &features.TenantState{RequestCount: int64(i), Tokens: int64(7 * i), LastSeen: t0.Add(time.Duration(i) * time.Second)})
		ops = append(ops, lastTenant)
		if i%2 == 0 {
			lastModel = features.ModelOp(project, "m1", &features.ModelState{RequestCount: int64(i), LatencyMaxMs: int64(i), LastSeen: t0.Add(time.Duration(i) * time.Second)})
			r := features.RequestOp(project, fmt.Sprintf("r%03d", i), &features.RequestState{Tenant: "t1", Model: "m1", Verdict: "ALLOW", TotalTokens: int64(i), EventTime: t0}, time.Hour)
			reqKeys = append(reqKeys, r.Key)
			ops = append(ops, lastModel, r)
		}
	}
	defer func() {
		rdb.Del(context.Background(), append(reqKeys, lastTenant.Key, lastModel.Key)...)
	}()
	done := make(chan error, len(ops))
	for _, op := range ops {
		if err := w.Submit(ctx, []feast.Op{op}, func(err error) { done <- err }); err != nil {
			t.Fatal(err)
		}
	}
	for range ops {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if w.Written() != int64(len(ops)) {
		t.Fatalf("written %d ops, want %d", w.Written(), len(ops))
	}
	// 400 ops on 102 keys: 199 tenant and 99 model updates folded into their last one.
	if got, want := w.Coalesced(), int64(len(ops)-102); got != want {
		t.Fatalf("coalesced %d ops, want %d", got, want)
	}
	for _, want := range []feast.Op{lastTenant, lastModel} {
		got, err := rdb.HGetAll(ctx, want.Key).Result()
		if err != nil {
			t.Fatal(err)
		}
		row := want.Row()
		if len(got) != len(row) {
			t.Fatalf("%q has %d fields, want %d", want.Key, len(got), len(row))
		}
		for f, v := range row {
			if got[f] != string(v.([]byte)) {
				t.Fatalf("%q field %x is not the last update's", want.Key, f)
			}
		}
	}
	for _, k := range reqKeys {
		if n := rdb.HLen(ctx, k).Val(); n != 7 {
			t.Fatalf("request row %q has %d fields, want 7", k, n)
		}
		if ttl := rdb.TTL(ctx, k).Val(); ttl <= 0 || ttl > time.Hour {
			t.Fatalf("request row %q ttl %v", k, ttl)
		}
	}
}
