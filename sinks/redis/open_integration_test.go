package redis_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/backflowhq/backflow/sinks/redis"
	"github.com/backflowhq/backflow/test/testenv"
)

// TestOpenWaitingWaitsOutAnOutageButNotABadPassword: sink-features keeps retrying a Redis it
// cannot reach (until its context ends), but a Redis that answers and refuses the credentials
// fails at once with Redis's word for it.
func TestOpenWaitingWaitsOutAnOutageButNotABadPassword(t *testing.T) {
	testenv.Integration(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	unreachable := redis.Conn{Addr: "127.0.0.1:1", DialTimeout: 100 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
	defer cancel()
	if _, err := redis.OpenWaiting(ctx, unreachable, log); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("unreachable Redis: %v, want to have retried until the context ended", err)
	}

	refused := redis.Conn{Addr: testenv.Get(testenv.RedisAddr), Username: "nobody", Password: "pw-d3adb33f"}
	ctx2, cancel2 := context.WithTimeout(context.Background(), time.Minute)
	defer cancel2()
	_, err := redis.OpenWaiting(ctx2, refused, log)
	if err == nil || ctx2.Err() != nil || !strings.Contains(strings.ToUpper(err.Error()), "WRONGPASS") && !strings.Contains(err.Error(), "AUTH") {
		t.Fatalf("bad credentials: %v, want Redis's refusal at once", err)
	}
	if strings.Contains(err.Error(), "pw-d3adb33f") {
		t.Fatalf("the error shows the password: %v", err)
	}
}
