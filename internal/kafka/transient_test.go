package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"
	"github.com/lovoo/goka/codec"
	"github.com/lovoo/goka/storage"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestIsTransient(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{kerr.NotLeaderForPartition, true},
		{kerr.LeaderNotAvailable, true},
		{kerr.UnknownTopicOrPartition, true},
		{sarama.ErrNotLeaderForPartition, true},
		{fmt.Errorf("oldest offset: %w", sarama.ErrLeaderNotAvailable), true},
		{sarama.ErrOutOfBrokers, true},
		{io.EOF, true},
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, true},
		{sarama.ErrTopicAuthorizationFailed, false},
		{kerr.SaslAuthenticationFailed, false},
		{sarama.ErrInvalidTopic, false},
		{context.Canceled, false},
		{errors.New("codec: bad value"), false},
		{nil, false},
	} {
		if got := IsTransient(tt.err); got != tt.want {
			t.Errorf("IsTransient(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// TestProcessorStartsThroughNotLeader: the table partition's leader answers its first offset
// lookups with NOT_LEADER_FOR_PARTITION, as a leader just elected does. goka alone stops the
// processor on the first such answer ("Error getting oldest offset …"); through
// ProcessorOptions the lookup is retried, and the processor starts and processes.
func TestProcessorStartsThroughNotLeader(t *testing.T) {
	const (
		group = "transient-test"
		input = "transient-in"
		fails = 4 // sarama itself tries twice per lookup
	)
	c := fakeCluster(t, 1, input, group+"-table")
	var refused atomic.Int32
	c.ControlKey(kmsg.ListOffsets.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.ListOffsetsRequest)
		if len(r.Topics) != 1 || r.Topics[0].Topic != group+"-table" || refused.Load() >= fails {
			return nil, nil, false
		}
		refused.Add(1)
		resp := r.ResponseKind().(*kmsg.ListOffsetsResponse)
		for _, rt := range r.Topics {
			st := kmsg.NewListOffsetsResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewListOffsetsResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic(input))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	g := goka.DefineGroup(group,
		goka.Input(goka.Stream(input), new(codec.String), func(ctx goka.Context, msg any) { ctx.SetValue(msg) }),
		goka.Persist(new(codec.String)),
	)
	cfg := Conn{Brokers: c.ListenAddrs()}
	proc, err := goka.NewProcessor(cfg.Brokers, g, append(cfg.ProcessorOptions(ctx), goka.WithStorageBuilder(storage.MemoryBuilder()))...)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- proc.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("processor stopped with %v", err)
		}
	}()

	for {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("processor stopped before processing: %v (lookups refused: %d)", err, refused.Load())
		case <-ctx.Done():
			t.Fatalf("key not processed: %v (lookups refused: %d)", ctx.Err(), refused.Load())
		case <-time.After(100 * time.Millisecond):
		}
		if proc.Recovered() {
			if v, err := proc.Get("k"); err == nil && v == "v" {
				break
			}
		}
	}
	if n := refused.Load(); n != fails {
		t.Errorf("offset lookups refused = %d, want %d", n, fails)
	}
}
