package kafka

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// multiErr is a hashicorp multierror as goka and sarama build them (WrappedErrors).
type multiErr []error

func (m multiErr) Error() string          { return fmt.Sprintf("%d errors occurred", len(m)) }
func (m multiErr) WrappedErrors() []error { return m }

// TestSplitStopErrors: goka's errors after a stop that cut 3 commits short, nested as goka
// nests them, count 3 records and no failure; a real error among them stays a failure.
func TestSplitStopErrors(t *testing.T) {
	released := errors.New("stopped before the record finished; it will be redelivered")
	commit := func(k string) error {
		return fmt.Errorf("error processing message (partition=1): %w",
			fmt.Errorf("asynchronous error from callback: %w", fmt.Errorf("could not commit message with key '%s': %w", k, multiErr{released})))
	}
	cleanup := multiErr{commit("a"), commit("b"), commit("c")}
	// sarama returns the cleanup's errors from Consume and again from Close
	err := multiErr{fmt.Errorf("error consuming from group consumer: %w", cleanup), fmt.Errorf("Error closing consumer group: %w", cleanup), context.Canceled}
	left, failures := SplitStopErrors(err)
	if left != 3 || len(failures) != 0 {
		t.Fatalf("left %d, failures %v; want 3 and none", left, failures)
	}
	disk := errors.New("closing storage: disk full")
	left, failures = SplitStopErrors(errors.Join(err, fmt.Errorf("error closing table: %w", disk),
		errors.New("context closed while waiting for startup tables to become ready")))
	if left != 3 || len(failures) != 1 || !errors.Is(failures[0], disk) {
		t.Fatalf("left %d, failures %v; want 3 and the disk error", left, failures)
	}
	if left, failures := SplitStopErrors(nil); left != 0 || failures != nil {
		t.Fatalf("nil: %d, %v", left, failures)
	}
}

// TestGokaLoggerCommitWall: goka's line listing the commits a stop cut short goes to debug,
// one line with the count; other lines stay at info.
func TestGokaLoggerCommitWall(t *testing.T) {
	var buf bytes.Buffer
	g := GokaLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	var wall strings.Builder
	wall.WriteString("31 errors occurred:\n")
	for i := range 31 {
		fmt.Fprintf(&wall, "\t* error processing message (partition=0): asynchronous error from callback: could not commit message with key 'k%d': stopped\n", i)
	}
	g.Printf("Error closing consumer group: %v", wall.String())
	g.Printf("setup generation %d", 7)
	out := buf.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2: %s", len(lines), out)
	}
	if !strings.Contains(lines[0], "level=DEBUG") || !strings.Contains(lines[0], "records_uncommitted=31") ||
		strings.Contains(lines[0], "key 'k") {
		t.Errorf("commit wall logged as %q", lines[0])
	}
	if !strings.Contains(lines[1], "level=INFO") || !strings.Contains(lines[1], "setup generation 7") {
		t.Errorf("other line logged as %q", lines[1])
	}
}

// valueErr is an error passed by value that holds another error (as sarama's sentinelError).
type valueErr struct{ inner error }

func (v valueErr) Error() string { return "wrapped: " + v.inner.Error() }
func (v valueErr) Unwrap() error { return v.inner }

// TestSplitStopErrorsValueErrors: an error value whose fields hold an uncomparable error
// (a slice multierror) is walked, not used as a map key (which panics).
func TestSplitStopErrorsValueErrors(t *testing.T) {
	err := valueErr{inner: multiErr{fmt.Errorf("could not commit message with key 'a': %w", errors.New("released")), errors.New("broker gone")}}
	left, failures := SplitStopErrors(err)
	if left != 1 || len(failures) != 1 || failures[0].Error() != "broker gone" {
		t.Fatalf("left %d, failures %v; want 1 and the broker error", left, failures)
	}
}
