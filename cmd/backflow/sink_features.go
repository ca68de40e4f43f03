package main

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/pipelines"
	"github.com/backflowhq/backflow/sinks/features"
)

func newSinkFeaturesCmd() *cobra.Command {
	var (
		cfg        features.SinkConfig
		storageDir string
	)
	cmd := &cobra.Command{
		Use:   "sink-features",
		Short: "Run the feature-store sink: enriched records into Redis in Feast's layout",
		Long: `sink-features consumes backflow.enriched as its own goka group and writes online features to
Redis in Feast ` + features.FeastVersion + `'s Redis online-store layout, so Feast's SDK reads them with
get_online_features (feature repo: deploy/feast). It runs until SIGINT or SIGTERM.

Feature views: request_features (per requestId, with a Redis key TTL), tenant_features and
model_features (all-time aggregates kept in the group table). Aggregates count each request once,
at its gateway RESPONSE record; redeliveries, ingest re-emits and new-epoch replays are no-ops.
Redis outages are retried with backoff and hold up consumption; nothing is dropped. An enriched
record that cannot be decoded goes to the DLQ (stage sink-features).`,
		Example: `  backflow sink-features --env-file .stack/env
  backflow sink-features --group backflow-features --request-ttl 72h`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cfg.Validate(); err != nil {
				return fmt.Errorf("%w: %w", errUsage, err)
			}
			conn, err := loadConfig()
			if err != nil {
				return err
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			if err := preflight(cmd.Context(), conn, log, pipelines.SystemKafka, pipelines.SystemRegistry, pipelines.SystemRedis); err != nil {
				return err
			}
			reg, err := avro.NewRegistryClient(conn.Registry)
			if err != nil {
				return err
			}
			rdb, err := features.Open(cmd.Context(), conn.Redis)
			if err != nil {
				return err
			}
			defer rdb.Close()
			return features.Run(cmd.Context(), cfg, features.RunConfig{Kafka: conn.Kafka, Registry: reg, Redis: rdb, StorageDir: storageDir, Logger: log})
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Group, "group", "backflow-features", "goka group: consumer group, table and loopback topic prefix")
	f.StringVar(&cfg.EnrichedTopic, "enriched-topic", "backflow.enriched", "topic of enriched records")
	f.StringVar(&cfg.DLQTopic, "dlq-topic", "backflow.dlq", "dead-letter topic for enriched records that cannot be decoded")
	f.StringVar(&cfg.Project, "project", "backflow", "Feast project (suffix of every Redis key)")
	f.DurationVar(&cfg.RequestTTL, "request-ttl", 7*24*time.Hour, "Redis TTL of request_features keys")
	f.DurationVar(&cfg.RequestWindow, "request-window", 7*24*time.Hour, "how long a request's table entry (what makes its replayed records no-ops) is kept after its last record")
	f.DurationVar(&cfg.SweepEvery, "sweep-every", time.Hour, "how often expired request entries are deleted")
	f.IntVar(&cfg.Writer.MaxBatch, "redis-batch", 500, "most Redis writes per pipeline")
	f.DurationVar(&cfg.Writer.Linger, "redis-linger", 20*time.Millisecond, "longest wait before a partial pipeline is sent")
	f.StringVar(&storageDir, "storage-dir", "", "local table storage (default: <tmp>/backflow-goka-features); rebuilt from the changelog when missing")
	return cmd
}
