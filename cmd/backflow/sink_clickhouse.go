package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/pipelines"
	"github.com/backflowhq/backflow/sinks/clickhouse"
)

func newSinkClickHouseCmd() *cobra.Command {
	var (
		cfg         clickhouse.SinkConfig
		migrate     bool
		mirrorDLQ   bool
		mirrorGroup string
	)
	cmd := &cobra.Command{
		Use:   "sink-clickhouse",
		Short: "Run the ClickHouse sink: enriched records into inference_results, gateway_logs and moderation_hits",
		Long: `sink-clickhouse is a Kafka consumer group over backflow.enriched. It writes every enriched record
to ClickHouse (inference_results or gateway_logs, plus one moderation_hits row per match), one
batch per table per flush, and a sink_ledger row per flushed partition; only then does it commit
the flushed offsets. It runs until SIGINT or SIGTERM, then flushes what it holds (bounded by
--insert-timeout) or leaves it uncommitted for the next run.

A flush happens at --batch-rows records or --batch-interval after the first buffered record.
ClickHouse outages (network, timeouts, TOO_MANY_PARTS, MEMORY_LIMIT_EXCEEDED, ...) are retried
with backoff while fetching is paused; nothing is dropped or dead-lettered. A record that does
not decode, or that ClickHouse rejects for its data, goes to the DLQ (stage sink-clickhouse).
A missing table or column, or bad credentials, stop the sink with exit code 1.

With --mirror-dlq (default) it also mirrors the DLQ topic into dlq_entries (view v_dlq_entries),
one row per DLQ record with its origin, stage, class and message, for dashboards.

Rows are versioned by (epoch, source offset), so re-written records collapse: read through the
views v_inference_results, v_gateway_logs and v_moderation_hits. Tables must exist: run
'backflow migrate' first, or pass --migrate.`,
		Example: `  backflow sink-clickhouse --env-file .stack/env --migrate
  backflow sink-clickhouse --group backflow-sink-clickhouse --batch-rows 20000 --batch-interval 2s`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.BatchRows <= 0 || cfg.BatchInterval <= 0 || cfg.InsertTimeout <= 0 {
				return fmt.Errorf("%w: --batch-rows, --batch-interval and --insert-timeout must be positive, got %d, %v, %v",
					errUsage, cfg.BatchRows, cfg.BatchInterval, cfg.InsertTimeout)
			}
			if err := cfg.Validate(); err != nil {
				return fmt.Errorf("%w: %w", errUsage, err)
			}
			conn, err := loadConfig()
			if err != nil {
				return err
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			if err := preflight(cmd.Context(), conn, log, pipelines.SystemKafka, pipelines.SystemRegistry, pipelines.SystemClickHouse); err != nil {
				return err
			}
			if migrate {
				ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Minute)
				db, err := clickhouse.Open(ctx, conn.ClickHouse)
				if err != nil {
					cancel()
					return err
				}
				applied, err := clickhouse.Migrate(ctx, db)
				db.Close()
				cancel()
				for _, m := range applied {
					log.Info("applied migration", "version", m.Version, "name", m.Name)
				}
				if err != nil {
					return err
				}
			}
			reg, err := avro.NewRegistryClient(conn.Registry)
			if err != nil {
				return err
			}
			sink, err := clickhouse.New(cfg, clickhouse.RunConfig{Kafka: conn.Kafka, Registry: reg, ClickHouse: conn.ClickHouse, Logger: log})
			if err != nil {
				return fmt.Errorf("%w: %w", errUsage, err)
			}
			start := time.Now()
			g, ctx := errgroup.WithContext(cmd.Context())
			g.Go(func() error { return sink.Run(ctx) })
			if mirrorDLQ {
				g.Go(func() error {
					return clickhouse.RunDLQMirror(ctx, clickhouse.MirrorConfig{Group: mirrorGroup, Topic: cfg.DLQTopic,
						BatchRows: cfg.BatchRows, BatchInterval: cfg.BatchInterval, InsertTimeout: cfg.InsertTimeout, FromStart: cfg.FromStart},
						conn.Kafka, conn.ClickHouse, log)
				})
			}
			err = g.Wait()
			st := sink.Stats()
			log.Info("clickhouse sink stopped", "records", st.Records, "rows", st.Rows, "hit_rows", st.HitRows,
				"dlq", st.DLQ, "flushes", st.Flushes, "retries", st.Retries, "dropped_on_revoke", st.Dropped, "ran", time.Since(start).Round(time.Second))
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Group, "group", clickhouse.DefaultGroup, "Kafka consumer group (also recorded in sink_ledger)")
	f.StringVar(&cfg.Topic, "topic", clickhouse.DefaultTopic, "enriched topic to consume")
	f.StringVar(&cfg.DLQTopic, "dlq-topic", "backflow.dlq", "dead-letter topic for records that do not decode or that ClickHouse rejects")
	f.IntVar(&cfg.BatchRows, "batch-rows", clickhouse.DefaultBatchRows, "flush at this many buffered records; also the cap on buffered records")
	f.DurationVar(&cfg.BatchInterval, "batch-interval", clickhouse.DefaultBatchInterval, "flush this long after the first buffered record")
	f.DurationVar(&cfg.InsertTimeout, "insert-timeout", 30*time.Second, "bound on one INSERT attempt (a timed-out attempt is retried)")
	f.BoolVar(&cfg.FromStart, "from-start", true, "a group with no committed offsets starts at the topic's start (false: at its end)")
	f.BoolVar(&migrate, "migrate", false, "apply pending ClickHouse migrations before starting")
	f.BoolVar(&mirrorDLQ, "mirror-dlq", true, "also mirror --dlq-topic into the dlq_entries table (its own consumer group)")
	f.StringVar(&mirrorGroup, "mirror-dlq-group", clickhouse.DefaultMirrorGroup, "consumer group of the DLQ mirror")
	return cmd
}
