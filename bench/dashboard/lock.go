package main

import (
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

func (l *lock) take(how int) error {
	if l.f == nil {
		return nil
	}
	if err := syscall.Flock(int(l.f.Fd()), how); err != nil {
		return fmt.Errorf("flock %s: %w", l.f.Name(), err)
	}
	return nil
}

// shared and exclusive wait for the lock; release lets it go.
func (l *lock) shared() error    { return l.take(syscall.LOCK_SH) }
func (l *lock) exclusive() error { return l.take(syscall.LOCK_EX) }
func (l *lock) release() error   { return l.take(syscall.LOCK_UN) }

func (l *lock) close() {
	if l.f != nil {
		_ = l.release()
		l.f.Close()
	}
}
