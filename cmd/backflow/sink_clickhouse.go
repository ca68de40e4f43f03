package main

import (
	"github.com/spf13/cobra"

	"github.com/backflowhq/backflow/pipelines"
)

func newSinkClickHouseCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sink-clickhouse",
		Short: "Run the ClickHouse sink: enriched records into inference_results, gateway_logs and moderation_hits",
		Long: `sink-clickhouse is a Kafka consumer group over backflow.enriched. It writes every enriched record
to ClickHouse (inference_results or gateway_logs, plus one moderation_hits row per match), one
batch per table per flush, and a sink_ledger row per flushed partition; only then does it commit
the flushed offsets. It runs until SIGINT or SIGTERM, then flushes what it holds (bounded by
--insert-timeout) or leaves it uncommitted for the next run. It is
'backflow run --stages sink-clickhouse'.

A flush happens at --batch-rows records or --batch-interval after the first buffered record.
ClickHouse outages (network, timeouts, TOO_MANY_PARTS, MEMORY_LIMIT_EXCEEDED, ...) are retried
with backoff while fetching is paused; nothing is dropped or dead-lettered. A record that does
not decode, or that ClickHouse rejects for its data, goes to the DLQ (stage sink-clickhouse).
A missing table or column, or bad credentials, stop the sink with exit code 1.

With --mirror-dlq (default) it also mirrors the DLQ topic into dlq_entries (view v_dlq_entries),
one row per DLQ record with its origin, stage, class and message, for dashboards.

Rows are versioned by (epoch, source offset), so re-written records collapse: read through the
views v_inference_results, v_gateway_logs and v_moderation_hits. Tables must exist: run
'backflow migrate' first, or pass --migrate.
Every flag is a key of the sink_clickhouse section of --config; metrics, health and exit codes
are as for 'backflow run'.`,
		Example: `  backflow sink-clickhouse --env-file .stack/env --migrate
  backflow sink-clickhouse --group backflow-sink-clickhouse --batch-rows 20000 --batch-interval 2s`,
		Args: usageArgs(cobra.NoArgs),
	}
	cmd.RunE = addRunFlags(cmd, pipelines.StageSinkClickHouse, processKeys, "sink_clickhouse").run
	return cmd
}
