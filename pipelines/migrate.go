package pipelines

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/internal/retry"
	"github.com/backflowhq/backflow/sinks/clickhouse"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
)

// MigrateRun says how backflow migrate runs: DryRun shows what is pending and applies nothing;
// Out gets the report, one line per migration, host and stream, as it goes; Log the long
// migrations' progress lines on one server (a REBUILD's chunks, a BACKFILL's days), each with
// the time. In cluster mode the progress lines go to Out, among each host's lines.
type MigrateRun struct {
	DryRun bool
	Out    io.Writer
	Log    io.Writer
	// NoLock applies without the migration lock (migration_lock.go), for when Kafka cannot be
	// reached: the operator makes sure no stage that migrates is starting meanwhile. Without
	// Kafka brokers in the configuration there is no lock to take either.
	NoLock bool
}

// Migrate brings ClickHouse up to date for c: the numbered migrations (chschema.MigrateWith)
// on the one server c.Conns.ClickHouse names or, in cluster mode, on every host of its cluster
// (chschema.MigrateClusterWith), then each stream c declares (PlanStreams, chschema.ApplyStream).
// It reports the server's version and the migrations that wait for a newer one first. c must
// hold ClickHouse and, with streams, the registry (Conns.Require). Unless it is a dry run, it
// holds the database's migration lock throughout, as the stages that migrate do.
func Migrate(ctx context.Context, c Config, run MigrateRun) error {
	if run.DryRun || run.NoLock || len(c.Conns.Kafka.Brokers) == 0 {
		return migrate(ctx, c, run)
	}
	log := slog.New(slog.NewTextHandler(run.Log, nil))
	return withMigrationLock(ctx, c.Conns.Kafka, c.Conns.ClickHouse, log, func(ctx context.Context) error {
		return migrate(ctx, c, run)
	})
}

func migrate(ctx context.Context, c Config, run MigrateRun) error {
	cfg, out := c.Conns, run.Out
	conn, err := chschema.Open(ctx, cfg.ClickHouse)
	if err != nil {
		return err
	}
	defer conn.Close()
	server, err := chschema.Server(ctx, conn)
	if err != nil {
		return err
	}
	caps := server.Capabilities()
	fmt.Fprintf(out, "ClickHouse %s: newer features %s\n", server.Raw, caps)
	waiting, err := chschema.WaitingFor(caps)
	if err != nil {
		return err
	}
	for _, m := range waiting {
		fmt.Fprintf(out, "waiting %04d_%s: needs %s, which this server lacks\n", m.Version, m.Name, strings.Join(m.Requires, ", "))
	}
	switch {
	case cfg.ClickHouse.Cluster != "":
		err = migrateCluster(ctx, out, cfg.ClickHouse, run.DryRun, progressTo(out))
	case run.DryRun:
		err = listPending(ctx, out, cfg.ClickHouse, conn)
	default:
		err = migrateServer(ctx, out, cfg.ClickHouse, conn, progressTo(run.Log))
	}
	if err != nil {
		return err
	}
	return migrateStreams(ctx, out, cfg, conn, c.Streams, caps, run.DryRun)
}

// listPending is a dry run on one server: the pending migrations, and where the tables they
// rebuild stand.
func listPending(ctx context.Context, out io.Writer, c chschema.Conn, conn driver.Conn) error {
	pending, err := chschema.Pending(ctx, conn)
	if err != nil {
		return err
	}
	for _, m := range pending {
		fmt.Fprintf(out, "pending %04d_%s (%d statements)\n", m.Version, m.Name, len(m.Statements))
		if err := printRebuilds(ctx, out, c, conn, m); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "%d pending migrations in %s at %s (dry run: nothing applied)\n", len(pending), database(c), c.Endpoint())
	return nil
}

// migrateServer applies the pending migrations on one server, a line for each.
func migrateServer(ctx context.Context, out io.Writer, c chschema.Conn, conn driver.Conn, progress func(string)) error {
	applied, err := chschema.MigrateWith(ctx, conn, chschema.MigrateOptions{Progress: progress})
	for _, m := range applied {
		fmt.Fprintf(out, "applied %04d_%s\n", m.Version, m.Name)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%d migrations applied in %s at %s; up to date\n", len(applied), database(c), c.Endpoint())
	return nil
}

// migrateStreams shows each declared stream's plan (its table against its subject's latest
// schema), then applies it unless dryRun.
func migrateStreams(ctx context.Context, out io.Writer, c Conns, conn driver.Conn, streams []chschema.StreamConfig, caps chschema.Capabilities, dryRun bool) error {
	plans, err := PlanStreams(ctx, c, conn, streams, caps)
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
		v, err := chschema.ApplyStream(ctx, c.ClickHouse, p)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "stream %s: applied, recorded as version %d in %s\n", p.Stream.Name, v, chschema.StreamMigrationsTable)
	}
	if dryRun && len(plans) > 0 {
		fmt.Fprintf(out, "%d streams planned (dry run: nothing applied)\n", len(plans))
	}
	return nil
}

// printRebuilds shows where each table m rebuilds stands: its rows, and the chunks copied by a
// run that stopped.
func printRebuilds(ctx context.Context, out io.Writer, c chschema.Conn, conn driver.Conn, m chschema.Migration) error {
	for _, rb := range chschema.RebuildsOf(m) {
		st, err := chschema.RebuildStatusOn(ctx, c, conn, rb)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "  rebuild %s\n", st)
	}
	return nil
}

// migrateCluster is migrate in cluster mode: one line per host and migration.
func migrateCluster(ctx context.Context, out io.Writer, c chschema.Conn, dryRun bool, progress func(string)) error {
	if dryRun {
		if err := printClusterRebuilds(ctx, out, c); err != nil {
			return err
		}
	}
	reports, err := chschema.MigrateClusterWith(ctx, c, dryRun, chschema.MigrateOptions{Progress: progress})
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

func database(c chschema.Conn) string {
	if c.Database == "" {
		return "database default"
	}
	return "database " + c.Database
}

// printClusterRebuilds shows, in cluster mode, where each table a migration rebuilds stands.
func printClusterRebuilds(ctx context.Context, out io.Writer, c chschema.Conn) error {
	conn, err := chschema.Open(ctx, c)
	if err != nil {
		return err
	}
	defer conn.Close()
	done, err := chschema.Applied(ctx, conn)
	if err != nil {
		return err
	}
	all, err := chschema.Migrations()
	if err != nil {
		return err
	}
	for _, m := range all {
		if _, ok := done[m.Version]; ok || len(chschema.RebuildsOf(m)) == 0 {
			continue
		}
		fmt.Fprintf(out, "%04d_%s:\n", m.Version, m.Name)
		if err := printRebuilds(ctx, out, c, conn, m); err != nil {
			return err
		}
	}
	return nil
}

// progressTo prints a long migration's progress lines to w, each with the time.
func progressTo(w io.Writer) func(string) {
	return func(s string) { fmt.Fprintf(w, "%s %s\n", time.Now().Format("15:04:05"), s) }
}

// migrateBuiltIn applies the pending built-in migrations once per process, when
// sink_clickhouse.migrate is on: the first ClickHouse stage to start (the sink, or a declared
// stream's) applies them, and the others wait for it and find nothing left to do. Across
// processes the migration lock (migration_lock.go) makes one instance apply them while the
// others wait, then find nothing left either.
func (e *stageEnv) migrateBuiltIn(ctx context.Context, log *slog.Logger) error {
	if !e.cfg.SinkClickHouse.Migrate {
		return nil
	}
	e.migrateMu.Lock()
	defer e.migrateMu.Unlock()
	if e.migrated {
		return nil
	}
	// ClickHouse (or Kafka, for the lock) down at start-up is waited for like an outage later
	// on; each attempt applies what is still pending (every migration is safe to re-run).
	err := retry.Do(ctx, retry.Policy{Min: time.Second, Max: 30 * time.Second}, migrationRetryable, func(err error, attempt int, _ time.Duration) {
		log.Warn("clickhouse or kafka unavailable for the migrations; retrying", "attempt", attempt, "error", err)
	}, func() error {
		pending, err := e.builtInPending(ctx)
		if err != nil || pending == 0 {
			return err
		}
		log.Info("migrations pending; taking the migration lock", "pending", pending, "lock", migrationLockName(e.conn.ClickHouse))
		return withMigrationLock(ctx, e.conn.Kafka, e.conn.ClickHouse, log, func(ctx context.Context) error {
			return e.applyBuiltIn(ctx, log)
		})
	})
	if err != nil {
		return err
	}
	e.migrated = true
	return nil
}

// migrationRetryable: what the migrations wait out, ClickHouse's outages and Kafka's.
func migrationRetryable(err error) bool { return clickhouse.IsRetryable(err) || kafka.IsTransient(err) }

// builtInPending is how many built-in migrations are pending: on the one server, or summed
// over the hosts of the cluster.
func (e *stageEnv) builtInPending(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if e.conn.ClickHouse.Cluster != "" {
		reports, err := chschema.MigrateClusterWith(ctx, e.conn.ClickHouse, true, chschema.MigrateOptions{})
		n := 0
		for _, r := range reports {
			n += len(r.Pending)
		}
		return n, err
	}
	db, err := chschema.Open(ctx, e.conn.ClickHouse)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	pending, err := chschema.Pending(ctx, db)
	return len(pending), err
}

// applyBuiltIn applies the pending built-in migrations, a log line for each.
func (e *stageEnv) applyBuiltIn(ctx context.Context, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	// A table large enough to take long to rebuild (a migration giving it a new key) is left
	// to backflow migrate: the stage fails with chschema.ErrRebuildNeeded.
	opts := chschema.MigrateOptions{RebuildLimit: chschema.AutoRebuildRows, Progress: func(s string) { log.Info("migration progress", "status", s) }}
	if e.conn.ClickHouse.Cluster != "" {
		reports, err := chschema.MigrateClusterWith(ctx, e.conn.ClickHouse, false, opts)
		for _, r := range reports {
			for _, m := range r.Recorded {
				log.Info("applied migration", "host", r.Addr, "version", m.Version, "name", m.Name)
			}
		}
		return err
	}
	db, err := chschema.Open(ctx, e.conn.ClickHouse)
	if err != nil {
		return err
	}
	defer db.Close()
	applied, err := chschema.MigrateWith(ctx, db, opts)
	for _, m := range applied {
		log.Info("applied migration", "version", m.Version, "name", m.Name)
	}
	return err
}
