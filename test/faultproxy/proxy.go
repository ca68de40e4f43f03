// Package faultproxy is a TCP proxy that injects network faults between backflow and one of
// the systems it calls (ClickHouse, Redis, the schema registry, the sensitive-word service).
// It knows nothing of their protocols: it moves bytes, and a Mode says what it does to them.
//
// Start one with New, point the client at Addr, and switch modes with Set while traffic flows:
//
//	px, _ := faultproxy.New(faultproxy.Config{Target: "127.0.0.1:19000"})
//	defer px.Close()
//	px.Set(faultproxy.Blackhole) // a hung server
//	px.Set(faultproxy.Forward)   // healed
//
// Every method is safe for concurrent use. A Proxy lives until Close.
package faultproxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Mode is what the proxy does to the bytes it carries.
type Mode int

const (
	// Forward passes bytes both ways unchanged.
	Forward Mode = iota
	// Delay holds every chunk for Config.Delay (SetDelay) before passing it on: a slow
	// network or a slow server.
	Delay
	// Blackhole passes nothing either way and keeps every connection open, new ones included:
	// a hung server. Chunks read meanwhile are passed on once the mode changes.
	Blackhole
	// Reset closes every open connection with a TCP reset, and resets new ones as soon as
	// they are accepted: a server that crashed and restarts over and over.
	Reset
	// Refuse closes the listener: connecting fails with "connection refused", as when the
	// server is down. Open connections are reset.
	Refuse
	// LoseReplies forwards requests, lets the server act on them, and drops its reply to a
	// request of at least Config.RequestBytes, then resets the connection: the insert landed
	// but the client never heard so. SetLoseReplies bounds how many replies are lost.
	LoseReplies
	// Respond answers every new request with Config.Response and closes the connection,
	// without reaching the server: for example an HTTP 401 or 503 from a registry.
	Respond
)

var modeNames = [...]string{"forward", "delay", "blackhole", "reset", "refuse", "lose-replies", "respond"}

func (m Mode) String() string {
	if m >= 0 && int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("mode(%d)", int(m))
}

// ParseMode is the inverse of Mode.String.
func ParseMode(s string) (Mode, error) {
	for i, n := range modeNames {
		if n == s {
			return Mode(i), nil
		}
	}
	return 0, fmt.Errorf("faultproxy: unknown mode %q (want one of %v)", s, modeNames)
}

// Config is a proxy's set-up.
type Config struct {
	// Target is the real server, host:port. Required.
	Target string
	// Listen is the proxy's address. Default: 127.0.0.1:0 (a free port).
	Listen string
	// Delay is how long Delay mode holds each chunk. Default: 200ms.
	Delay time.Duration
	// RequestBytes is the smallest request (client bytes since the server last answered)
	// whose reply LoseReplies drops, so that handshakes and small queries still pass and
	// the request that matters (an INSERT's data, a Redis pipeline) reaches the server.
	// Default: 4096.
	RequestBytes int
	// Response is what Respond mode answers. Default: an HTTP/1.1 503 with a JSON body.
	Response []byte
	// DialTimeout bounds the connection to Target. Default: 5s.
	DialTimeout time.Duration
}

func (c Config) withDefaults() Config {
	if c.Listen == "" {
		c.Listen = "127.0.0.1:0"
	}
	if c.Delay == 0 {
		c.Delay = 200 * time.Millisecond
	}
	if c.RequestBytes == 0 {
		c.RequestBytes = 4096
	}
	if c.Response == nil {
		c.Response = HTTPResponse(503, `{"error_code":50301,"message":"injected by faultproxy"}`)
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = 5 * time.Second
	}
	return c
}

// Validate names the first bad field.
func (c Config) Validate() error {
	if c.Target == "" {
		return errors.New("faultproxy: target: empty, want host:port")
	}
	if _, _, err := net.SplitHostPort(c.Target); err != nil {
		return fmt.Errorf("faultproxy: target: %q: %w", c.Target, err)
	}
	if c.Delay < 0 || c.RequestBytes < 0 || c.DialTimeout < 0 {
		return fmt.Errorf("faultproxy: delay %v, request bytes %d, dial timeout %v: want none negative", c.Delay, c.RequestBytes, c.DialTimeout)
	}
	return nil
}

// HTTPResponse builds a minimal HTTP/1.1 answer with a JSON body, for Respond mode.
func HTTPResponse(code int, body string) []byte {
	return fmt.Appendf(nil, "HTTP/1.1 %d Injected\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", code, len(body), body)
}

// Stats are a proxy's counters since New.
type Stats struct {
	Accepted    int64 // connections accepted
	Upstream    int64 // bytes passed client -> server
	Downstream  int64 // bytes passed server -> client
	LostReplies int64 // replies dropped by LoseReplies
	Resets      int64 // connections reset by Reset, Refuse or LoseReplies
	Responded   int64 // requests answered by Respond
}

// Proxy is a running fault proxy.
type Proxy struct {
	cfg  Config
	addr string

	mu       sync.Mutex
	cond     *sync.Cond
	mode     Mode
	delay    time.Duration
	loseLeft int64 // replies LoseReplies may still drop; -1: no bound
	ln       net.Listener
	conns    map[*pair]struct{}
	closed   bool

	accepted, up, down, lost, resets, responded atomic.Int64
}

// pair is one proxied connection.
type pair struct {
	client, server net.Conn
	sinceReply     atomic.Int64 // client bytes since the server's last reply
}

// New listens and starts proxying in Forward mode.
func New(cfg Config) (*Proxy, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen %s: %w", cfg.Listen, err)
	}
	p := &Proxy{cfg: cfg, addr: ln.Addr().String(), ln: ln, conns: map[*pair]struct{}{}, delay: cfg.Delay, loseLeft: -1}
	p.cond = sync.NewCond(&p.mu)
	go p.serve(ln)
	return p, nil
}

// Addr is where clients connect.
func (p *Proxy) Addr() string { return p.addr }

// Target is the real server.
func (p *Proxy) Target() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg.Target
}

// SetTarget points new connections at another server; open ones are reset.
func (p *Proxy) SetTarget(addr string) {
	p.mu.Lock()
	p.cfg.Target = addr
	p.resetAllLocked()
	p.mu.Unlock()
}

// Mode returns the current mode.
func (p *Proxy) Mode() Mode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

// Set switches the mode. Reset and Refuse reset every open connection at once; leaving
// Refuse listens again on the same address.
func (p *Proxy) Set(m Mode) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("faultproxy: closed")
	}
	prev := p.mode
	p.mode = m
	if m == LoseReplies {
		p.loseLeft = -1 // SetLoseReplies bounds it
	}
	switch {
	case m == Refuse && prev != Refuse:
		p.ln.Close()
		p.ln = nil
		p.resetAllLocked()
	case m == Reset:
		p.resetAllLocked()
	case m != Refuse && prev == Refuse:
		ln, err := net.Listen("tcp", p.addr)
		if err != nil {
			p.mode = Refuse
			return fmt.Errorf("faultproxy: listen again on %s: %w", p.addr, err)
		}
		p.ln = ln
		go p.serve(ln)
	}
	p.cond.Broadcast()
	return nil
}

// SetDelay changes what Delay mode holds each chunk for.
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// SetResponse changes what Respond mode answers.
func (p *Proxy) SetResponse(b []byte) {
	p.mu.Lock()
	p.cfg.Response = b
	p.mu.Unlock()
}

// SetLoseReplies switches to LoseReplies for the next n qualifying replies, then back to
// Forward by itself.
func (p *Proxy) SetLoseReplies(n int) error {
	if err := p.Set(LoseReplies); err != nil {
		return err
	}
	p.mu.Lock()
	p.loseLeft = int64(n)
	p.mu.Unlock()
	return nil
}

// Stats returns the counters.
func (p *Proxy) Stats() Stats {
	return Stats{Accepted: p.accepted.Load(), Upstream: p.up.Load(), Downstream: p.down.Load(),
		LostReplies: p.lost.Load(), Resets: p.resets.Load(), Responded: p.responded.Load()}
}

// Close stops listening and closes every connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	if p.ln != nil {
		p.ln.Close()
	}
	for c := range p.conns {
		c.client.Close()
		c.server.Close()
	}
	p.conns = map[*pair]struct{}{}
	p.cond.Broadcast()
	return nil
}

func (p *Proxy) resetAllLocked() {
	for c := range p.conns {
		reset(c.client)
		c.server.Close()
		p.resets.Add(1)
	}
	p.conns = map[*pair]struct{}{}
}

// reset closes c with a TCP RST instead of a FIN.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

func (p *Proxy) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		p.accepted.Add(1)
		go p.handle(c)
	}
}

func (p *Proxy) handle(c net.Conn) {
	p.mu.Lock()
	mode := p.mode
	p.mu.Unlock()
	switch mode {
	case Reset, Refuse:
		p.resets.Add(1)
		reset(c)
		return
	case Respond:
		p.respond(c)
		return
	}
	p.mu.Lock()
	target := p.cfg.Target
	p.mu.Unlock()
	s, err := net.DialTimeout("tcp", target, p.cfg.DialTimeout)
	if err != nil {
		reset(c) // the real server is down: the client sees a reset, as it would on the way
		return
	}
	pr := &pair{client: c, server: s}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		c.Close()
		s.Close()
		return
	}
	p.conns[pr] = struct{}{}
	p.mu.Unlock()
	go p.pipe(pr, true)
	p.pipe(pr, false)
}

func (p *Proxy) respond(c net.Conn) {
	defer c.Close()
	buf := make([]byte, 32<<10)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, _ := c.Read(buf); n == 0 {
		return
	}
	p.responded.Add(1)
	p.mu.Lock()
	resp := p.cfg.Response
	p.mu.Unlock()
	c.Write(resp)
}

func (p *Proxy) drop(pr *pair) {
	p.mu.Lock()
	delete(p.conns, pr)
	p.mu.Unlock()
}

// pipe copies one direction of pr: client to server when up, else server to client.
func (p *Proxy) pipe(pr *pair, up bool) {
	src, dst := pr.server, pr.client
	if up {
		src, dst = pr.client, pr.server
	}
	defer func() {
		p.drop(pr)
		pr.client.Close()
		pr.server.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.pass(pr, up, buf[:n]) {
				return
			}
			if up {
				// Counted before the server has the bytes: its reply can come back (and be
				// judged by LoseReplies) before this goroutine runs again.
				pr.sinceReply.Add(int64(n))
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
			if up {
				p.up.Add(int64(n))
			} else {
				p.down.Add(int64(n))
				pr.sinceReply.Store(0)
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				reset(dst)
			}
			return
		}
	}
}

// pass applies the mode to a chunk about to be written; false ends the connection.
func (p *Proxy) pass(pr *pair, up bool, chunk []byte) bool {
	p.mu.Lock()
	for p.mode == Blackhole && !p.closed {
		p.cond.Wait()
	}
	mode, delay, closed := p.mode, p.delay, p.closed
	if !closed && mode == LoseReplies && !up && pr.sinceReply.Load() >= int64(p.cfg.RequestBytes) && p.loseLeft != 0 {
		if p.loseLeft > 0 {
			p.loseLeft--
			if p.loseLeft == 0 {
				p.mode = Forward
			}
		}
		p.mu.Unlock()
		p.lost.Add(1)
		p.resets.Add(1)
		reset(pr.client)
		pr.server.Close()
		return false
	}
	p.mu.Unlock()
	switch {
	case closed:
		return false
	case mode == Delay:
		time.Sleep(delay)
	case mode == Reset || mode == Refuse:
		return false
	}
	return true
}
