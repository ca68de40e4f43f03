package faultproxy

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// echo is a line server on loopback: it answers each line with "ok <n>" and counts the lines
// it received, so a test can tell a request that reached it from one that did not.
type echo struct {
	addr string
	got  atomic.Int64
}

func startEcho(t *testing.T) *echo {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	e := &echo{addr: ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				sc.Buffer(make([]byte, 1<<20), 1<<20)
				for sc.Scan() {
					n := e.got.Add(1)
					if _, err := io.WriteString(c, "ok "+itoa(n)+"\n"); err != nil {
						return
					}
				}
			}()
		}
	}()
	return e
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func newProxy(t *testing.T, cfg Config) *Proxy {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// ask sends line and waits up to wait for one answer line.
func ask(t *testing.T, addr, line string, wait time.Duration) (string, error) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(wait))
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

func TestModes(t *testing.T) {
	e := startEcho(t)
	p := newProxy(t, Config{Target: e.addr, Delay: 300 * time.Millisecond, RequestBytes: 100})

	if got, err := ask(t, p.Addr(), "a", 2*time.Second); err != nil || got != "ok 1\n" {
		t.Fatalf("forward: %q %v", got, err)
	}

	p.Set(Delay)
	start := time.Now()
	if got, err := ask(t, p.Addr(), "b", 3*time.Second); err != nil || got != "ok 2\n" {
		t.Fatalf("delay: %q %v", got, err)
	}
	if d := time.Since(start); d < 600*time.Millisecond { // held both ways
		t.Fatalf("delay: answered after %v, want at least 600ms", d)
	}

	p.Set(Blackhole)
	if got, err := ask(t, p.Addr(), "c", 500*time.Millisecond); err == nil {
		t.Fatalf("blackhole: answered %q", got)
	}
	if n := e.got.Load(); n != 2 {
		t.Fatalf("blackhole: the server received %d lines, want 2", n)
	}

	p.Set(Reset)
	if _, err := ask(t, p.Addr(), "d", time.Second); err == nil {
		t.Fatal("reset: answered")
	}
	p.Set(Refuse)
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		t.Fatal("refuse: connected")
	}
	p.Set(Forward)
	// The blackholed line was held, then passed on when the mode changed... to a connection
	// its client had closed, so the server may have seen it: count from here.
	before := e.got.Load()
	if got, err := ask(t, p.Addr(), "e", 2*time.Second); err != nil || !strings.HasPrefix(got, "ok") {
		t.Fatalf("forward after refuse: %q %v", got, err)
	}
	if e.got.Load() != before+1 {
		t.Fatalf("forward after refuse: server count %d, want %d", e.got.Load(), before+1)
	}
	if st := p.Stats(); st.Resets < 2 || st.Accepted < 4 {
		t.Fatalf("stats %+v", st)
	}
}

// TestLoseRepliesLandsTheRequest: the request reaches the server (it counts it), the reply is
// lost and the client's connection reset; small requests still get answers; after the budget
// the proxy forwards again by itself.
func TestLoseRepliesLandsTheRequest(t *testing.T) {
	e := startEcho(t)
	p := newProxy(t, Config{Target: e.addr, RequestBytes: 100})
	if err := p.SetLoseReplies(2); err != nil {
		t.Fatal(err)
	}
	if got, err := ask(t, p.Addr(), "small", 2*time.Second); err != nil || got != "ok 1\n" {
		t.Fatalf("small request: %q %v", got, err)
	}
	big := strings.Repeat("x", 200)
	for i := 0; i < 2; i++ {
		if got, err := ask(t, p.Addr(), big, 2*time.Second); err == nil {
			t.Fatalf("big request %d: answered %q", i, got)
		}
	}
	if n := e.got.Load(); n != 3 {
		t.Fatalf("the server received %d requests, want 3 (the lost replies' requests landed)", n)
	}
	if p.Mode() != Forward {
		t.Fatalf("mode %v after the budget, want forward", p.Mode())
	}
	if got, err := ask(t, p.Addr(), big, 2*time.Second); err != nil || got != "ok 4\n" {
		t.Fatalf("after the budget: %q %v", got, err)
	}
	if st := p.Stats(); st.LostReplies != 2 {
		t.Fatalf("lost replies %d, want 2", st.LostReplies)
	}
}

func TestRespond(t *testing.T) {
	e := startEcho(t)
	p := newProxy(t, Config{Target: e.addr, Response: HTTPResponse(401, `{"error_code":401}`)})
	p.Set(Respond)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /subjects HTTP/1.1\r\nHost: x\r\n\r\n")
	b, _ := io.ReadAll(c)
	if !bytes.HasPrefix(b, []byte("HTTP/1.1 401 ")) || !bytes.HasSuffix(b, []byte(`{"error_code":401}`)) {
		t.Fatalf("answer %q", b)
	}
	if e.got.Load() != 0 {
		t.Fatal("the request reached the server")
	}
}

func TestConfig(t *testing.T) {
	if _, err := New(Config{}); err == nil || !strings.Contains(err.Error(), "target") {
		t.Fatalf("empty target: %v", err)
	}
	if _, err := ParseMode("nope"); err == nil {
		t.Fatal("unknown mode parsed")
	}
	for m := Forward; m <= Respond; m++ {
		if got, err := ParseMode(m.String()); err != nil || got != m {
			t.Fatalf("%v: %v %v", m, got, err)
		}
	}
}
