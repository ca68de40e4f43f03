package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/lovoo/goka"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/claimstore"
	"github.com/backflowhq/backflow/internal/control"
	"github.com/backflowhq/backflow/internal/dlq"
	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/internal/ops"
)

// ErrNotCopartitioned: the source topics have different partition counts, so records of one
// requestId could not meet in one table partition.
var ErrNotCopartitioned = errors.New("ingest: source topics are not co-partitioned")

// RunConfig is what Run needs besides the stage's Config.
type RunConfig struct {
	Kafka          kafka.Conn
	Registry       avro.Registry
	SensitiveWords SensitiveWords
	// StorageDir holds goka's local table storage (rebuilt from the changelog when missing).
	// Default: <temp dir>/backflow-goka.
	StorageDir string
	// Standby keeps a warm copy of every table partition this instance does not own (goka's
	// hot standby, kafka.Tables). Default false.
	Standby bool
	Logger  *slog.Logger
	// OnReady, if set, is called with the processor once goka is consuming.
	OnReady func(*Processor)
	// Metrics is the stage's handle on the process's metrics (ops.Metrics.Stage); nil
	// records nothing.
	Metrics *ops.Stage
	// Waiting, if set, is told why the stage cannot start yet while it waits for its source
	// topics or for Kafka (see kafka.SourceWait).
	Waiting func(error)
}

// Run checks the topics, creates the internal ones that are missing, reads the replay epoch
// and runs the ingest group until ctx ends. Records in flight at the end stay uncommitted and
// are redelivered to the next run.
func Run(ctx context.Context, cfg Config, rc RunConfig) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.withDefaults()
	log := rc.Logger
	if log == nil {
		log = slog.Default()
	}
	cl, err := rc.Kafka.NewClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	// The wait for the source topics is unbounded (it ends with ctx); what follows is not.
	partitions, err := prepare(ctx, cl, cfg, rc.Kafka.TableReplication, kafka.SourceWait{Log: log.With("stage", "ingest"), Waiting: rc.Waiting})
	if err != nil && ctx.Err() != nil {
		return nil // stopped while waiting for the source topics: a clean stop
	}
	if err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	epoch, err := control.ReadEpoch(sctx, cl, cfg.ControlTopic, cfg.Group)
	cancel()
	if err != nil {
		return err
	}
	dw, err := dlq.NewWriter(cl, dlq.Config{Topic: cfg.DLQTopic, Stage: "ingest"})
	if err != nil {
		return err
	}
	life := kafka.NewGokaLife(ctx)
	defer life.Close()
	m := NewMetrics(rc.Metrics, cfg.Group)
	p, err := NewProcessor(life.Ctx, cfg, partitions, epoch, Deps{Registry: rc.Registry, Producer: cl, DeadLetters: dw, SensitiveWords: rc.SensitiveWords, Logger: log, Metrics: m, Fail: life.Fail})
	if err != nil {
		return err
	}
	if m != nil {
		go func() {
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-life.Ctx.Done():
					m.setInFlight(0)
					return
				case <-t.C:
					m.setInFlight(p.InFlight())
				}
			}
		}()
	}
	cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
	kafka.FlagTableChangelog(cctx, cl, rc.Metrics.Registerer(), log, cfg.TableTopic())
	ccancel()
	dir := rc.StorageDir
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "backflow-goka")
	}
	tables := kafka.NewTables(claimstore.Builder(dir, StoreConfig(cfg)), rc.Standby)
	defer func() {
		if err := tables.Close(); err != nil {
			log.Warn("ingest: close table storage", "error", err)
		}
	}()
	opts := append(rc.Kafka.ProcessorOptions(life.Ctx), GokaOptions()...)
	opts = append(opts, tables.Options(nil)...)
	opts = append(opts, goka.WithUpdateCallback(claimstore.Update(cfg.DedupeWindow, time.Now)),
		goka.WithLogger(kafka.GokaLogger(log)), p.ProducerOption(rc.Kafka.GokaProducerBuilder()))
	proc, err := kafka.NewGokaProcessor(life.Ctx, rc.Kafka.Brokers, p.Graph(), opts...)
	if err != nil {
		return fmt.Errorf("ingest: processor: %w", err)
	}
	log.Info("ingest starting", "group", cfg.Group, "partitions", partitions, "epoch", epoch, "policy", cfg.Policy,
		"instance_id", rc.Kafka.InstanceID, "standby", rc.Standby)
	err = life.Run(proc, kafka.GokaRun{Name: "ingest", Log: log, Metrics: rc.Metrics, Waiting: rc.Waiting,
		OnReady: func() {
			if rc.OnReady != nil {
				rc.OnReady(p)
			}
		},
		// Release in-flight records uncommitted so goka's shutdown does not wait on them.
		OnStopping: p.Close,
	})
	p.Close()
	st := p.Stats.Snapshot()
	log.Info("ingest stopped", "read", st.Read, "emitted", st.Emitted, "duplicates", st.Duplicates, "dead_lettered", st.DeadLettered, "forwarded", st.Forwarded,
		"moderation_texts", st.ModerationTexts, "moderation_items", st.ModerationItems)
	if err != nil && (errors.Is(err, errShutdown) || errors.Is(err, context.Canceled)) && ctx.Err() != nil {
		return nil
	}
	return err
}

// StoreConfig is the dedupe table's storage: claims kept for the dedupe window, in time
// segments dropped whole, checked every ExpireEvery.
func StoreConfig(cfg Config) claimstore.Config {
	cfg = cfg.withDefaults()
	return claimstore.Config{Window: cfg.DedupeWindow, DropEvery: cfg.ExpireEvery}
}

// TableTopicConfigs are the dedupe table changelog's topic configs: compacted (a key's newest
// claim is kept) and deleted by time a day past the dedupe window, in log segments of a
// seventh of it, so the changelog, like the store, holds only the window and a restore reads
// no more than that. Kafka deletes a log segment whole once its newest record is past
// retention.ms, as the store drops its time segments.
func TableTopicConfigs(cfg Config) map[string]string {
	cfg = cfg.withDefaults()
	return map[string]string{"cleanup.policy": "compact,delete",
		"retention.ms": strconv.FormatInt((cfg.DedupeWindow + 24*time.Hour).Milliseconds(), 10),
		"segment.ms":   strconv.FormatInt(max(cfg.DedupeWindow/7, time.Hour).Milliseconds(), 10)}
}

// Prepare waits until both source topics exist (kafka.AwaitSources: for as long as ctx
// allows), checks they are co-partitioned, and creates the internal topics that are missing:
// enriched, DLQ and loopback with the sources' partition count, and the compacted control
// topic. It returns the partition count.
func Prepare(ctx context.Context, cl *kgo.Client, cfg Config, replication int) (int, error) {
	return prepare(ctx, cl, cfg, replication, kafka.SourceWait{})
}

func prepare(ctx context.Context, cl *kgo.Client, cfg Config, replication int, w kafka.SourceWait) (int, error) {
	cfg = cfg.withDefaults()
	if replication < 1 {
		replication = 1
	}
	td, err := kafka.AwaitSources(ctx, cl, w,
		kafka.Source{Topic: cfg.InferenceTopic, Key: "ingest.inference_topic"},
		kafka.Source{Topic: cfg.GatewayTopic, Key: "ingest.gateway_topic"})
	if err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		return 0, fmt.Errorf("ingest: source topics: %w", err)
	}
	// Both exist now; partition counts that differ are an operator's to fix, not a wait's.
	n := len(td[cfg.InferenceTopic].Partitions)
	if g := len(td[cfg.GatewayTopic].Partitions); g != n {
		return 0, fmt.Errorf("%w: %s has %d partitions, %s has %d", ErrNotCopartitioned, cfg.InferenceTopic, n, cfg.GatewayTopic, g)
	}
	rf := int16(replication)
	if err := kafka.EnsureTopics(ctx, cl,
		kafka.TopicSpec{Name: cfg.EnrichedTopic, Partitions: int32(n), Replication: rf},
		kafka.TopicSpec{Name: cfg.DLQTopic, Partitions: int32(n), Replication: rf},
		kafka.TopicSpec{Name: cfg.LoopTopic(), Partitions: int32(n), Replication: rf},
		kafka.TopicSpec{Name: cfg.ControlTopic, Partitions: 1, Replication: rf, Configs: map[string]string{"cleanup.policy": "compact"}},
		// goka would create the table's changelog itself, then at once ask each partition's
		// leader for offsets; on a cluster of several brokers that leader may not be known
		// yet (NOT_LEADER_FOR_PARTITION), and the stage stopped at start-up. Created here,
		// EnsureTopics waits until every partition has a leader.
		kafka.TopicSpec{Name: cfg.TableTopic(), Partitions: int32(n), Replication: rf, Configs: TableTopicConfigs(cfg)},
	); err != nil {
		return 0, fmt.Errorf("ingest: %w", err)
	}
	return n, nil
}
