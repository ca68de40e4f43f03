package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/backflowhq/backflow/pipelines"
)

// migrateLong is backflow migrate --help.
const migrateLong = `migrate creates and updates backflow's ClickHouse tables: inference_results, gateway_logs,
moderation_hits, sink_ledger and the deduplicating views v_*. Migrations are numbered DDL files
built into the binary; each is applied once, in order, and recorded in the backflow_migrations
table, so running migrate again applies only what is new (usually nothing). With --dry-run it
only lists the pending migrations.

The DDL is rendered for the server's version (SELECT version()): where the server has them,
text columns such as model and tenant_id are LowCardinality(String) and event times
DateTime64(3); on ClickHouse 18.16 they are String and DateTime. 0010_ttl (retention) waits
until the server has TTL (19.6 and later) and is applied on the first migrate after an upgrade.

With streams declared in --config (docs/streams.md), migrate then plans each stream's table
against its subject's latest schema and shows the plan: the CREATE TABLE and its v_<table> view
for a new stream; for a newer schema, ALTER TABLE ... ADD COLUMN for the fields it added with
defaults and MODIFY COLUMN for the types ClickHouse converts with the rows kept (int to long,
float to double, enum symbols added, a field made optional); or nothing, each as the stream's
next versioned migration. Without --dry-run it applies them and records each in the
stream_migrations table (version, schema id, change and DDL). A change the table cannot follow
(a narrowed or other changed type, a field no longer optional, a field added without a default,
a sorting-key column's type changed) stops migrate with an error naming the field.

Two migrations do long work of their own, each recorded as it goes, so a run that stops (a
crash, --timeout) goes on where it was when run again, and each showing its progress on stderr:
0016_time_keys rebuilds inference_results, gateway_logs, moderation_hits, dlq_entries and
sink_ledger under a key that starts with the minute (REBUILD TABLE: a copy in chunks of the old
key, then a swap by rename; the old rows stay in <table>_before_0016 until you drop them), and
0017_rollup_backfill builds the dashboards' rollups of the rows already there, a day at a time
(0018_rollup_days builds their day level from the hours, 0019_dlq_first_by_time fills dlq_first
again from dlq_entries).
Stop the ClickHouse sinks first: a rebuild refuses a table that changes under it. A stage that
applies migrations at start-up does these itself only for tables of up to a million rows, and
otherwise stops and asks for this command. --dry-run shows each table's rows and how far a
stopped rebuild got. See docs/dashboards.md for the time it takes.

The database is BACKFLOW_CLICKHOUSE_DATABASE (default "default"); it must exist (on every host,
in cluster mode).

One process changes a database's schema at a time: migrate, like every stage with
sink_clickhouse.migrate that finds something pending at start-up, first takes the database's
migration lock on the Kafka brokers (the group and one-partition topic
backflow-migrations.<database>) and says so on stderr while another process holds it. A process
that dies holding it holds it 10 s more. With Kafka down, --no-lock applies without it: first
make sure no such stage is starting.

In cluster mode (BACKFLOW_CLICKHOUSE_CLUSTER) every host of the cluster is checked first
(reachable, macros shard and replica, a ZooKeeper session) and nothing is applied unless all
are; the DDL runs ON CLUSTER, each table is a replicated <table>_local under a Distributed
<table>, and each host's backflow_migrations is reported and updated (docs/scaling.md).`

func newMigrateCmd() *cobra.Command {
	var (
		dryRun  bool
		noLock  bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply the pending ClickHouse migrations (tables, views, ledger)",
		Long:  migrateLong,
		Example: `  backflow migrate --env-file .stack/env --dry-run
  backflow migrate --env-file .stack/env`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if timeout <= 0 {
				return fmt.Errorf("%w: --timeout must be positive, got %v", errUsage, timeout)
			}
			full, err := pipelines.LoadCommand(configPath, os.Getenv)
			if err != nil {
				return fmt.Errorf("%w: configuration: %w", errUsage, err)
			}
			need := []string{pipelines.SystemClickHouse}
			if len(full.Streams) > 0 {
				need = append(need, pipelines.SystemRegistry)
			}
			if err := full.Conns.Require(need...); err != nil {
				return fmt.Errorf("%w: configuration: %w", errUsage, err)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			run := pipelines.MigrateRun{DryRun: dryRun, NoLock: noLock, Out: cmd.OutOrStdout(), Log: cmd.ErrOrStderr()}
			return stoppedEarly(pipelines.Migrate(ctx, full, run), timeout)
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list the pending migrations without applying them")
	cmd.Flags().BoolVar(&noLock, "no-lock", false, "apply without the migration lock on the Kafka brokers (when Kafka is down): first make sure no stage with sink_clickhouse.migrate is starting")
	durationVar(cmd.Flags(), &timeout, "timeout", 2*time.Minute, "how long migrate may take in all (a rebuild of a large table needs more: it goes on where it stopped when run again)")
	return cmd
}

// stoppedEarly says what to do when migrate ran out of --timeout in a long migration.
func stoppedEarly(err error, timeout time.Duration) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w\nmigrate ran out of its --timeout (%v); what it did is recorded: run it again to go on, or give it a longer --timeout", err, timeout)
	}
	return err
}
