package pipelines_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/feast"
	"github.com/backflowhq/backflow/pipelines"
	"github.com/backflowhq/backflow/pipelines/replay"
	"github.com/backflowhq/backflow/processors/features"
	"github.com/backflowhq/backflow/processors/ingest"
	"github.com/backflowhq/backflow/sinks/clickhouse"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
	"github.com/backflowhq/backflow/sinks/redis"
	"github.com/backflowhq/backflow/test/pipelinetest"
	"github.com/backflowhq/backflow/test/testenv"
	"github.com/backflowhq/backflow/tools/loadgen"
)

// TestClusterEndToEnd runs loadgen's traffic through ingest, the ClickHouse sink and the
// feature sink in cluster mode, on the cluster stack (ClickHouse 2 shards x 2 replicas, a Redis
// Cluster), with loadgen's manifest as the oracle: through the distributed views, read on
// another host than the one written to, every original is there once (lost 0, duplicates 0)
// and the rows are spread over both shards; a replay converges; a declared stream lands the
// same way (streamOnCluster); Feast's SDK reads from the Redis Cluster the same request count
// per tenant as ClickHouse holds.
func TestClusterEndToEnd(t *testing.T) { clusterEndToEnd(t, false) }

// TestClusterFaults is TestClusterEndToEnd with a ClickHouse replica (shard 2's second) and a
// Redis master (slot 0's) killed before the sinks start and started again 15 s later: the
// Distributed inserts go to the live replica, the feature writer retries until the Redis
// replica took over, nothing is dead-lettered, and the oracle holds, read on the restarted
// replica once it caught up.
func TestClusterFaults(t *testing.T) { clusterEndToEnd(t, true) }

func clusterEndToEnd(t *testing.T, faults bool) {
	testenv.Integration(t)
	cl := testenv.Cluster(t)
	hosts := cl.List(testenv.ClusterClickHouseAddrs)
	seeds := cl.List(testenv.ClusterRedisAddrs)
	name := cl.Get(testenv.ClusterClickHouseName)
	conns := pipelinetest.Plain()
	conns.ClickHouse = chschema.Conn{Addr: hosts[0], Cluster: name}
	conns.Redis = redis.Conn{Mode: redis.ModeCluster, Addrs: seeds}
	env := pipelinetest.NewEnvOn(t, "cl", conns)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	// The private database, on every host.
	admin, err := chschema.Open(ctx, chschema.Conn{Addr: hosts[0]})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.Exec(ctx, fmt.Sprintf("CREATE DATABASE IF NOT EXISTS %s ON CLUSTER %s", env.DB, name)); err != nil {
		t.Fatal(err)
	}
	testenv.AtEnd(t, "drop database "+env.DB+" on cluster", func(ctx context.Context) error {
		c, err := chschema.Open(ctx, chschema.Conn{Addr: hosts[0]})
		if err != nil {
			return err
		}
		defer c.Close()
		return c.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s ON CLUSTER %s", env.DB, name))
	})
	chcfg := conns.ClickHouse
	chcfg.Database = env.DB
	if _, err := chschema.MigrateCluster(ctx, chcfg, false); err != nil {
		t.Fatal(err)
	}
	testenv.RedisKeys(t, conns.Redis, "*"+env.Features.Project)

	env.SourceTopics(t, ctx, 3, env.SinkDLQ)
	m := env.Load(t, ctx, loadgen.Config{Requests: 600, DuplicateRate: 0.05, PoisonRate: 0.03, SensitiveShare: 0.2,
		EventStart: time.Now().Add(-time.Hour).UTC(), EventStep: 5 * time.Second})

	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	// The feature sink's client, open before any fault, as a running stage's would be.
	rdb, err := redis.Open(ctx, conns.Redis)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	// Under faults, the crashes come while the sinks write: clickhouse-s2r2 right after the
	// ClickHouse sink's first flush (at most BatchRows of about 1,800 rows, so most of them go
	// to a shard with a replica down), and the Redis master serving slot 0 as the feature sink
	// submits its first write. Both come back 15 s after the second crash.
	var (
		mu                      sync.Mutex
		crashErr                error
		chKilled, redisKilled   time.Time
		flushesAfter, rowsAfter int
	)
	restarted := make(chan error, 1)
	var onFlush func(clickhouse.Flush)
	var crashRedis func()
	if faults {
		master, err := cl.RedisSlotMaster(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		onFlush = func(f clickhouse.Flush) {
			mu.Lock()
			defer mu.Unlock()
			if chKilled.IsZero() {
				crashErr = errors.Join(crashErr, cl.Crash("clickhouse-s2r2"))
				chKilled = time.Now()
				return
			}
			flushesAfter++
			rowsAfter += f.Rows
		}
		crashRedis = func() {
			mu.Lock()
			crashErr = errors.Join(crashErr, cl.Crash(master))
			redisKilled = time.Now()
			mu.Unlock()
			go func() {
				time.Sleep(15 * time.Second)
				restarted <- cl.StartMissing(ctx)
			}()
		}
		t.Logf("will crash clickhouse-s2r2 after the ClickHouse sink's first flush, and %s (the master of slot 0) at the feature sink's first write", master)
	} else {
		close(restarted)
	}
	testenv.RunUntilCommitted(t, ctx, env.Admin, "ingest", env.Ingest.Group, []string{env.Ingest.InferenceTopic, env.Ingest.GatewayTopic}, func(ctx context.Context) error {
		return ingest.Run(ctx, env.Ingest, ingest.RunConfig{Kafka: env.Kafka, Registry: env.Registry, SensitiveWords: env.Moderation(t), StorageDir: t.TempDir(), Logger: quiet})
	})
	newSink := func() *clickhouse.Sink {
		sink, err := clickhouse.New(clickhouse.Config{Group: env.SinkGroup, Topic: env.Ingest.EnrichedTopic, DLQTopic: env.SinkDLQ,
			BatchRows: 500, BatchInterval: 200 * time.Millisecond, FromStart: true, BackoffMin: 20 * time.Millisecond, BackoffMax: time.Second},
			clickhouse.RunConfig{Kafka: env.Kafka, Registry: env.Registry, ClickHouse: chcfg, Logger: quiet, OnFlush: onFlush})
		if err != nil {
			t.Fatal(err)
		}
		return sink
	}
	testenv.RunUntilCommitted(t, ctx, env.Admin, "sink-clickhouse", env.SinkGroup, []string{env.Ingest.EnrichedTopic}, newSink().Run)
	onFlush = nil // the replay's sink runs without faults

	// The feature sink on the Redis Cluster (with a master crashed as it writes, under faults).
	var store features.Store = redis.NewWriter(rdb, redis.Config{})
	if faults {
		store = &crashOnFirstSubmit{Store: store, crash: crashRedis}
	}
	testenv.RunUntilCommitted(t, ctx, env.Admin, "sink-features", env.Features.Group, []string{env.Ingest.EnrichedTopic}, func(ctx context.Context) error {
		return features.Run(ctx, env.Features, features.RunConfig{Kafka: env.Kafka, Registry: env.Registry, Store: store,
			StorageDir: t.TempDir(), Logger: quiet})
	})
	if faults {
		mu.Lock()
		if crashErr != nil {
			t.Fatal(crashErr)
		}
		if chKilled.IsZero() || redisKilled.IsZero() || flushesAfter == 0 || rowsAfter == 0 {
			t.Fatalf("the crashes did not come mid-run: ClickHouse at %v with %d flushes (%d rows) after it, Redis at %v",
				chKilled, flushesAfter, rowsAfter, redisKilled)
		}
		t.Logf("after clickhouse-s2r2 crashed the ClickHouse sink committed %d more flushes (%d rows); the feature sink committed everything %v after the Redis master crashed (%d write retries, %d ops written)",
			flushesAfter, rowsAfter, time.Since(redisKilled).Round(time.Millisecond), store.Retries(), store.Written())
		mu.Unlock()
	}

	// Lost 0, duplicates 0, through the Distributed tables, read on the other shard's replica.
	want := map[string]bool{}
	for _, e := range m.Entries {
		if e.Kind == loadgen.KindOriginal && e.Topic == env.Ingest.InferenceTopic {
			want[e.RequestID] = true
		}
	}
	rc := chcfg
	rc.Addr = hosts[3]
	if faults {
		if err := <-restarted; err != nil {
			t.Fatal(err)
		}
		// The restart returned: the Redis Cluster is settled again, as the next user of the
		// stack (make demo-cluster) needs it.
		if _, err := cl.RedisConverged(ctx); err != nil {
			t.Fatalf("deploy/local/stack --cluster up returned before the Redis Cluster converged: %v", err)
		}
		t.Logf("clickhouse-s2r2 and the Redis master are back, the Redis Cluster converged")
	}
	reader, err := chschema.Open(ctx, rc)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	if faults {
		// Read on the replica that was down, once it has fetched what it missed.
		if err := reader.Exec(ctx, "SYSTEM SYNC REPLICA inference_results_local"); err != nil {
			t.Fatal(err)
		}
	}
	// An outage is retried, never dead-lettered: the sink's own DLQ stays empty.
	ends, err := kadm.NewClient(env.Admin).ListEndOffsets(ctx, env.SinkDLQ)
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset != 0 {
			t.Errorf("the ClickHouse sink dead-lettered %d records in partition %d", o.Offset, o.Partition)
		}
	})
	check := oracle(t, ctx, reader, "SELECT request_id, count() FROM v_inference_results GROUP BY request_id", want)
	start := time.Now()
	lost, dups, extra := converge(check)
	t.Logf("oracle: %d originals; lost %d, duplicates %d, not in the manifest %d (converged after %v)", len(want), lost, dups, extra, time.Since(start).Round(time.Millisecond))
	if len(want) < 500 || lost != 0 || dups != 0 || extra != 0 {
		t.Fatalf("through v_inference_results: %d originals, lost %d, duplicates %d, unknown %d", len(want), lost, dups, extra)
	}
	if !faults {
		replayOnCluster(t, ctx, env, chcfg, newSink, reader, check, len(want))
		streamOnCluster(t, ctx, env, chcfg, reader, hosts, quiet)
	}
	s1 := queryCount(t, ctx, reader, "SELECT count() FROM remote('"+hosts[0]+"', "+env.DB+".inference_results_local)")
	s2 := queryCount(t, ctx, reader, "SELECT count() FROM remote('"+hosts[2]+"', "+env.DB+".inference_results_local)")
	t.Logf("inference rows stored per shard: %d and %d", s1, s2)
	if s1 == 0 || s2 == 0 {
		t.Fatalf("rows per shard %d and %d: want both shards used", s1, s2)
	}

	chCounts := map[string]float64{}
	trows, err := reader.Query(ctx, "SELECT tenant_id, count() FROM v_gateway_logs WHERE phase = ? GROUP BY tenant_id ORDER BY tenant_id", avro.PhaseResponse)
	if err != nil {
		t.Fatal(err)
	}
	var tenants []map[string]any
	var ids []string
	for trows.Next() {
		var id string
		var n uint64
		if err := trows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		chCounts[id] = float64(n)
		ids = append(ids, id)
		tenants = append(tenants, map[string]any{"tenant_id": id})
	}
	trows.Close()
	if len(ids) < 3 {
		t.Fatalf("%d tenants in v_gateway_logs, want 3 or more", len(ids))
	}
	python, repo := testenv.FeastSetup(t, env.Features.Project, t.TempDir(), "BACKFLOW_REDIS_MODE=cluster", "BACKFLOW_REDIS_ADDRS="+strings.Join(seeds, ","))
	var got map[string][]any
	for try := 0; ; try++ { // the features' deltas may still be on their way through the loopback topic
		got = testenv.FeastReadOnline(t, python, repo, []string{"tenant_features:request_count"}, tenants)
		same := true
		for i, id := range ids {
			if v, _ := got["request_count"][i].(float64); v != chCounts[id] {
				same = false
			}
		}
		if same {
			break
		}
		if try == 10 {
			t.Fatalf("request_count per tenant via Feast %v, ClickHouse %v (tenants %v)", got["request_count"], chCounts, ids)
		}
		time.Sleep(3 * time.Second)
	}
	t.Logf("Feast read-back equals ClickHouse for %d tenants: %v", len(ids), chCounts)
}

// oracle returns a check of query's rows (a key and its row count) against want, the keys
// sent: how many are missing, how many have more than one row, and how many were not sent.
func oracle(t *testing.T, ctx context.Context, reader driver.Conn, query string, want map[string]bool) func() (lost, dups, extra int) {
	return func() (lost, dups, extra int) {
		rows, err := reader.Query(ctx, query)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		lost = len(want)
		for rows.Next() {
			var key string
			var n uint64
			if err := rows.Scan(&key, &n); err != nil {
				t.Fatal(err)
			}
			if want[key] {
				lost--
			} else {
				extra++
			}
			if n > 1 {
				dups++
			}
		}
		return lost, dups, extra
	}
}

// converge runs check until nothing is lost, for at most 30 s: a replica fetches a part a
// moment after the insert to the other replica returned, and a read through a Distributed
// table may pick either.
func converge(check func() (lost, dups, extra int)) (lost, dups, extra int) {
	start := time.Now()
	lost, dups, extra = check()
	for lost > 0 && time.Since(start) < 30*time.Second {
		time.Sleep(500 * time.Millisecond)
		lost, dups, extra = check()
	}
	return lost, dups, extra
}

func queryCount(t *testing.T, ctx context.Context, conn driver.Conn, q string) uint64 {
	t.Helper()
	var n uint64
	if err := conn.QueryRow(ctx, q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// replayOnCluster moves the ClickHouse sink's group back to the start with backflow replay,
// runs the sink again over every enriched record, and checks that the distributed views still
// hold each original once, and that the replay is recorded in the cluster's replay_log (one row
// per partition moved). Re-written rows carry the same version and collapse.
func replayOnCluster(t *testing.T, ctx context.Context, env *pipelinetest.Env, chcfg chschema.Conn, newSink func() *clickhouse.Sink,
	reader driver.Conn, check func() (lost, dups, extra int), originals int) {
	t.Helper()
	before := queryCount(t, ctx, reader, "SELECT count() FROM inference_results")
	p := replayToEarliest(t, ctx, env, env.SinkGroup, chcfg, "cluster test")
	testenv.RunUntilCommitted(t, ctx, env.Admin, "sink-clickhouse (replayed)", env.SinkGroup, []string{env.Ingest.EnrichedTopic}, newSink().Run)
	start := time.Now()
	lost, dups, extra := check()
	for (lost > 0 || dups > 0) && time.Since(start) < 30*time.Second {
		time.Sleep(500 * time.Millisecond)
		lost, dups, extra = check()
	}
	after := queryCount(t, ctx, reader, "SELECT count() FROM inference_results")
	logged := queryCount(t, ctx, reader, "SELECT count() FROM replay_log WHERE consumer_group = '"+env.SinkGroup+"'")
	t.Logf("replay of %s re-read %d records: inference rows stored %d before, %d after; through the view lost %d, duplicates %d; replay_log rows %d for %d partitions",
		env.SinkGroup, p.Plan.Reread(), before, after, lost, dups, logged, len(p.Plan.Rows))
	if lost != 0 || dups != 0 || extra != 0 || after < before || logged != uint64(len(p.Plan.Rows)) {
		t.Fatalf("after the replay, through v_inference_results (%d originals): lost %d, duplicates %d, unknown %d; rows %d → %d; replay_log %d rows for %d partitions",
			originals, lost, dups, extra, before, after, logged, len(p.Plan.Rows))
	}
}

// crashOnFirstSubmit is the feature sink's store with a crash of a Redis node just before its
// first write goes out, so that write and the ones after it meet the outage.
type crashOnFirstSubmit struct {
	features.Store
	once  sync.Once
	crash func()
}

func (c *crashOnFirstSubmit) Submit(ctx context.Context, ops []feast.Op, done func(error)) error {
	c.once.Do(c.crash)
	return c.Store.Submit(ctx, ops, done)
}

// replayToEarliest moves group back to the earliest offsets of every topic it has committed
// on, with backflow replay's code (--all-topics --to-earliest --execute), and returns what it
// did; it fails t when there was nothing to re-read.
func replayToEarliest(t *testing.T, ctx context.Context, env *pipelinetest.Env, group string, chcfg chschema.Conn, reason string) *replay.Prepared {
	t.Helper()
	p, err := replay.Prepare(ctx, env.Admin, replay.Request{Group: group, Scope: replay.Scope{AllTopics: true},
		Spec: replay.Spec{Kind: replay.ToEarliest}}, replay.Options{ControlTopic: env.Ingest.ControlTopic, Reason: reason})
	if err != nil {
		t.Fatal(err)
	}
	if p.Plan.Reread() == 0 {
		t.Fatalf("the replay of %s would re-read nothing: %+v", group, p.Plan.Rows)
	}
	if _, err := p.Execute(ctx, env.Admin, replay.Systems{ClickHouse: chcfg, Replication: 1}); err != nil {
		t.Fatal(err)
	}
	return p
}

// streamOnCluster runs a declared stream, agent-task-event, into the cluster: the stage's plan
// creates a replicated agent_task_event_local on every shard under a Distributed table (version
// 1 in stream_migrations), and through v_agent_task_event, read on another host than the one
// written to, each event id sent is one row (lost 0, duplicates 0), the rows spread over both
// shards, and the poison is in the DLQ once.
func streamOnCluster(t *testing.T, ctx context.Context, env *pipelinetest.Env, chcfg chschema.Conn, reader driver.Conn, hosts []string, quiet *slog.Logger) {
	t.Helper()
	sc := chschema.StreamConfig{Name: "agent-task-event", Topic: "agent-" + env.ID, Group: "stream-agent-" + env.ID,
		DedupeKey: "event_id", EventTime: "event_time"}.WithDefaults()
	testenv.Topics(t, ctx, env.Kafka, 3, sc.Topic)
	testenv.Groups(t, env.Kafka, sc.Group)
	dlqBefore := endOffsetSum(t, ctx, env, env.SinkDLQ)
	schemaText, err := os.ReadFile("../deploy/streams/agent-task-event.avsc")
	if err != nil {
		t.Fatal(err)
	}
	prod, err := env.Kafka.NewClient(loadgen.ProducerOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	st, err := loadgen.RunStream(ctx, loadgen.StreamConfig{Topic: sc.Topic, Schema: string(schemaText), KeyField: "event_id", TimeField: "event_time",
		Records: 600, DuplicateRate: 0.05, PoisonRate: 0.02, Seed: 3}, prod, env.Registry, loadgen.Options{RunID: env.ID + "-s", Manifest: &buf})
	prod.Close()
	if err != nil || st.Failed > 0 {
		t.Fatalf("loadgen %s: %v (%v)", sc.Name, err, st)
	}
	m, err := loadgen.ParseManifest(&buf)
	if err != nil {
		t.Fatal(err)
	}
	want, poison := map[string]bool{}, 0
	for _, e := range m.Entries {
		if e.Valid() {
			want[e.RequestID] = true
		} else {
			poison++
		}
	}

	schema, id, err := pipelines.LatestSchema(ctx, env.Registry, sc)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := chschema.PlanStream(ctx, reader, sc, schema, id, chschema.Capabilities{})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := chschema.ApplyStream(ctx, chcfg, plan); err != nil || v != 1 || !plan.Create {
		t.Fatalf("the stream's plan (%s): recorded as version %d (%v), want a create as version 1", plan.Change(), v, err)
	}
	sink, err := clickhouse.NewStream(sc, clickhouse.Config{DLQTopic: env.SinkDLQ, BatchRows: 500, BatchInterval: 200 * time.Millisecond,
		FromStart: true, BackoffMin: 20 * time.Millisecond, BackoffMax: time.Second},
		clickhouse.StreamRun{Schema: schema}, clickhouse.RunConfig{Kafka: env.Kafka, Registry: env.Registry, ClickHouse: chcfg, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	testenv.RunUntilCommitted(t, ctx, env.Admin, sc.Stage(), sc.Group, []string{sc.Topic}, sink.Run)

	lost, dups, extra := converge(oracle(t, ctx, reader, "SELECT toString(event_id), count() FROM v_agent_task_event GROUP BY event_id", want))
	s1 := queryCount(t, ctx, reader, "SELECT count() FROM remote('"+hosts[0]+"', "+env.DB+".agent_task_event_local)")
	s2 := queryCount(t, ctx, reader, "SELECT count() FROM remote('"+hosts[2]+"', "+env.DB+".agent_task_event_local)")
	dead := endOffsetSum(t, ctx, env, env.SinkDLQ) - dlqBefore
	versions := queryCount(t, ctx, reader, "SELECT count() FROM stream_migrations WHERE stream = 'agent-task-event' AND version = 1 AND change = 'create'")
	t.Logf("stream %s on the cluster: %d keys sent (%d records, %d poison); lost %d, duplicates %d, unknown %d; rows per shard %d and %d; DLQ +%d",
		sc.Name, len(want), len(m.Entries), poison, lost, dups, extra, s1, s2, dead)
	if len(want) < 500 || lost != 0 || dups != 0 || extra != 0 || s1 == 0 || s2 == 0 || dead != int64(poison) || versions != 1 {
		t.Fatalf("stream on the cluster: lost %d, duplicates %d, unknown %d, rows per shard %d/%d, DLQ %d for %d poison, stream_migrations v1 rows %d",
			lost, dups, extra, s1, s2, dead, poison, versions)
	}
}

// endOffsetSum is the sum of topic's end offsets: how many records it holds.
func endOffsetSum(t *testing.T, ctx context.Context, env *pipelinetest.Env, topic string) int64 {
	t.Helper()
	ends, err := kadm.NewClient(env.Admin).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}
