package main

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/moderation"
	"github.com/backflowhq/backflow/pipelines"
	"github.com/backflowhq/backflow/processors/ingest"
)

func newIngestCmd() *cobra.Command {
	var (
		cfg        ingest.Config
		policy     string
		storageDir string
	)
	cmd := &cobra.Command{
		Use:   "ingest",
		Short: "Run the ingest stage: decode, dedupe, moderate and emit enriched records",
		Long: `ingest consumes model-inference-result and gateway-log, decodes each record with the schema
registry, sends bad records to the DLQ, drops duplicates by requestId (per topic and gateway phase),
screens texts with the sensitive-word service in batches, and emits one enriched record per valid
original to backflow.enriched. It runs until SIGINT or SIGTERM.

Offsets are committed only when a record and every record before it in its partition reached the
enriched topic or the DLQ. Outages of the registry, the sensitive-word service or Kafka are retried
with backoff; they never send records to the DLQ. With --policy block (default) a long moderation
outage pauses consumption; with --policy pass records go through flagged moderation=UNAVAILABLE.

The sensitive-word service is at BACKFLOW_SENSITIVE_URL (default http://127.0.0.1:18090); its bearer
token, if any, comes from BACKFLOW_SENSITIVE_TOKEN or the file BACKFLOW_SENSITIVE_TOKEN_FILE names.`,
		Example: `  backflow ingest --env-file .stack/env
  backflow ingest --group backflow-ingest --batch-size 200 --policy pass`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Policy = ingest.Policy(policy)
			if err := cfg.Validate(); err != nil {
				return fmt.Errorf("%w: %w", errUsage, err)
			}
			conn, err := loadConfig()
			if err != nil {
				return err
			}
			checker, err := moderation.New(conn.Moderation)
			if err != nil {
				return fmt.Errorf("%w: %w", errUsage, err)
			}
			reg, err := avro.NewRegistryClient(conn.Registry)
			if err != nil {
				return err
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			if err := preflight(cmd.Context(), conn, log, pipelines.SystemKafka, pipelines.SystemRegistry, pipelines.SystemModeration); err != nil {
				return err
			}
			return ingest.Run(cmd.Context(), cfg, ingest.RunConfig{Kafka: conn.Kafka, Registry: reg, Checker: checker, StorageDir: storageDir, Logger: log})
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Group, "group", "backflow-ingest", "goka group: consumer group, table and loopback topic prefix")
	f.StringVar(&cfg.InferenceTopic, "inference-topic", avro.TopicInferenceResult, "source topic of inference results")
	f.StringVar(&cfg.GatewayTopic, "gateway-topic", avro.TopicGatewayLog, "source topic of gateway logs")
	f.StringVar(&cfg.EnrichedTopic, "enriched-topic", "backflow.enriched", "topic enriched records go to")
	f.StringVar(&cfg.DLQTopic, "dlq-topic", "backflow.dlq", "dead-letter topic")
	f.StringVar(&cfg.ControlTopic, "control-topic", "backflow.control", "compacted topic holding the replay epoch")
	f.DurationVar(&cfg.DedupeWindow, "dedupe-window", 7*24*time.Hour, "how long a requestId keeps later records with it out")
	f.IntVar(&cfg.BatchSize, "batch-size", 100, "texts per moderation batch")
	f.DurationVar(&cfg.BatchLinger, "batch-linger", 100*time.Millisecond, "longest wait before a partial batch is sent")
	f.IntVar(&cfg.MaxInFlight, "max-in-flight", 2000, "records per source partition read but not yet committed; consumption pauses at the cap")
	f.StringVar(&policy, "policy", "block", "during a moderation outage: block (pause, drop nothing) or pass (emit flagged UNAVAILABLE)")
	f.IntVar(&cfg.MaxAttempts, "max-attempts", 5, "moderation attempts before --policy pass lets a batch through, and mismatch retries before checking one by one")
	f.StringVar(&storageDir, "storage-dir", "", "local table storage (default: <tmp>/backflow-goka); rebuilt from the changelog when missing")
	return cmd
}
