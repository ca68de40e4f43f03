package features_test

import (
	"context"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/feast"
	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/processors/features"
	"github.com/backflowhq/backflow/sinks/redis"
	"github.com/backflowhq/backflow/test/pipelinetest"
	"github.com/backflowhq/backflow/test/testenv"
)

// TestStopLeavesWaitingDeltasToRedelivery: a stop fails the records whose deltas still wait in
// the folder, and the records after them in their partition stay uncommitted with them, even
// those that forward nothing and whose Redis rows are written. One enriched partition holds a
// request's RESPONSE (offset 0: it forwards deltas to its tenant, user and model) and another
// request's REQUEST (offset 1: it forwards none). The folder is set to hold deltas for an hour,
// so when the stage is stopped, with both request rows in Redis, the RESPONSE's deltas were
// never sent. The group must then have committed nothing on the enriched topic: a commit of
// offset 1's record would move the partition past the RESPONSE, which would never be read
// again, and its tenant would count one request fewer for good (what chaos scenario 22 found
// across static restarts). Started again on its kept storage, the stage re-reads both records,
// and the tenant, user and model each count the request once.
func TestStopLeavesWaitingDeltasToRedelivery(t *testing.T) {
	env := pipelinetest.NewEnv(t, "fst")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute) // a guard against hangs
	defer cancel()
	fcfg := env.Features
	rdb := env.Redis(t, ctx)
	if err := kafka.EnsureTopics(ctx, env.Admin, kafka.TopicSpec{Name: fcfg.EnrichedTopic, Partitions: 1, Replication: 1}); err != nil {
		t.Fatal(err)
	}
	enc, err := avro.NewEncoder[avro.EnrichedRecord](env.Registry, avro.EnrichedSchema, avro.TopicName.Subject(fcfg.EnrichedTopic, avro.EnrichedSchema))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Truncate(time.Millisecond)
	produce := func(req, phase string) {
		t.Helper()
		v, err := enc.Encode(ctx, avro.EnrichedRecord{RequestID: req, SourceTopic: "gateway-log",
			Gateway: &avro.GatewayLog{RequestID: req, Phase: phase, EventTime: at, TenantID: "t1", UserID: "u1", Model: "m1",
				StatusCode: 200, LatencyMs: 120, PromptTokens: 10, CompletionTokens: 5},
			Moderation: avro.Moderation{Status: avro.ModerationChecked, Verdict: avro.VerdictAllow}})
		if err != nil {
			t.Fatal(err)
		}
		if err := env.Admin.ProduceSync(ctx, &kgo.Record{Topic: fcfg.EnrichedTopic, Key: []byte(req), Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	storage := t.TempDir()
	run := func(cfg features.Config) (*features.Processor, context.CancelFunc, <-chan error) {
		t.Helper()
		var proc atomic.Pointer[features.Processor]
		sctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			done <- features.Run(sctx, cfg, features.RunConfig{Kafka: env.Kafka, Registry: env.Registry,
				Store: redis.NewWriter(rdb, redis.Config{}), StorageDir: storage, Logger: log,
				OnReady: func(p *features.Processor) { proc.Store(p) }})
		}()
		for proc.Load() == nil {
			select {
			case err := <-done:
				t.Fatalf("sink-features stopped before it was ready: %v", err)
			case <-ctx.Done():
				t.Fatal("sink-features never became ready")
			case <-time.After(50 * time.Millisecond):
			}
		}
		return proc.Load(), stop, done
	}

	held := fcfg
	held.FoldInterval, held.FoldRecords = time.Hour, 1000 // the RESPONSE's deltas wait until the stop
	p, stop, done := run(held)
	produce("r1", avro.PhaseResponse)
	produce("r2", avro.PhaseRequest)
	for p.Stats.Records.Load() < 2 || p.RedisWritten() < 2 { // both request rows acknowledged by Redis
		select {
		case <-ctx.Done():
			t.Fatalf("applied %d records, Redis acknowledged %d ops; want 2 and 2", p.Stats.Records.Load(), p.RedisWritten())
		case <-time.After(20 * time.Millisecond):
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("a requested stop returned %v", err)
	}
	if got := testenv.CommittedOffsets(t, env.Kafka, fcfg.Group, fcfg.EnrichedTopic); got[0] > 0 {
		t.Fatalf("after the stop the group committed enriched offset %d; want none: the RESPONSE at 0 never sent its deltas", got[0])
	}
	tenantKey := feast.RedisKey(fcfg.Project, feast.StringEntity(features.TenantEntity, "t1"))
	if n, found, err := testenv.Int64Feature(ctx, rdb, tenantKey, features.TenantView, "request_count"); err != nil || found {
		t.Fatalf("tenant row before the restart: request_count %d (found %v, %v); want none", n, found, err)
	}

	p, stop, done = run(fcfg)
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("a requested stop returned %v", err)
		}
	}()
	testenv.WaitCommitted(t, ctx, env.Admin, fcfg.Group, fcfg.EnrichedTopic, fcfg.LoopTopic())
	rows := []struct{ what, key, view string }{
		{"tenant", tenantKey, features.TenantView},
		{"user", feast.RedisKey(fcfg.Project, feast.StringEntity(features.TenantEntity, "t1"), feast.StringEntity(features.UserEntity, "u1")), features.UserView},
		{"model", feast.RedisKey(fcfg.Project, feast.StringEntity(features.ModelEntity, "m1")), features.ModelView},
	}
	for _, r := range rows { // each row is written once its loopback record is applied
		for {
			n, found, err := testenv.Int64Feature(ctx, rdb, r.key, r.view, "request_count")
			if err != nil {
				t.Fatal(err)
			}
			if found && n != 1 {
				t.Fatalf("%s request_count after the restart = %d, want 1", r.what, n)
			}
			if found {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s row never written after the restart", r.what)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	if got := testenv.CommittedOffsets(t, env.Kafka, fcfg.Group, fcfg.EnrichedTopic); got[0] != 2 {
		t.Fatalf("enriched offset committed after the restart = %d, want 2", got[0])
	}
	t.Logf("stopped with both rows in Redis and the RESPONSE's deltas unsent: nothing committed; after the restart: %d records re-read, request_count 1 for tenant, user and model, offset 2 committed",
		p.Stats.Records.Load())
}
