package kafka

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/backflowhq/backflow/internal/retry"
)

// scriptedGroup is a sarama consumer group whose Consume plays one generation per call: call
// n (from 0) lasts gens[n] and returns errs[n]; past the script it blocks until ctx ends.
type scriptedGroup struct {
	sarama.ConsumerGroup
	gens  []time.Duration
	errs  []error
	calls atomic.Int32
	began chan int // the number of each call, as it begins
}

func (g *scriptedGroup) Consume(ctx context.Context, _ []string, _ sarama.ConsumerGroupHandler) error {
	n := int(g.calls.Add(1)) - 1
	g.began <- n
	if n >= len(g.gens) {
		<-ctx.Done()
		return nil
	}
	time.Sleep(g.gens[n])
	return g.errs[n]
}

func newScripted(gens []time.Duration, errs []error) *scriptedGroup {
	return &scriptedGroup{gens: gens, errs: errs, began: make(chan int, len(gens)+2)}
}

// waitCall waits for call n to begin.
func waitCall(t *testing.T, g *scriptedGroup, n int) {
	t.Helper()
	for {
		select {
		case got := <-g.began:
			if got == n {
				return
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("call %d of Consume never began (calls so far: %d)", n, g.calls.Load())
		}
	}
}

func runConsume(ctx context.Context, g rejoiningGroup) chan error {
	done := make(chan error, 1)
	go func() { done <- g.Consume(ctx, []string{"t"}, nil) }()
	return done
}

// An hour's wait stands for "waits": a test that sees the next call begin did not wait.
var hourBackoff = retry.Policy{Min: time.Hour, Max: time.Hour}

func TestRejoinAtOnceAfterAGeneration(t *testing.T) {
	inner := newScripted([]time.Duration{20 * time.Millisecond, 20 * time.Millisecond, 20 * time.Millisecond}, []error{nil, nil, nil})
	ctx, cancel := context.WithCancel(context.Background())
	done := runConsume(ctx, rejoiningGroup{ConsumerGroup: inner, policy: hourBackoff, quick: 10 * time.Millisecond})
	waitCall(t, inner, 3) // three generations ended; the fourth join began with no wait
	select {
	case err := <-done:
		t.Fatalf("Consume returned %v between generations; want it to rejoin", err)
	default:
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Consume after ctx ended: %v, want nil", err)
	}
	if got := inner.calls.Load(); got != 4 {
		t.Fatalf("calls = %d, want 4", got)
	}
}

// TestRejoinPause: no wait after a generation of at least quick; after shorter ones the
// backoff's waits, growing, and from the first again once a generation lasted.
func TestRejoinPause(t *testing.T) {
	g := rejoiningGroup{policy: retry.Policy{Min: 100 * time.Millisecond, Max: 5 * time.Second, Jitter: 0.01}, quick: time.Second}
	wait := g.policy.Backoff()
	if d := g.pause(2*time.Second, wait); d != 0 {
		t.Fatalf("after a 2s generation: wait %v, want none", d)
	}
	first := g.pause(10*time.Millisecond, wait)
	second := g.pause(10*time.Millisecond, wait)
	if first < 99*time.Millisecond || first > 101*time.Millisecond || second < 198*time.Millisecond || second > 202*time.Millisecond {
		t.Fatalf("after two quick generations: waits %v and %v, want about 100ms then 200ms", first, second)
	}
	for range 10 {
		g.pause(0, wait)
	}
	if d := g.pause(0, wait); d < 4950*time.Millisecond || d > 5*time.Second {
		t.Fatalf("after many quick generations: wait %v, want the 5s cap (less its jitter)", d)
	}
	if d := g.pause(time.Second, wait); d != 0 {
		t.Fatalf("after a generation of exactly quick: wait %v, want none", d)
	}
	if d := g.pause(0, wait); d < 99*time.Millisecond || d > 101*time.Millisecond {
		t.Fatalf("after a lasting generation and a quick one: wait %v, want about 100ms (the backoff reset)", d)
	}
}

// TestRejoinStopsDuringThePause: ctx ending while Consume waits after a quick generation ends
// Consume with nil, without another join.
func TestRejoinStopsDuringThePause(t *testing.T) {
	inner := newScripted([]time.Duration{0, 0}, []error{nil, nil})
	ctx, cancel := context.WithCancel(context.Background())
	done := runConsume(ctx, rejoiningGroup{ConsumerGroup: inner, policy: hourBackoff, quick: time.Minute})
	waitCall(t, inner, 0)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Consume: %v, want nil", err)
	}
	if got := inner.calls.Load(); got != 1 {
		t.Fatalf("calls = %d, want 1: a generation shorter than quick is followed by the backoff's wait", got)
	}
}

func TestRejoinReturnsSaramaErrors(t *testing.T) {
	inner := newScripted([]time.Duration{20 * time.Millisecond, 0}, []error{nil, sarama.ErrClosedConsumerGroup})
	done := runConsume(context.Background(), rejoiningGroup{ConsumerGroup: inner, policy: hourBackoff, quick: 10 * time.Millisecond})
	if err := <-done; !errors.Is(err, sarama.ErrClosedConsumerGroup) {
		t.Fatalf("Consume: %v, want %v", err, sarama.ErrClosedConsumerGroup)
	}
	if got := inner.calls.Load(); got != 2 {
		t.Fatalf("calls = %d, want 2", got)
	}
}

func TestRejoiningBuilderWraps(t *testing.T) {
	inner := newScripted(nil, nil)
	b := rejoining(func([]string, string, string) (sarama.ConsumerGroup, error) { return inner, nil })
	cg, err := b([]string{"x:9092"}, "g", "c")
	if err != nil {
		t.Fatal(err)
	}
	rg, ok := cg.(rejoiningGroup)
	if !ok || rg.ConsumerGroup != inner || rg.quick != rejoinQuick {
		t.Fatalf("builder returned %#v, want a rejoiningGroup over the inner group", cg)
	}
	fail := errors.New("no brokers")
	if _, err := rejoining(func([]string, string, string) (sarama.ConsumerGroup, error) { return nil, fail })(nil, "g", "c"); !errors.Is(err, fail) {
		t.Fatalf("builder error: %v, want %v", err, fail)
	}
}
