package main

import (
	"github.com/spf13/cobra"

	"github.com/backflowhq/backflow/internal/feast"
	"github.com/backflowhq/backflow/pipelines"
)

func newSinkFeaturesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sink-features",
		Short: "Run the feature-store sink: enriched records into Redis in Feast's layout",
		Long: `sink-features consumes backflow.enriched as its own goka group and writes online features to
Redis in Feast ` + feast.FeastVersion + `'s Redis online-store layout, so Feast's SDK reads them with
get_online_features (feature repo: deploy/feast). It runs until SIGINT or SIGTERM; it is
'backflow run --stages sink-features'.

Feature views: request_features (per requestId, with a Redis key TTL), tenant_features and
model_features (all-time aggregates kept in the group table). Aggregates count each request once,
at its gateway RESPONSE record; redeliveries, ingest re-emits and new-epoch replays are no-ops.
Redis outages are retried with backoff and hold up consumption; nothing is dropped. An enriched
record that cannot be decoded goes to the DLQ (stage sink-features).
Every flag is a key of the sink_features section of --config; metrics, health and exit codes are
as for 'backflow run'.`,
		Example: `  backflow sink-features --env-file .stack/env
  backflow sink-features --group backflow-features --request-ttl 72h --metrics-addr 127.0.0.1:9466`,
		Args: usageArgs(cobra.NoArgs),
	}
	cmd.RunE = addRunFlags(cmd, pipelines.StageSinkFeatures, processKeys, "sink_features").run
	return cmd
}
