package features_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/backflowhq/backflow/internal/testenv"
	"github.com/backflowhq/backflow/sinks/features"
)

// switchProxy forwards a local address to target and can be taken down (listener and every
// open connection closed) and brought back up on the same address: a Redis outage without
// touching the shared Redis.
type switchProxy struct {
	t      *testing.T
	addr   string
	target string
	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]bool
}

func newSwitchProxy(t *testing.T, target string) *switchProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &switchProxy{t: t, addr: ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]bool{}}
	go p.serve(ln)
	t.Cleanup(p.down)
	return p
}

func (p *switchProxy) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[u] = true, true
		p.mu.Unlock()
		go func() { io.Copy(u, c); u.Close(); c.Close() }()
		go func() { io.Copy(c, u); u.Close(); c.Close() }()
	}
}

func (p *switchProxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]bool{}
}

func (p *switchProxy) up() {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("proxy up on %s: %v", p.addr, err)
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go p.serve(ln)
}

// proxy forwards connections on ln to target until ln is closed.
func proxy(ln net.Listener, target string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			u, err := net.Dial("tcp", target)
			if err != nil {
				return
			}
			defer u.Close()
			go io.Copy(u, c)
			io.Copy(c, u)
		}()
	}
}

// TestWriterRetriesWhileRedisDown: the writer's Redis is unreachable for ~1.5 s. Jobs submitted
// meanwhile are neither dropped nor acknowledged; once Redis answers they land, in order, and
// their done callbacks run in submission order.
func TestWriterRetriesWhileRedisDown(t *testing.T) {
	testenv.Integration(t)
	target := testenv.Get(testenv.RedisAddr)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // down: nothing listens
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
	ln, err = net.Listen("tcp", addr) // up again
	if err != nil {
		t.Fatalf("re-listen on %s: %v", addr, err)
	}
	defer ln.Close()
	go proxy(ln, target)
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
