package kafka

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"
)

// TestWaitForTopicsKeepsSayingItWaits: a stage waiting for an unreachable Kafka logged one
// warning and then nothing, for as long as it waited. Each attempt is bounded now, and the
// wait says so again every waitLogEvery, with how long it has waited.
func TestWaitForTopicsKeepsSayingItWaits(t *testing.T) {
	defer func(a, l time.Duration) { waitAttemptTimeout, waitLogEvery = a, l }(waitAttemptTimeout, waitLogEvery)
	waitAttemptTimeout, waitLogEvery = 300*time.Millisecond, 100*time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	cl, err := Conn{Brokers: []string{addr}, DialTimeout: 100 * time.Millisecond}.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	h := &attrRecorder{}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	if err := WaitForTopics(ctx, cl, slog.New(h), "t"); err == nil {
		t.Fatal("WaitForTopics returned nil with Kafka unreachable")
	}
	lines := h.lines()
	if len(lines) < 3 {
		t.Fatalf("%d lines in 4s of waiting, want one every attempt or so: %q", len(lines), lines)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "still waiting for kafka (") {
			t.Errorf("line %q does not say it still waits, and how long", l)
		}
	}
}
