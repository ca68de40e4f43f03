package redis

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"
)

// TestClientLogsGoThroughSlog: go-redis' own pool lines ("redis: connection pool: failed to
// dial ...") went to stderr in its own format, beside the stage's JSON lines. After Open they
// reach slog, at debug level and marked component=go-redis.
func TestClientLogsGoThroughSlog(t *testing.T) {
	var buf bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(prev) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if rdb, err := Open(ctx, Conn{Addr: addr, DialTimeout: 200 * time.Millisecond}); err == nil {
		rdb.Close()
		t.Fatal("Open reached a closed port")
	}
	// Enough failed dials for the pool to report them.
	for i := 0; i < 8 && !strings.Contains(buf.String(), "component=go-redis"); i++ {
		if rdb, err := Open(ctx, Conn{Addr: addr, DialTimeout: 200 * time.Millisecond}); err == nil {
			rdb.Close()
		}
	}
	out := buf.String()
	if !strings.Contains(out, "component=go-redis") || !strings.Contains(out, "level=DEBUG") || !strings.Contains(out, "dial") {
		t.Fatalf("go-redis' own lines did not reach slog at debug level:\n%s", out)
	}
}
