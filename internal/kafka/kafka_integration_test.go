package kafka_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/codec"
	"github.com/lovoo/goka/storage"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/test/testenv"
)

// TestFranzProduceConsume writes 300 keyed records with franz-go and reads every one back,
// checking values and that each partition's offsets run 0..n-1 without gaps.
func TestFranzProduceConsume(t *testing.T) {
	cfg := testenv.Kafka(t, "backflow-smoke")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topic := testenv.CreateTopic(t, ctx, cfg, "smoke-franz", 3)

	const n = 300
	prod, err := cfg.NewClient(kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Key: fmt.Appendf(nil, "k-%d", i%37), Value: fmt.Appendf(nil, "v-%d", i)}
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}

	cons, err := cfg.NewClient(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	seen := map[string]bool{}
	offsets := map[int32][]int64{}
	for len(seen) < n {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records before timeout", len(seen), n)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			seen[string(r.Value)] = true
			offsets[r.Partition] = append(offsets[r.Partition], r.Offset)
		})
	}
	for i := 0; i < n; i++ {
		if !seen[fmt.Sprintf("v-%d", i)] {
			t.Errorf("value v-%d not consumed", i)
		}
	}
	total := 0
	for p, offs := range offsets {
		for i, o := range offs {
			if o != int64(i) {
				t.Fatalf("partition %d: record %d has offset %d, want %d", p, i, o, i)
			}
		}
		total += len(offs)
	}
	if total != n || len(offsets) != 3 {
		t.Fatalf("consumed %d records over %d partitions, want %d over 3", total, len(offsets), n)
	}
}

// TestGokaProcessor runs a goka processor with a group table on the real broker: 10 keys
// emitted 3 times each must count to 3 in the table, and the group must commit all 30 offsets.
func TestGokaProcessor(t *testing.T) {
	cfg := testenv.Kafka(t, "backflow-smoke")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	topic := testenv.CreateTopic(t, ctx, cfg, "smoke-goka", 3)
	group := goka.Group(topic + "-counter")
	testenv.Groups(t, cfg, string(group))
	testenv.RemoveTopics(t, cfg, string(goka.GroupTable(group)))

	brokers := cfg.Brokers
	em, err := goka.NewEmitter(brokers, goka.Stream(topic), new(codec.String), cfg.EmitterOptions()...)
	if err != nil {
		t.Fatalf("emitter: %v", err)
	}
	const keys, perKey = 10, 3
	for round := 0; round < perKey; round++ {
		for k := 0; k < keys; k++ {
			if err := em.EmitSync(fmt.Sprintf("key-%d", k), fmt.Sprintf("round-%d", round)); err != nil {
				t.Fatalf("emit: %v", err)
			}
		}
	}
	if err := em.Finish(); err != nil {
		t.Fatal(err)
	}

	g := goka.DefineGroup(group,
		goka.Input(goka.Stream(topic), new(codec.String), func(ctx goka.Context, _ any) {
			var n int64
			if v := ctx.Value(); v != nil {
				n = v.(int64)
			}
			ctx.SetValue(n + 1)
		}),
		goka.Persist(new(codec.Int64)),
	)
	opts := append(cfg.ProcessorOptions(context.Background()), goka.WithStorageBuilder(storage.MemoryBuilder()))
	proc, err := goka.NewProcessor(brokers, g, opts...)
	if err != nil {
		t.Fatalf("processor: %v", err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- proc.Run(runCtx) }()

	// Get reads the partition tables, which exist only once the processor is set up: asking
	// earlier races goka's setup (the race detector reports it, and Get can dereference nil).
	if err := proc.WaitForReadyContext(ctx); err != nil {
		t.Fatalf("processor not ready: %v", err)
	}
	counts := func() (map[string]int64, error) {
		out := map[string]int64{}
		for k := 0; k < keys; k++ {
			key := fmt.Sprintf("key-%d", k)
			v, err := proc.Get(key)
			if err != nil {
				return nil, err
			}
			if v != nil {
				out[key] = v.(int64)
			}
		}
		return out, nil
	}
	for {
		got, err := counts()
		complete := err == nil && len(got) == keys
		for _, n := range got {
			complete = complete && n == perKey
		}
		if complete {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("processor stopped: %v", err)
		case <-ctx.Done():
			t.Fatalf("table counts %v (err %v), want %d keys at %d", got, err, keys, perKey)
		case <-time.After(200 * time.Millisecond):
		}
	}

	// goka commits asynchronously; wait for the group's committed offsets to cover all records.
	cl, err := cfg.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for {
		offs, err := adm.FetchOffsets(ctx, string(group))
		var committed int64
		var parts []int32
		if err == nil {
			offs.Each(func(o kadm.OffsetResponse) {
				if o.Topic == topic {
					committed += o.At
					parts = append(parts, o.Partition)
				}
			})
		}
		if committed == keys*perKey {
			sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
			t.Logf("group %s committed %d offsets over partitions %v", group, committed, parts)
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("group committed %d offsets, want %d (err %v)", committed, keys*perKey, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("processor run: %v", err)
	}
}
