package pipelines

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
)

// Schema changes to one ClickHouse database are made by one process at a time. Every instance
// of a stage that migrates (sink_clickhouse.migrate) starts with the same pending migrations,
// and a StatefulSet starts its pods together: two instances applying one migration at once
// raced (an ADD COLUMN the other had just run failed the stage; a view dropped and re-created
// by both; a rollup backfill run twice). ClickHouse 18.16 has no lock, so the instances take
// one from the brokers they already share (kafka.Lock). A process takes it only when it finds
// something pending, so a restart of an up-to-date pipeline does not wait for it.

// migrationLockName is the lock (a topic and a group) of c's database: one per database and
// cluster, so that pipelines writing to other databases do not wait for each other.
func migrationLockName(c chschema.Conn) string {
	db := c.Database
	if db == "" {
		db = "default"
	}
	if c.Cluster != "" {
		return "backflow-migrations." + c.Cluster + "." + db
	}
	return "backflow-migrations." + db
}

// withMigrationLock runs fn holding the migration lock of ch's database. fn's context ends if
// the lock is lost part way (this process's session with the group expired); its error then
// says so.
func withMigrationLock(ctx context.Context, k kafka.Conn, ch chschema.Conn, log *slog.Logger, fn func(context.Context) error) error {
	l, err := kafka.AcquireLock(ctx, k, migrationLockName(ch), int16(k.TableReplication), log)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	defer l.Release()
	lctx, stop := l.Guard(ctx)
	defer stop()
	err = fn(lctx)
	if cause := context.Cause(lctx); err != nil && errors.Is(cause, kafka.ErrLockLost) {
		return fmt.Errorf("%w (%w)", err, cause)
	}
	return err
}
