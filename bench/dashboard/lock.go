package main

import (
	"context"
	"fmt"
	"os"
	"syscall"
)

// lock is the --lock file: taken shared while the benchmark fills (other users of the stack
// may run beside it) and exclusive while it times (nothing else runs). A zero lock does nothing.
type lock struct{ f *os.File }

func openLock(path string) (*lock, error) {
	if path == "" {
		return &lock{}, nil
	}
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("--lock: %w", err)
	}
	return &lock{f: f}, nil
}

// take waits for the lock until ctx ends. It blocks in flock, which wakes it as soon as the
// lock is free (a retry loop could miss a short gap between two shared holders); when ctx ends
// first it returns, and the process is ending anyway.
func (l *lock) take(ctx context.Context, how int) error {
	if l.f == nil {
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- syscall.Flock(int(l.f.Fd()), how) }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("flock %s: %w", l.f.Name(), err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// shared and exclusive wait for the lock; release lets it go.
func (l *lock) shared(ctx context.Context) error    { return l.take(ctx, syscall.LOCK_SH) }
func (l *lock) exclusive(ctx context.Context) error { return l.take(ctx, syscall.LOCK_EX) }

func (l *lock) release() {
	if l.f != nil {
		_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	}
}

func (l *lock) close() {
	if l.f != nil {
		l.release()
		l.f.Close()
	}
}
