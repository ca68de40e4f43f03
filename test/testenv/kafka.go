package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/backflowhq/backflow/internal/kafka"
)

// Kafka calls Integration and returns the stack's Kafka settings with clientID.
func Kafka(t testing.TB, clientID string) kafka.Conn {
	t.Helper()
	Integration(t)
	cfg := kafka.Conn{Brokers: kafka.ParseBrokers(Get(KafkaBrokers)), ClientID: clientID}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// CreateTopic makes a fresh topic named prefix-<nanos> with the given partitions, and deletes
// it when the test ends.
func CreateTopic(t testing.TB, ctx context.Context, cfg kafka.Conn, prefix string, partitions int32) string {
	t.Helper()
	cl, err := cfg.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	topic := fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano())
	resp, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create topic %s on %v: %v %v", topic, cfg.Brokers, err, resp.Err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = adm.DeleteTopics(ctx, topic)
	})
	return topic
}
