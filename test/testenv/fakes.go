package testenv

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
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

// CommittedOffsets is group's committed offset per partition of topic; empty while the group
// has committed nothing (or has not joined yet).
func CommittedOffsets(t testing.TB, k kafka.Conn, group, topic string) map[int32]int64 {
	t.Helper()
	cl, err := k.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	out := map[int32]int64{}
	offs, err := kadm.NewClient(cl).FetchOffsets(context.Background(), group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return out
	}
	if err != nil {
		t.Fatal(err)
	}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic {
			out[o.Partition] = o.At
		}
	})
	return out
}
