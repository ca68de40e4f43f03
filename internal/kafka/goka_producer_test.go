package kafka

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"maps"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// fakeCluster starts a one-broker kfake cluster with topics of the given partition count.
func fakeCluster(t *testing.T, partitions int32, topics ...string) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topics...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// gokaProducerOn builds the goka producer on c the way goka does, with Close's timeout and
// extra client options.
func gokaProducerOn(t *testing.T, c *kfake.Cluster, hasher func() hash.Hash32, closeTimeout time.Duration, extra ...kgo.Opt) goka.Producer {
	t.Helper()
	p, err := Conn{Brokers: c.ListenAddrs()}.gokaProducerBuilder(closeTimeout, extra...)(nil, "goka-producer-test", hasher)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type outcome struct {
	msg *sarama.ProducerMessage
	err error
}

// outcomeOf returns a channel that receives the promise's outcome once finished.
func outcomeOf(pr *goka.Promise) <-chan outcome {
	ch := make(chan outcome, 1)
	pr.ThenWithMessage(func(msg *sarama.ProducerMessage, err error) { ch <- outcome{msg, err} })
	return ch
}

func await(t *testing.T, ch <-chan outcome, within time.Duration) outcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(within):
		t.Fatalf("promise not finished within %v", within)
		return outcome{}
	}
}

// readAll reads n records of topic from the start.
func readAll(t *testing.T, c *kfake.Cluster, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got []*kgo.Record
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d records of %s, want %d: %v", len(got), topic, n, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, r) })
	}
	return got
}

// TestGokaProducerPlacesKeysLikeGoka: every key lands on the partition goka's sarama producer
// chose for it with the same hasher (sarama.NewCustomHashPartitioner), for Murmur2Hasher
// (then KeyPartition's, as Kafka's default partitioner places it) and for goka's default FNV
// hasher, whose sums are negative as int32 about half the time.
func TestGokaProducerPlacesKeysLikeGoka(t *testing.T) {
	const partitions = 7
	for _, h := range []struct {
		name   string
		hasher func() hash.Hash32
	}{{"murmur2", Murmur2Hasher}, {"goka-default", goka.DefaultHasher()}} {
		t.Run(h.name, func(t *testing.T) {
			topic := "placed-" + h.name
			c := fakeCluster(t, partitions, topic)
			p := gokaProducerOn(t, c, h.hasher, 10*time.Second)
			sp := sarama.NewCustomHashPartitioner(h.hasher)(topic)
			keys := []string{""}
			for i := range 300 {
				keys = append(keys, fmt.Sprintf("req-%d", i))
			}
			outs := make([]<-chan outcome, len(keys))
			for i, k := range keys {
				outs[i] = outcomeOf(p.Emit(topic, k, []byte("v-"+k)))
			}
			negative := 0
			for i, k := range keys {
				o := await(t, outs[i], 20*time.Second)
				if o.err != nil || o.msg == nil {
					t.Fatalf("key %q: %v, %v; want written", k, o.msg, o.err)
				}
				want, err := sp.Partition(&sarama.ProducerMessage{Key: sarama.StringEncoder(k)}, partitions)
				if err != nil {
					t.Fatal(err)
				}
				if o.msg.Partition != want {
					t.Fatalf("key %q on partition %d, goka's sarama producer puts it on %d", k, o.msg.Partition, want)
				}
				if h.name == "murmur2" && o.msg.Partition != KeyPartition([]byte(k), partitions) {
					t.Fatalf("key %q on partition %d, KeyPartition says %d", k, o.msg.Partition, KeyPartition([]byte(k), partitions))
				}
				hh := h.hasher()
				_, _ = hh.Write([]byte(k))
				if int32(hh.Sum32()) < 0 {
					negative++
				}
			}
			if h.name == "goka-default" && negative == 0 {
				t.Fatal("no key hashed negative: the negation went untested")
			}
			// Where the broker has them, not only what the promise says.
			for _, r := range readAll(t, c, topic, len(keys)) {
				if want := int32(0); string(r.Value) != "v-"+string(r.Key) {
					t.Fatalf("record %q=%q", r.Key, r.Value)
				} else if want, _ = sp.Partition(&sarama.ProducerMessage{Key: sarama.StringEncoder(r.Key)}, partitions); r.Partition != want {
					t.Fatalf("key %q read from partition %d, want %d", r.Key, r.Partition, want)
				}
			}
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestGokaProducerWritesRecordsAsGokaDid: headers arrive, a nil value is a tombstone, and a
// finished promise carries the written record's topic, partition and offset (goka's table
// writes store that offset).
func TestGokaProducerWritesRecordsAsGokaDid(t *testing.T) {
	c := fakeCluster(t, 1, "written")
	p := gokaProducerOn(t, c, Murmur2Hasher, 10*time.Second)
	headers := goka.Headers{"origin": []byte("ingest"), "empty": []byte{}}
	first := await(t, outcomeOf(p.EmitWithHeaders("written", "k1", []byte("v1"), headers)), 20*time.Second)
	second := await(t, outcomeOf(p.Emit("written", "k2", nil)), 20*time.Second)
	for i, o := range []outcome{first, second} {
		if o.err != nil || o.msg == nil || o.msg.Topic != "written" || o.msg.Partition != 0 || o.msg.Offset != int64(i) {
			t.Fatalf("promise %d: %+v, %v; want written at written/0@%d", i, o.msg, o.err, i)
		}
	}
	if k, _ := first.msg.Key.Encode(); string(k) != "k1" {
		t.Fatalf("promise key %q", k)
	}
	rs := readAll(t, c, "written", 2)
	got := goka.Headers{}
	for _, h := range rs[0].Headers {
		got[h.Key] = h.Value
	}
	if string(rs[0].Key) != "k1" || string(rs[0].Value) != "v1" || len(rs[0].Headers) != 2 ||
		!maps.EqualFunc(got, headers, func(a, b []byte) bool { return string(a) == string(b) }) {
		t.Fatalf("first record %q=%q headers %v, want k1=v1 with %v", rs[0].Key, rs[0].Value, rs[0].Headers, headers)
	}
	if string(rs[1].Key) != "k2" || rs[1].Value != nil || len(rs[1].Headers) != 0 {
		t.Fatalf("second record %q=%q headers %v, want a tombstone of k2", rs[1].Key, rs[1].Value, rs[1].Headers)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestGokaProducerFailsPromises: a write to a topic the cluster does not have, and a write
// once the cluster is gone (sent or not), finish their promises with an error (goka then stops
// the processor; nothing is committed past them). After a failed write the producer writes
// nothing more.
func TestGokaProducerFailsPromises(t *testing.T) {
	t.Run("unknown-topic", func(t *testing.T) {
		c := fakeCluster(t, 1, "present")
		p := gokaProducerOn(t, c, Murmur2Hasher, 5*time.Second)
		if o := await(t, outcomeOf(p.Emit("present", "k", []byte("v"))), 20*time.Second); o.err != nil {
			t.Fatalf("write to an existing topic: %v", o.err)
		}
		o := await(t, outcomeOf(p.Emit("absent", "k", []byte("v"))), 60*time.Second)
		if !errors.Is(o.err, kerr.UnknownTopicOrPartition) || o.msg != nil {
			t.Fatalf("write to a missing topic: %v, %v; want UNKNOWN_TOPIC_OR_PARTITION", o.msg, o.err)
		}
		o = await(t, outcomeOf(p.Emit("present", "k2", []byte("v2"))), 10*time.Second)
		if !errors.Is(o.err, kerr.UnknownTopicOrPartition) || o.msg != nil {
			t.Fatalf("write after a failed one: %v, %v; want the earlier failure", o.msg, o.err)
		}
		if err := p.Close(); err != nil {
			t.Fatalf("close with nothing outstanding: %v", err)
		}
		if rs := readAll(t, c, "present", 1); len(rs) != 1 || string(rs[0].Key) != "k" {
			t.Fatalf("read %v, want only the first record", rs)
		}
		o = await(t, outcomeOf(p.Emit("present", "k", []byte("v"))), 10*time.Second)
		if o.err == nil {
			t.Fatal("emit after close: no error")
		}
	})
	t.Run("cluster-gone", func(t *testing.T) {
		c := fakeCluster(t, 1, "present")
		p := gokaProducerOn(t, c, Murmur2Hasher, 5*time.Second, kgo.RecordDeliveryTimeout(2*time.Second))
		if o := await(t, outcomeOf(p.Emit("present", "k", []byte("v"))), 20*time.Second); o.err != nil {
			t.Fatalf("write to an existing topic: %v", o.err)
		}
		c.Close()
		// kfake still takes this request on the open connection and never answers it: the
		// outcome is unknown, and the delivery timeout fails the write all the same.
		o := await(t, outcomeOf(p.Emit("present", "k", []byte("v"))), 60*time.Second)
		if o.err == nil || o.msg != nil {
			t.Fatalf("write with the cluster gone: %v, %v; want an error", o.msg, o.err)
		}
		t.Logf("with the cluster gone: %v", o.err)
		if err := p.Close(); err != nil {
			t.Fatalf("close with nothing outstanding: %v", err)
		}
		o = await(t, outcomeOf(p.Emit("present", "k", []byte("v"))), 10*time.Second)
		if o.err == nil {
			t.Fatal("emit after close: no error")
		}
	})
	t.Run("closed", func(t *testing.T) {
		c := fakeCluster(t, 1, "present")
		p := gokaProducerOn(t, c, Murmur2Hasher, 5*time.Second)
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		o := await(t, outcomeOf(p.Emit("present", "k", []byte("v"))), 10*time.Second)
		if !errors.Is(o.err, kgo.ErrClientClosed) {
			t.Fatalf("emit after close: %v, want %v", o.err, kgo.ErrClientClosed)
		}
	})
}

// TestGokaProducerCloseFlushes: Close writes what is still lingering before it returns, with
// every promise finished.
func TestGokaProducerCloseFlushes(t *testing.T) {
	const n = 500
	c := fakeCluster(t, 3, "flushed")
	p := gokaProducerOn(t, c, Murmur2Hasher, 30*time.Second, kgo.ProducerLinger(30*time.Second))
	outs := make([]<-chan outcome, n)
	for i := range n {
		outs[i] = outcomeOf(p.Emit("flushed", fmt.Sprint(i), []byte("v")))
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for i, ch := range outs {
		select {
		case o := <-ch:
			if o.err != nil {
				t.Fatalf("record %d: %v", i, o.err)
			}
		default:
			t.Fatalf("record %d: promise not finished when Close returned", i)
		}
	}
	if got := len(readAll(t, c, "flushed", n)); got != n {
		t.Fatalf("read %d records, want %d", got, n)
	}
}

// TestGokaProducerCloseReportsUnwritten: records that cannot be written by the close timeout
// (the cluster is gone) make Close return an error, and their promises are finished with one.
func TestGokaProducerCloseReportsUnwritten(t *testing.T) {
	c := fakeCluster(t, 1, "lost")
	p := gokaProducerOn(t, c, Murmur2Hasher, time.Second)
	if o := await(t, outcomeOf(p.Emit("lost", "k", []byte("v"))), 20*time.Second); o.err != nil {
		t.Fatal(o.err)
	}
	c.Close()
	outs := []<-chan outcome{outcomeOf(p.Emit("lost", "a", []byte("v"))), outcomeOf(p.Emit("lost", "b", []byte("v")))}
	start := time.Now()
	err := p.Close()
	if err == nil {
		t.Fatal("close with two records unwritten: nil error")
	}
	t.Logf("close after %v: %v", time.Since(start).Round(time.Millisecond), err)
	for i, ch := range outs {
		select {
		case o := <-ch:
			if o.err == nil {
				t.Fatalf("record %d written with the cluster gone", i)
			}
		default:
			t.Fatalf("record %d: promise not finished when Close returned", i)
		}
	}
}

// TestGokaProducerOutlastsALeaderElection: like sarama's settings (see
// TestSaramaProducerOutlastsALeaderElection), the goka producer keeps trying a write for
// longer than a leader election after a broker dies.
func TestGokaProducerOutlastsALeaderElection(t *testing.T) {
	if producerDeliveryTimeout < 20*time.Second {
		t.Fatalf("delivery timeout %v: shorter than a leader election after a broker dies", producerDeliveryTimeout)
	}
}
