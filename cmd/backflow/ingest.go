package main

import (
	"github.com/spf13/cobra"

	"github.com/backflowhq/backflow/pipelines"
)

func newIngestCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ingest",
		Short: "Run the ingest stage: decode, dedupe, moderate and emit enriched records",
		Long: `ingest consumes model-inference-result and gateway-log, decodes each record with the schema
registry, sends bad records to the DLQ, drops duplicates by requestId (per topic and gateway phase),
screens texts with the sensitive-word service in batches, and emits one enriched record per valid
original to backflow.enriched. It runs until SIGINT or SIGTERM; it is 'backflow run --stages ingest'.

Offsets are committed only when a record and every record before it in its partition reached the
enriched topic or the DLQ. Outages of the registry, the sensitive-word service or Kafka are retried
with backoff; they never send records to the DLQ. With --policy block (default) a long moderation
outage pauses consumption; with --policy pass records go through flagged moderation=UNAVAILABLE.
On SIGTERM, records in flight stay uncommitted and are redelivered to the next run.

The sensitive-word service is at BACKFLOW_SENSITIVE_WORDS_URL (no default; .stack/env has the local one); its bearer
token, if any, comes from BACKFLOW_SENSITIVE_WORDS_TOKEN or the file sensitive_words.token_file names.
Every flag is a key of the ingest section of --config; metrics, health and exit codes are as for
'backflow run'.`,
		Example: `  backflow ingest --env-file .stack/env
  backflow ingest --group backflow-ingest --batch-size 200 --policy pass --metrics-addr 127.0.0.1:9465`,
		Args: usageArgs(cobra.NoArgs),
	}
	cmd.RunE = addRunFlags(cmd, pipelines.StageIngest, processKeys, "ingest").run
	return cmd
}
