package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/spf13/cobra"

	"github.com/backflowhq/backflow/pipelines"
	"github.com/backflowhq/backflow/sinks/clickhouse"
)

func newMigrateCmd() *cobra.Command {
	var (
		dryRun  bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply the pending ClickHouse migrations (tables, views, ledger)",
		Long: `migrate creates and updates backflow's ClickHouse tables: inference_results, gateway_logs,
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
0017_rollup_backfill builds the dashboards' rollups of the rows already there, a day at a time.
Stop the ClickHouse sinks first: a rebuild refuses a table that changes under it. A stage that
applies migrations at start-up does these itself only for tables of up to a million rows, and
otherwise stops and asks for this command. --dry-run shows each table's rows and how far a
stopped rebuild got. See docs/dashboards.md for the time it takes.

The database is BACKFLOW_CLICKHOUSE_DATABASE (default "default"); it must exist (on every host,
in cluster mode).

In cluster mode (BACKFLOW_CLICKHOUSE_CLUSTER) every host of the cluster is checked first
(reachable, macros shard and replica, a ZooKeeper session) and nothing is applied unless all
are; the DDL runs ON CLUSTER, each table is a replicated <table>_local under a Distributed
<table>, and each host's backflow_migrations is reported and updated (docs/scaling.md).`,
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
			cfg := full.Conns
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			conn, err := clickhouse.Open(ctx, cfg.ClickHouse)
			if err != nil {
				return err
			}
			defer conn.Close()
			out := cmd.OutOrStdout()
			server, err := clickhouse.Server(ctx, conn)
			if err != nil {
				return err
			}
			caps := server.Capabilities()
			fmt.Fprintf(out, "ClickHouse %s: newer features %s\n", server.Raw, caps)
			waiting, err := clickhouse.WaitingFor(caps)
			if err != nil {
				return err
			}
			for _, m := range waiting {
				fmt.Fprintf(out, "waiting %04d_%s: needs %s, which this server lacks\n", m.Version, m.Name, strings.Join(m.Requires, ", "))
			}
			if cfg.ClickHouse.Cluster != "" {
				if err := migrateCluster(ctx, out, cfg.ClickHouse, dryRun); err != nil {
					return err
				}
				return migrateStreams(ctx, out, cfg, conn, full.Streams, caps, dryRun)
			}
			if dryRun {
				pending, err := clickhouse.Pending(ctx, conn)
				if err != nil {
					return err
				}
				for _, m := range pending {
					fmt.Fprintf(out, "pending %04d_%s (%d statements)\n", m.Version, m.Name, len(m.Statements))
					if err := printRebuilds(ctx, out, cfg.ClickHouse, conn, m); err != nil {
						return err
					}
				}
				fmt.Fprintf(out, "%d pending migrations in %s at %s (dry run: nothing applied)\n", len(pending), database(cfg.ClickHouse), cfg.ClickHouse.Endpoint())
				return migrateStreams(ctx, out, cfg, conn, full.Streams, caps, dryRun)
			}
			applied, err := clickhouse.MigrateWith(ctx, conn, clickhouse.MigrateOptions{Progress: progressTo(cmd.ErrOrStderr())})
			for _, m := range applied {
				fmt.Fprintf(out, "applied %04d_%s\n", m.Version, m.Name)
			}
			if err != nil {
				return stoppedEarly(err, timeout)
			}
			fmt.Fprintf(out, "%d migrations applied in %s at %s; up to date\n", len(applied), database(cfg.ClickHouse), cfg.ClickHouse.Endpoint())
			return migrateStreams(ctx, out, cfg, conn, full.Streams, caps, dryRun)
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list the pending migrations without applying them")
	durationVar(cmd.Flags(), &timeout, "timeout", 2*time.Minute, "how long migrate may take in all (a rebuild of a large table needs more: it goes on where it stopped when run again)")
	return cmd
}

// migrateStreams shows each declared stream's plan (its table against its subject's latest
// schema), then applies it unless dryRun.
func migrateStreams(ctx context.Context, out io.Writer, c pipelines.Conns, conn driver.Conn, streams []clickhouse.StreamConfig, caps clickhouse.Capabilities, dryRun bool) error {
	plans, err := pipelines.PlanStreams(ctx, c, conn, streams, caps)
	if err != nil {
		return err
	}
	for _, p := range plans {
		at := fmt.Sprintf("version %d", p.Version)
		if len(p.Statements) > 0 {
			at = fmt.Sprintf("migration %d", p.Version)
		}
		fmt.Fprintf(out, "stream %s (subject %s, schema id %d): table %s: %s: %s\n", p.Stream.Name, p.Stream.Subject, p.SchemaID, p.Stream.Table, at, p.Change())
		for _, s := range p.Statements {
			fmt.Fprintf(out, "  %s;\n", strings.ReplaceAll(s, "\n", "\n  "))
		}
		if dryRun || len(p.Statements) == 0 {
			continue
		}
		v, err := clickhouse.ApplyStream(ctx, c.ClickHouse, p)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "stream %s: applied, recorded as version %d in %s\n", p.Stream.Name, v, clickhouse.StreamMigrationsTable)
	}
	if dryRun && len(plans) > 0 {
		fmt.Fprintf(out, "%d streams planned (dry run: nothing applied)\n", len(plans))
	}
	return nil
}

// printRebuilds shows where each table m rebuilds stands: its rows, and the chunks copied by a
// run that stopped.
func printRebuilds(ctx context.Context, out io.Writer, c clickhouse.Conn, conn driver.Conn, m clickhouse.Migration) error {
	for _, rb := range clickhouse.RebuildsOf(m) {
		st, err := clickhouse.RebuildStatusOn(ctx, c, conn, rb)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "  rebuild %s\n", st)
	}
	return nil
}

// progressTo prints a long migration's progress lines to w, each with the time.
func progressTo(w io.Writer) func(string) {
	return func(s string) { fmt.Fprintf(w, "%s %s\n", time.Now().Format("15:04:05"), s) }
}

// stoppedEarly says what to do when migrate ran out of --timeout in a long migration.
func stoppedEarly(err error, timeout time.Duration) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w\nmigrate ran out of its --timeout (%v); what it did is recorded: run it again to go on, or give it a longer --timeout", err, timeout)
	}
	return err
}

// migrateCluster is migrate in cluster mode: one line per host and migration.
func migrateCluster(ctx context.Context, out io.Writer, c clickhouse.Conn, dryRun bool) error {
	if dryRun {
		if err := printClusterRebuilds(ctx, out, c); err != nil {
			return err
		}
	}
	reports, err := clickhouse.MigrateClusterWith(ctx, c, dryRun, clickhouse.MigrateOptions{Progress: progressTo(out)})
	for _, r := range reports {
		fmt.Fprintf(out, "host %s (shard %d, replica %d): %d recorded before, %d pending\n", r.Addr, r.Shard, r.Replica, r.Had, len(r.Pending))
		for _, m := range r.Recorded {
			fmt.Fprintf(out, "  applied %04d_%s\n", m.Version, m.Name)
		}
		if dryRun {
			for _, m := range r.Pending {
				fmt.Fprintf(out, "  pending %04d_%s (%d statements)\n", m.Version, m.Name, len(m.Statements))
			}
		}
	}
	if err != nil {
		return err
	}
	if dryRun {
		fmt.Fprintf(out, "cluster %s, %d hosts, %s (dry run: nothing applied)\n", c.Cluster, len(reports), database(c))
		return nil
	}
	fmt.Fprintf(out, "cluster %s, %d hosts, %s: up to date on every host\n", c.Cluster, len(reports), database(c))
	return nil
}

func database(c clickhouse.Conn) string {
	if c.Database == "" {
		return "database default"
	}
	return "database " + c.Database
}

// printClusterRebuilds shows, in cluster mode, where each table a migration rebuilds stands.
func printClusterRebuilds(ctx context.Context, out io.Writer, c clickhouse.Conn) error {
	conn, err := clickhouse.Open(ctx, c)
	if err != nil {
		return err
	}
	defer conn.Close()
	done, err := clickhouse.Applied(ctx, conn)
	if err != nil {
		return err
	}
	all, err := clickhouse.Migrations()
	if err != nil {
		return err
	}
	for _, m := range all {
		if _, ok := done[m.Version]; ok || len(clickhouse.RebuildsOf(m)) == 0 {
			continue
		}
		fmt.Fprintf(out, "%04d_%s:\n", m.Version, m.Name)
		if err := printRebuilds(ctx, out, c, conn, m); err != nil {
			return err
		}
	}
	return nil
}
