package kafka

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/backflowhq/backflow/internal/ops"
)

// TestAwaitSourcesWaitsForATopicCreatedLater (issue 27.9): a stage started before its source
// topic, or just after a broker restart whose metadata did not list it yet, gave up after a
// grace of 5 s ("source topic does not exist") and ended. AwaitSources waits until the topic
// is there, says which topic and which config key every waitLogEvery, keeps the stage not
// ready meanwhile, and returns the topic's metadata once it exists.
func TestAwaitSourcesWaitsForATopicCreatedLater(t *testing.T) {
	c := fakeCluster(t, 3, "present")
	cl, err := Conn{Brokers: c.ListenAddrs()}.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ready := ops.NewReadiness(0)
	ready.AddStage("ingest")
	h := &attrRecorder{}
	waited := make(chan struct{})
	var once sync.Once
	w := SourceWait{Log: slog.New(h), Waiting: func(err error) {
		ready.SetStage("ingest", err)
		once.Do(func() { close(waited) })
	}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		td  kadm.TopicDetails
		err error
	}
	done := make(chan result, 1)
	go func() {
		td, err := AwaitSources(ctx, cl, w, Source{Topic: "present", Key: "ingest.inference_topic"}, Source{Topic: "later", Key: "ingest.gateway_topic"})
		done <- result{td, err}
	}()
	<-waited

	lines := h.lines()
	if len(lines) != 1 || lines[0] != "waiting for topic to be created topic=later key=ingest.gateway_topic" {
		t.Fatalf("log while waiting: %q, want one line naming topic later and its key", lines)
	}
	for _, r := range ready.Evaluate(ctx) {
		if r.Name == "ingest" && (r.Err == nil || !strings.Contains(r.Err.Error(), "later (ingest.gateway_topic)")) {
			t.Fatalf("readiness while waiting: %v, want not ready naming the topic and key", r.Err)
		}
	}
	select {
	case r := <-done:
		t.Fatalf("AwaitSources returned before the topic existed: %v, %v", r.td, r.err)
	default:
	}

	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 3, 1, nil, "later"); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("AwaitSources after the topic was created: %v", r.err)
	}
	if n, m := len(r.td["present"].Partitions), len(r.td["later"].Partitions); n != 3 || m != 3 {
		t.Fatalf("partitions present=%d later=%d, want 3 and 3", n, m)
	}
	for _, r := range ready.Evaluate(ctx) {
		if r.Name == "ingest" && r.Err != nil {
			t.Fatalf("readiness after the wait: %v, want the wait to have cleared it (Waiting(nil))", r.Err)
		}
	}

	// Cancelled while waiting, it returns ctx's error, not a missing topic.
	cctx, ccancel := context.WithCancel(context.Background())
	w.Waiting = func(error) { ccancel() }
	if _, err := AwaitSources(cctx, cl, w, Source{Topic: "never", Key: "k"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v, want context.Canceled", err)
	}
}

// attrRecorder records each line as its message and its topic and key attributes.
type attrRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *attrRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *attrRecorder) Handle(_ context.Context, rec slog.Record) error {
	line := rec.Message
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "topic" || a.Key == "key" {
			line += " " + a.Key + "=" + a.Value.String()
		}
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, line)
	return nil
}
func (r *attrRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *attrRecorder) WithGroup(string) slog.Handler      { return r }
func (r *attrRecorder) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.msgs...)
}
