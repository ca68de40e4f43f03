package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTopicRetention: a topic's retention.ms as a duration; -1 (kept for ever) is 0.
func TestTopicRetention(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := EnsureTopics(ctx, cl, TopicSpec{Name: "dlq-week", Partitions: 1, Configs: map[string]string{"retention.ms": "604800000"}},
		TopicSpec{Name: "dlq-forever", Partitions: 1, Configs: map[string]string{"retention.ms": "-1"}}); err != nil {
		t.Fatal(err)
	}
	for topic, want := range map[string]time.Duration{"dlq-week": 7 * 24 * time.Hour, "dlq-forever": 0} {
		got, err := TopicRetention(ctx, cl, topic)
		if err != nil || got != want {
			t.Errorf("%s: retention %v (%v), want %v", topic, got, err, want)
		}
	}
}
