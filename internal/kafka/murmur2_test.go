package kafka

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKeyPartitionMatchesKafka compares with franz-go's Kafka-compatible key partitioner for
// 20k keys of every length class over several partition counts.
func TestKeyPartitionMatchesKafka(t *testing.T) {
	for _, n := range []int{1, 3, 7, 12, 64} {
		p := kgo.StickyKeyPartitioner(nil).ForTopic("t")
		for i := 0; i < 20000; i++ {
			full := []byte(fmt.Sprintf("%x-request-%08d-abcdefgh", i*7919, i))
			key := full[:1+i%min(23, len(full)-1)]
			want := p.Partition(&kgo.Record{Key: key}, n)
			if got := KeyPartition(key, n); int(got) != want {
				t.Fatalf("key %q over %d partitions: %d, Kafka %d", key, n, got, want)
			}
			h := Murmur2Hasher()
			h.Write(key)
			if got := int(int32(h.Sum32())) % n; got != want {
				t.Fatalf("goka hasher puts %q in %d, Kafka in %d", key, got, want)
			}
		}
	}
}
