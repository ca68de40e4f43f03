package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/lovoo/goka"
)

// TestNewGokaProcessorRetriesATopicRace: goka's own create of a topic that was created a
// moment before fails with "already exists" (its metadata had not caught up), and stopped the
// stage at start-up (seen in the fault suite on the secured stack). NewGokaProcessor must try
// again, and must not retry other errors.
func TestNewGokaProcessorRetriesATopicRace(t *testing.T) {
	defer func(f func([]string, *goka.GroupGraph, ...goka.ProcessorOption) (*goka.Processor, error)) {
		newGokaProcessor = f
	}(newGokaProcessor)
	race := fmt.Errorf("error creating topic g-loop, npar=3, rfactor=1, config=map[string]string{}: %v",
		errors.New("kafka server: Topic with this name already exists - Topic 'g-loop' already exists."))
	calls := 0
	newGokaProcessor = func([]string, *goka.GroupGraph, ...goka.ProcessorOption) (*goka.Processor, error) {
		calls++
		if calls <= 2 {
			return nil, race
		}
		return &goka.Processor{}, nil
	}
	if p, err := NewGokaProcessor(context.Background(), nil, nil); err != nil || p == nil || calls != 3 {
		t.Fatalf("after two lost races: %v, %v, %d calls; want a processor after 3", p, err, calls)
	}
	calls = 0
	unknown := errors.New("Error getting config for topic g-loop: kafka server: Request was for a topic or partition that does not exist on this broker")
	newGokaProcessor = func([]string, *goka.GroupGraph, ...goka.ProcessorOption) (*goka.Processor, error) {
		calls++
		if calls == 1 {
			return nil, unknown
		}
		return &goka.Processor{}, nil
	}
	if p, err := NewGokaProcessor(context.Background(), nil, nil); err != nil || p == nil || calls != 2 {
		t.Fatalf("after a broker that did not know the topic yet: %v, %v, %d calls; want a processor after 2", p, err, calls)
	}
	calls = 0
	other := errors.New("kafka: client has run out of available brokers")
	newGokaProcessor = func([]string, *goka.GroupGraph, ...goka.ProcessorOption) (*goka.Processor, error) {
		calls++
		return nil, other
	}
	if _, err := NewGokaProcessor(context.Background(), nil, nil); !errors.Is(err, other) || calls != 1 {
		t.Fatalf("another error: %v after %d calls, want it at once", err, calls)
	}
}

// TestSaramaWaitsOutARebalance: a JoinGroup answer can take the whole rebalance timeout, so
// the read timeout must be longer; with sarama's 30 s against a 60 s rebalance, an instance
// joining while another waited out a moderation outage stopped with "i/o timeout" (fault
// suite #5).
func TestSaramaWaitsOutARebalance(t *testing.T) {
	sc := Conn{Brokers: []string{"127.0.0.1:9092"}}.Sarama()
	if sc.Net.ReadTimeout <= sc.Consumer.Group.Rebalance.Timeout {
		t.Fatalf("read timeout %v, rebalance timeout %v: a JoinGroup waiting on a slow member times out client-side",
			sc.Net.ReadTimeout, sc.Consumer.Group.Rebalance.Timeout)
	}
}

// TestSaramaProducerOutlastsALeaderElection (regression): goka's producer gave up on a table
// changelog write about a second after its partition's leader died, before KRaft had fenced
// the broker (9 s) and elected another leader, and the stage stopped (fault suite #20). The
// retries must now span longer than that.
func TestSaramaProducerOutlastsALeaderElection(t *testing.T) {
	sc := Conn{Brokers: []string{"127.0.0.1:9092"}}.Sarama()
	var total time.Duration
	for n := 0; n < sc.Producer.Retry.Max; n++ {
		if sc.Producer.Retry.BackoffFunc != nil {
			total += sc.Producer.Retry.BackoffFunc(n, sc.Producer.Retry.Max)
		} else {
			total += sc.Producer.Retry.Backoff
		}
	}
	if total < 20*time.Second {
		t.Fatalf("produce retries span %v (%d retries): shorter than a leader election after a broker dies", total, sc.Producer.Retry.Max)
	}
	if err := sc.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestGokaLoggerDebug: at log level debug goka's own debug lines (where a table partition's
// recovery starts, "Recovering from X to hwm=Y; (local offset is Z)") must be turned on, and at
// info they must stay off; goka only logs them once its global switch is on.
func TestGokaLoggerDebug(t *testing.T) {
	defer func(f func(bool, bool)) { gokaDebug = f }(gokaDebug)
	for _, tc := range []struct {
		level slog.Level
		want  bool
	}{{slog.LevelInfo, false}, {slog.LevelDebug, true}} {
		var on, sarama, called bool
		gokaDebug = func(g, s bool) { on, sarama, called = g, s, true }
		log := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: tc.level}))
		GokaLogger(log)
		if called != tc.want || on != tc.want || sarama {
			t.Errorf("level %v: goka debug called %v with (%v, %v), want called %v with (%v, false)", tc.level, called, on, sarama, tc.want, tc.want)
		}
	}
}
