package proc

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// ErrNotServing is what Service.Start returns when the child never answered its health check.
var ErrNotServing = errors.New("not serving")

// Service is a child serving HTTP on a loopback port of its own, with a health endpoint: a
// test stops it (an outage) and starts it again on the same port.
type Service struct {
	Name   string
	URL    string // http://127.0.0.1:<port>
	Addr   string // 127.0.0.1:<port>
	Health string // the path polled until it answers, e.g. /healthz

	bin string
	o   Options
	mu  sync.Mutex
	p   *Proc
}

// NewService prepares a service on a free port; args makes its arguments from the address it
// must listen on. Start starts it.
func NewService(name, bin string, args func(addr string) []string, o Options) (*Service, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	s := &Service{Name: name, Addr: fmt.Sprintf("127.0.0.1:%d", port), Health: "/healthz", bin: bin, o: o}
	s.URL = "http://" + s.Addr
	s.o.Args = append(args(s.Addr), o.Args...)
	return s, nil
}

// Start starts the service unless it runs, and waits until its health endpoint answers
// (10 s at most).
func (s *Service) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p != nil && s.p.Running() {
		return nil
	}
	p, err := Start(s.Name, s.bin, s.o)
	if err != nil {
		return err
	}
	s.p = p
	for range 200 {
		if r, err := http.Get(s.URL + s.Health); err == nil {
			r.Body.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.Done():
			return fmt.Errorf("%s exited before serving: %w\n%s", s.Name, ErrNotServing, p.Tail(20))
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s did not answer on %s: %w", s.Name, s.URL, ErrNotServing)
}

// Stop kills the service (SIGKILL: it is down, not shutting down) and waits until it is gone.
func (s *Service) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p != nil {
		s.p.Kill()
		s.p = nil
	}
}

// Pid is the running child's process id, 0 when it is stopped.
func (s *Service) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p == nil {
		return 0
	}
	return s.p.Pid()
}
