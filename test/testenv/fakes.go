package testenv

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/kafka"
)

// FakeRegistry is, for unit tests, franz-go's in-process schema registry (srfake) and
// backflow's client of it (avro.NewRegistryClient); the registry is closed when t ends (close
// it earlier to see an outage).
func FakeRegistry(t testing.TB) (*sr.Client, *srfake.Registry) {
	t.Helper()
	fake := srfake.New()
	t.Cleanup(fake.Close)
	reg, err := avro.NewRegistryClient(avro.RegistryConn{URL: fake.URL()})
	if err != nil {
		t.Fatal(err)
	}
	return reg, fake
}

// FakeKafka is, for unit tests, franz-go's in-process Kafka (kfake): one broker holding topics
// of the given number of partitions each, closed when t ends.
func FakeKafka(t testing.TB, partitions int32, topics ...string) kafka.Conn {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topics...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return kafka.Conn{Brokers: c.ListenAddrs()}
}
