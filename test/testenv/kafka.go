package testenv

import (
	"context"
	"testing"

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
	topic := ID(prefix + "-")
	Topics(t, ctx, cfg, partitions, topic)
	return topic
}
