package features

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/internal/kafka"
)

// TestSequencerCompletesInOrder: a record completes once all its parts finished and every
// record before it completed, with its first error; later records wait for an earlier one.
// Once a record failed, every later record of the partition completes with errBehindFailed,
// whether its parts finished before or after: committed, it would move the partition's offset
// past the failed record, which would then never be read again.
func TestSequencerCompletesInOrder(t *testing.T) {
	var s sequencer
	var mu sync.Mutex
	var got []string
	done := func(name string) func(error) {
		return func(err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				name += ":" + err.Error()
			}
			got = append(got, name)
		}
	}
	t1 := s.ticket(done("r1"), 2)
	t2 := s.ticket(done("r2"), 1)
	t3 := s.ticket(done("r3"), 1)
	t2.finish(nil)
	t3.finish(nil)
	t1.finish(nil)
	if len(got) != 0 {
		t.Fatalf("completed %v while r1 still waits for a part", got)
	}
	t1.finish(errors.New("boom"))
	behind := "r%d:" + errBehindFailed.Error() + ": boom"
	if want := []string{"r1:boom", fmt.Sprintf(behind, 2), fmt.Sprintf(behind, 3)}; !reflect.DeepEqual(got, want) {
		t.Fatalf("completed %v, want %v", got, want)
	}
	t4 := s.ticket(done("r4"), 1)
	t4.finish(nil)
	t4.finish(nil) // a part finished twice completes nothing twice
	if want := fmt.Sprintf(behind, 4); len(got) != 4 || got[3] != want {
		t.Fatalf("completed %v, want %q once more", got, want)
	}
}

// TestSequencerCompletesWithoutErrors: with no error, every record completes with nil, in order.
func TestSequencerCompletesWithoutErrors(t *testing.T) {
	var s sequencer
	var got []error
	done := func(err error) { got = append(got, err) }
	t1 := s.ticket(done, 2)
	t2 := s.ticket(done, 1)
	t2.finish(nil)
	t1.finish(nil)
	t1.finish(nil)
	t3 := s.ticket(done, 1)
	t3.finish(nil)
	if len(got) != 3 || got[0] != nil || got[1] != nil || got[2] != nil {
		t.Fatalf("completed with %v, want three nils", got)
	}
}

// TestFolderSendsOneBatchPerKey: the deltas of several records of one partition leave as one
// loopback record per aggregate key, on the partition goka's hasher gives the key, each in the
// order the records were added; every record's ticket finishes once they are acknowledged.
func TestFolderSendsOneBatchPerKey(t *testing.T) {
	const topic, parts = "features-loop", 3
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(parts, topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	prod, err := kafka.Conn{Brokers: cluster.ListenAddrs()}.GokaProducerBuilder()(nil, "", kafka.Murmur2Hasher)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	f := newFolder(prod, topic, 20*time.Millisecond, 1000)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go f.run(ctx)

	d := func(off int64) *Delta { return &Delta{From: Pos{Partition: 1, Offset: off}, Count: true, Tokens: off} }
	var s sequencer
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	add := func(deltas map[string]*Delta, keys ...string) {
		wg.Add(1)
		f.add(1, keys, deltas, s.ticket(func(err error) {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
			wg.Done()
		}, 1))
	}
	add(map[string]*Delta{"model/m": d(10), "tenant/a": d(10)}, "model/m", "tenant/a")
	add(map[string]*Delta{"tenant/a": d(11)}, "tenant/a")
	add(map[string]*Delta{"tenant/b": d(12), "tenant/a": d(12)}, "tenant/a", "tenant/b")
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("a ticket finished with %v", err)
		}
	}

	rd, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	got := map[string][]int64{}
	var n int
	for n < 3 {
		fs := rd.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of 3 loopback records: %v", n, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			n++
			if want := kafka.KeyPartition(r.Key, parts); r.Partition != want {
				t.Errorf("key %s on partition %d, want %d", r.Key, r.Partition, want)
			}
			v, err := (DeltaCodec{}).Decode(r.Value)
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range v.(DeltaBatch) {
				got[string(r.Key)] = append(got[string(r.Key)], x.From.Offset)
			}
		})
	}
	want := map[string][]int64{"model/m": {10}, "tenant/a": {10, 11, 12}, "tenant/b": {12}}
	if n != 3 || !reflect.DeepEqual(got, want) {
		t.Fatalf("%d loopback records with deltas %v, want 3 with %v", n, got, want)
	}
}

// TestFolderCloseFailsWhatWaits: closing the folder fails the tickets of deltas not sent yet,
// and of every record added afterwards, so a stopping processor leaves them uncommitted.
func TestFolderCloseFailsWhatWaits(t *testing.T) {
	f := newFolder(nil, "loop", time.Hour, 1000) // never flushes by itself
	var s sequencer
	var got []error
	done := func(err error) { got = append(got, err) }
	f.add(0, []string{"tenant/a"}, map[string]*Delta{"tenant/a": {From: Pos{0, 1}}}, s.ticket(done, 1))
	f.close(errFolderClosed)
	f.add(0, []string{"tenant/a"}, map[string]*Delta{"tenant/a": {From: Pos{0, 2}}}, s.ticket(done, 1))
	if len(got) != 2 || !errors.Is(got[0], errFolderClosed) || !errors.Is(got[1], errFolderClosed) {
		t.Fatalf("tickets finished with %v, want errFolderClosed twice", got)
	}
}
