package main

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/backflowhq/backflow/pipelines"
)

func newRunCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run every stage, or the ones --stages names, in one process",
		Long: `run starts the stages of the pipeline in one process: ` + strings.Join(pipelines.StageNames(), ", ") + `
(sink-clickhouse with its DLQ mirror), or the subset --stages (or the stages key) names. It reads one
YAML config file (--config; every key with its default: backflow check-config --print-example).
BACKFLOW_* variables win over the file (key a.b_c is BACKFLOW_A_B_C), and flags given win over both.
Secrets come only from variables or from files that *_file keys name, never from flags or the file.

It serves, on --metrics-addr (default 127.0.0.1:9464; port 0 picks a free one, off disables):
  /metrics   Prometheus: records in/out/DLQ per stage, consumer lag and consume rate per group,
             topic and partition, batch size and flush latency, moderation latency and breaker
             state, sink errors by class
  /healthz   200 while the process runs
  /readyz    200 when every dependency answers and every stage has partitions assigned, else 503

On SIGTERM or SIGINT every stage stops consuming, flushes what it holds and commits it (ingest and
sink-features leave records in flight uncommitted: they are redelivered and collapse). backflow
waits at most --shutdown-timeout (default 45s); a second signal ends it at once.

Exit codes: 0 stopped cleanly after a signal; 1 a stage failed (a dependency refused us for good,
e.g. a missing table or wrong credentials, or a stage stopped on its own); 2 bad usage or
configuration; 3 the stages did not stop within shutdown_timeout (what they had not committed is
redelivered to the next run).`,
		Example: `  backflow run --config deploy/config.example.yaml
  backflow run --env-file .stack/env --stages ingest,sink-clickhouse --metrics-addr 127.0.0.1:9464
  BACKFLOW_SHUTDOWN_TIMEOUT=60s backflow run --config /etc/backflow/backflow.yaml --log-format json`,
		Args: usageArgs(cobra.NoArgs),
	}
	cmd.RunE = addRunFlags(cmd, "", append([]string{"stages"}, processKeys...)).run
	return cmd
}
