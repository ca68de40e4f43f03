package features_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/backflowhq/backflow/internal/faultproxy"
	"github.com/backflowhq/backflow/internal/testenv"
	"github.com/backflowhq/backflow/sinks/features"
)

// TestWriterRetriesWhileRedisDown: the writer's Redis is unreachable for ~1.5 s. Jobs submitted
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
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer rdb.Close()
	w := features.NewWriter(rdb, features.WriterConfig{MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, MaxBatch: 7})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go w.Run(ctx)

	key := fmt.Sprintf("writer-it-%d", time.Now().UnixNano())
	real := redis.NewClient(&redis.Options{Addr: target})
	defer real.Close()
	defer real.Del(context.Background(), key)
	const n = 50
	order := make(chan int, n)
	for i := 0; i < n; i++ {
		op := features.Op{Key: key, Fields: map[string]any{fmt.Sprintf("f%02d", i): []byte{byte(i)}, "last": fmt.Sprint(i)}, TTL: time.Minute}
		if err := w.Submit(ctx, []features.Op{op}, func(err error) {
			if err != nil {
				t.Errorf("job %d: %v", i, err)
			}
			order <- i
		}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(1500 * time.Millisecond)
	if len(order) != 0 {
		t.Fatalf("%d jobs acknowledged while Redis was down", len(order))
	}
	if w.Retries() == 0 {
		t.Fatal("no retries while Redis was down")
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
