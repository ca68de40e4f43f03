package pipelines

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
)

// fakeRedis answers every line it reads with a RESP error, as Redis answers "GET / HTTP/1.0",
// and counts the connections it accepted.
func fakeRedis(t *testing.T) (string, *atomic.Int64) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var accepted atomic.Int64
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer conn.Close()
				r := bufio.NewReader(conn)
				for {
					if _, err := r.ReadString('\n'); err != nil {
						return
					}
					_, _ = conn.Write([]byte("-ERR wrong number of arguments for 'get' command\r\n"))
				}
			}()
		}
	}()
	return ln.Addr().String(), &accepted
}

// hang is a check that never answers, as a binary protocol's at another service's port.
func hang(ctx context.Context) (string, error) {
	<-ctx.Done()
	return "", ctx.Err()
}

// TestCheckAddressedNamesWhatAnswers: a check that hangs (ClickHouse's native protocol at its
// HTTP port, Kafka at Redis' port) fails as misaddressed once the address answers as an HTTP
// server or as Redis, naming the variable, long before its timeout; before, ping said DOWN
// after the timeout. A check that answers is not probed.
func TestCheckAddressedNamesWhatAnswers(t *testing.T) {
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("Ok.\n")) }))
	defer web.Close()
	redisAddr, probes := fakeRedis(t)
	httpAddr := strings.TrimPrefix(web.URL, "http://")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // far beyond probeGrace
	defer cancel()

	c := Conns{ClickHouse: chschema.Conn{Addr: httpAddr}, Kafka: kafka.Conn{Brokers: []string{redisAddr}}}
	for _, tt := range []struct {
		system, want string
	}{
		{SystemClickHouse, "clickhouse: " + httpAddr + " answers as an HTTP server, not as clickhouse; this looks like ClickHouse's HTTP port"},
		{SystemKafka, "kafka: " + redisAddr + " answers as Redis, not as kafka: check BACKFLOW_KAFKA_BROKERS"},
	} {
		_, err := checkAddressed(ctx, c, tt.system, hang)
		if !errors.Is(err, ErrMisaddressed) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want ErrMisaddressed saying %q", tt.system, err, tt.want)
		}
		if ctx.Err() != nil {
			t.Fatalf("%s: the check ran until the test's deadline", tt.system)
		}
	}
	// A check that fails at once is probed too; Redis answering as Redis is not misaddressed.
	refused := errors.New("refused")
	if _, err := checkAddressed(ctx, Conns{Redis: c.Redis}, SystemRedis, func(context.Context) (string, error) { return "", refused }); !errors.Is(err, refused) {
		t.Errorf("redis without an address: %v, want the check's own error", err)
	}
	before := probes.Load()
	c.Redis.Addr = redisAddr
	if _, err := checkAddressed(ctx, c, SystemRedis, func(context.Context) (string, error) { return "", refused }); !errors.Is(err, refused) {
		t.Errorf("redis answering as Redis: %v, want the check's own error", err)
	}
	if probes.Load() != before+1 {
		t.Errorf("a failed check was probed %d times, want 1", probes.Load()-before)
	}
	// A check that answers is not probed.
	before = probes.Load()
	if d, err := checkAddressed(ctx, c, SystemKafka, func(context.Context) (string, error) { return "1 broker(s)", nil }); err != nil || d != "1 broker(s)" {
		t.Errorf("an answering check: %q %v", d, err)
	}
	if probes.Load() != before {
		t.Errorf("an answering check was probed")
	}
}
