package redis_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/backflowhq/backflow/sinks/redis"
	"github.com/backflowhq/backflow/test/testenv"
)

// TestHashSetGet writes a hash with binary fields (Feast's layout stores protobuf bytes under
// hashed field names) and reads every field back, plus a TTL.
func TestHashSetGet(t *testing.T) {
	testenv.Integration(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rdb, err := redis.Open(ctx, redis.Conn{Addr: testenv.Get(testenv.RedisAddr)})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()

	key := testenv.ID("smoke:")
	defer rdb.Del(context.Background(), key)
	want := map[string]string{}
	for i := 0; i < 50; i++ {
		want[fmt.Sprintf("f%02d", i)] = string([]byte{0, byte(i), 0xff, byte(i * 7)})
	}
	if err := rdb.HSet(ctx, key, want).Err(); err != nil {
		t.Fatalf("hset: %v", err)
	}
	if err := rdb.Expire(ctx, key, time.Hour).Err(); err != nil {
		t.Fatalf("expire: %v", err)
	}
	got, err := rdb.HGetAll(ctx, key).Result()
	if err != nil {
		t.Fatalf("hgetall: %v", err)
	}
	if len(got) != len(want) {
		t.Fatalf("got %d fields, want %d", len(got), len(want))
	}
	for f, v := range want {
		if got[f] != v {
			t.Fatalf("field %s = %x, want %x", f, got[f], v)
		}
	}
	if ttl := rdb.TTL(ctx, key).Val(); ttl <= 59*time.Minute || ttl > time.Hour {
		t.Fatalf("ttl = %v, want about 1h", ttl)
	}
}
