package pipelines

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/internal/moderation"
	"github.com/backflowhq/backflow/internal/ops"
	"github.com/backflowhq/backflow/processors/features"
	"github.com/backflowhq/backflow/processors/ingest"
	"github.com/backflowhq/backflow/sinks/clickhouse"
	"github.com/backflowhq/backflow/sinks/clickhouse/dlqmirror"
	"github.com/backflowhq/backflow/sinks/clickhouse/rollups"
	"github.com/backflowhq/backflow/sinks/redis"
)

// stage is one stage as data: what it is called, which systems it needs (what /readyz
// checks), which consumer groups it runs (whose lag is exported), the parts that report
// readiness (the stage, and the DLQ mirror of sink-clickhouse) and how it runs. run returns
// when ctx ends (nil after a clean stop) or the stage fails.
type stage struct {
	name   string
	needs  []string
	groups func(Config) []string
	parts  func(Config) []string
	run    func(ctx context.Context, e *stageEnv) error
}

func justThe(name string) func(Config) []string {
	return func(Config) []string { return []string{name} }
}

// stageEnv is what a stage runs with.
type stageEnv struct {
	cfg     Config
	conn    Conns
	log     *slog.Logger
	metrics *ops.Metrics
	ready   *ops.Readiness

	migrateMu sync.Mutex // migrateBuiltIn runs once per process
	migrated  bool
}

// readyHook returns the callback a stage part reports its consuming state with: /readyz and
// the backflow_stage_ready gauge. Run has registered the part as starting.
func (e *stageEnv) readyHook(name string) func(bool) {
	st := e.metrics.Stage(name)
	return func(ok bool) {
		st.SetReady(ok)
		if ok {
			e.ready.SetStage(name, nil)
		} else {
			e.ready.SetStage(name, errors.New("partitions lost; rejoining the group"))
		}
	}
}

// waitingHook returns the callback a stage reports its start-up wait with (its source topics
// not in the metadata yet, or Kafka not answering, or its group table being restored):
// /readyz shows why it is not ready.
func (e *stageEnv) waitingHook(name string) func(error) {
	return func(err error) {
		var restore *kafka.RestoreStatus
		switch {
		case err == nil:
			err = errors.New("starting: topics found, no partitions assigned yet")
		case errors.As(err, &restore):
			// says itself what it waits for: "restoring table partition 2: 1.2M of 3.4M records, ..."
		default:
			err = fmt.Errorf("waiting: %w", err)
		}
		e.ready.SetStage(name, err)
	}
}

// waitForSources is the start-up wait (kafka.AwaitSources) of a stage that has no Prepare of
// its own: the declared streams. It fails only when ctx ends.
func (e *stageEnv) waitForSources(ctx context.Context, log *slog.Logger, name string, sources ...kafka.Source) error {
	cl, err := e.conn.Kafka.NewClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	_, err = kafka.AwaitSources(ctx, cl, kafka.SourceWait{Log: log, Waiting: e.waitingHook(name)}, sources...)
	return err
}

var stages = []stage{
	{
		name:   StageIngest,
		needs:  []string{"kafka", "registry", "sensitive-words"},
		groups: func(f Config) []string { return []string{f.Ingest.Group} },
		parts:  justThe(StageIngest),
		run: func(ctx context.Context, e *stageEnv) error {
			checker, err := moderation.New(e.conn.SensitiveWords)
			if err != nil {
				return err
			}
			defer checker.Close()
			reg, err := avro.NewRegistryClient(e.conn.Registry)
			if err != nil {
				return err
			}
			ready := e.readyHook(StageIngest)
			cfg := e.cfg.Ingest
			// ingest.Run waits for its source topics itself: one wait, until they exist.
			return ingest.Run(ctx, cfg.Config, ingest.RunConfig{Kafka: e.conn.Kafka, Registry: reg, SensitiveWords: checker,
				StorageDir: cfg.StorageDir, Standby: cfg.Standby, Logger: e.log, Metrics: e.metrics.Stage(StageIngest),
				OnReady: func(*ingest.Processor) { ready(true) }, Waiting: e.waitingHook(StageIngest)})
		},
	},
	{
		name:  StageSinkClickHouse,
		needs: []string{"kafka", "registry", "clickhouse"},
		groups: func(f Config) []string {
			out := []string{f.SinkClickHouse.Group}
			if f.SinkClickHouse.MirrorDLQ {
				out = append(out, f.SinkClickHouse.MirrorDLQGroup)
			}
			if f.SinkClickHouse.Rollups {
				out = append(out, f.SinkClickHouse.RollupGroup)
			}
			return out
		},
		parts: func(f Config) []string {
			out := []string{StageSinkClickHouse}
			if f.SinkClickHouse.MirrorDLQ {
				out = append(out, dlqmirror.Stage)
			}
			if f.SinkClickHouse.Rollups {
				out = append(out, rollups.Stage)
			}
			return out
		},
		run: runSinkClickHouse,
	},
	{
		name:   StageSinkFeatures,
		needs:  []string{"kafka", "registry", "redis"},
		groups: func(f Config) []string { return []string{f.SinkFeatures.Group} },
		parts:  justThe(StageSinkFeatures),
		run: func(ctx context.Context, e *stageEnv) error {
			reg, err := avro.NewRegistryClient(e.conn.Registry)
			if err != nil {
				return err
			}
			rdb, err := redis.OpenWaiting(ctx, e.conn.Redis, e.log.With("stage", StageSinkFeatures))
			if err != nil {
				if ctx.Err() != nil {
					return nil // stopped while Redis was unreachable
				}
				return err
			}
			defer rdb.Close()
			ready := e.readyHook(StageSinkFeatures)
			wcfg := e.cfg.SinkFeatures.Redis
			wcfg.Logger, wcfg.Metrics = e.log, e.metrics.Stage(StageSinkFeatures)
			store := redis.NewWriter(rdb, wcfg)
			return features.Run(ctx, e.cfg.SinkFeatures.Config, features.RunConfig{Kafka: e.conn.Kafka, Registry: reg, Store: store,
				StorageDir: e.cfg.SinkFeatures.StorageDir, Standby: e.cfg.SinkFeatures.Standby, Logger: e.log, Metrics: e.metrics.Stage(StageSinkFeatures),
				OnReady: func(*features.Processor) { ready(true) }, Waiting: e.waitingHook(StageSinkFeatures)})
		},
	},
}

func runSinkClickHouse(ctx context.Context, e *stageEnv) error {
	log := e.log.With("stage", StageSinkClickHouse)
	f := e.cfg
	if err := e.migrateBuiltIn(ctx, log); err != nil {
		return err
	}
	reg, err := avro.NewRegistryClient(e.conn.Registry)
	if err != nil {
		return err
	}
	sink, err := clickhouse.New(f.SinkClickHouse, clickhouse.RunConfig{Kafka: e.conn.Kafka, Registry: reg, ClickHouse: e.conn.ClickHouse,
		Logger: log, Metrics: e.metrics.Stage(StageSinkClickHouse), OnAssigned: e.readyHook(StageSinkClickHouse)})
	if err != nil {
		return err
	}
	var loop *clickhouse.Sink // the rollup loop
	if f.SinkClickHouse.Rollups {
		if err := rollups.EnsureTopic(ctx, e.conn.Kafka, f.SinkClickHouse); err != nil {
			return err
		}
		loop, err = rollups.New(f.SinkClickHouse, clickhouse.RunConfig{Kafka: e.conn.Kafka, ClickHouse: e.conn.ClickHouse,
			Logger: log.With("part", "rollups"), Metrics: e.metrics.Stage(rollups.Stage), OnAssigned: e.readyHook(rollups.Stage)})
		if err != nil {
			return err
		}
	}
	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return sink.Run(gctx) })
	if loop != nil {
		g.Go(func() error { return loop.Run(gctx) })
	}
	if f.SinkClickHouse.MirrorDLQ {
		mc := dlqmirror.ConfigOf(f.SinkClickHouse)
		mc.Metrics = e.metrics.Stage(dlqmirror.Stage)
		mc.OnAssigned = e.readyHook(dlqmirror.Stage)
		g.Go(func() error {
			return dlqmirror.Run(gctx, mc, e.conn.Kafka, e.conn.ClickHouse, log.With("part", "dlq-mirror"))
		})
	}
	err = g.Wait()
	st := sink.Stats()
	log.Info("clickhouse sink stopped", "records", st.Records, "rows", st.Rows, "hit_rows", st.HitRows,
		"dlq", st.DLQ, "flushes", st.Flushes, "retries", st.Retries, "dropped_on_revoke", st.Dropped, "ran", time.Since(start).Round(time.Second).String())
	return err
}

// StageNames lists the stages backflow run can start, in start order.
func StageNames() []string {
	out := make([]string, len(stages))
	for i, s := range stages {
		out[i] = s.name
	}
	return out
}

func stageByName(name string) (stage, error) {
	for _, s := range stages {
		if s.name == name {
			return s, nil
		}
	}
	return stage{}, fmt.Errorf("%w: unknown stage %q", ErrConfig, name)
}

// systemChecks are the dependency checks /readyz runs, by system name (as in Check).
var systemChecks = map[string]func(context.Context, Conns) (string, error){
	"kafka":              checkKafka,
	"registry":           checkRegistry,
	"clickhouse":         checkClickHouse,
	"redis":              checkRedis,
	SystemSensitiveWords: checkSensitiveWords,
}
