package chschema

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// One migration engine serves the numbered migrations (migrations.go: Migrate,
// MigrateCluster) and each declared stream's versioned ones (stream_plan.go: ApplyStream). A
// version is a list of DDL statements, each safe to run again; the engine runs them in order
// on a target, one server or every host of a cluster (target.exec, the one place that tells
// the two apart), and once all of them ran the version is recorded in the ledger of applied
// versions (ledger.go). A run that fails part way converges when run again.

// target is where versions are applied: one server, or the hosts of the cluster Conn.Cluster
// names, seen from the server Conn.Addr names.
type target struct {
	c     Conn
	seed  driver.Conn     // the server c.Addr names; runs the ON CLUSTER statements
	hosts []Host          // cluster mode: every host of the cluster
	conns []driver.Conn   // cluster mode: one per host, once connectHosts has run
	names map[string]bool // the tables and views whose FROM and JOIN an ON CLUSTER statement qualifies
	owned bool            // target opened seed and closes it
	// version is the migration being applied (a REBUILD records its progress under it);
	// opts how the long statements run.
	version uint32
	opts    MigrateOptions
}

// MigrateOptions say how a migration's long statements run: a REBUILD TABLE (rebuild.go) and a
// BACKFILL (backfill.go).
type MigrateOptions struct {
	// RebuildLimit leaves a REBUILD of a table of more rows than this to the operator: the
	// migration fails with ErrRebuildNeeded. 0: no limit (backflow migrate). A stage applying
	// migrations at start-up passes AutoRebuildRows.
	RebuildLimit uint64
	// Progress, if set, is told where a REBUILD or a BACKFILL stands after each chunk or day.
	Progress func(string)
	// UpTo applies the migrations up to this version only (0: all): a database as an older
	// release left it, for the tests and benchmarks of what a newer one changes.
	UpTo uint32
}

// onServer is the target of one server over conn, which stays the caller's.
func onServer(conn driver.Conn) *target { return &target{seed: conn} }

// openTarget connects to the server c names and, in cluster mode, lists the cluster's hosts.
func openTarget(ctx context.Context, c Conn, names map[string]bool) (*target, error) {
	c = c.withDefaults()
	seed, err := Open(ctx, c)
	if err != nil {
		return nil, err
	}
	t := &target{c: c, seed: seed, names: names, owned: true}
	if c.Cluster != "" {
		if t.hosts, err = ClusterHosts(ctx, seed, c.Cluster); err != nil {
			seed.Close()
			return nil, err
		}
	}
	return t, nil
}

// close closes the connections the target opened.
func (t *target) close() {
	for _, hc := range t.conns {
		if hc != nil {
			hc.Close()
		}
	}
	if t.owned {
		t.seed.Close()
	}
}

// connectHosts connects to each host of the cluster it is not connected to yet, as c says, at
// the host's address. It returns an error per host it could not reach (whose connection stays
// nil), each naming the host.
func (t *target) connectHosts(ctx context.Context) []error {
	if t.conns == nil {
		t.conns = make([]driver.Conn, len(t.hosts))
	}
	var errs []error
	for i, h := range t.hosts {
		if t.conns[i] != nil {
			continue
		}
		hc := t.c
		hc.Addr = h.Addr
		var err error
		if t.conns[i], err = Open(ctx, hc); err != nil {
			errs = append(errs, fmt.Errorf("host %s (shard %d replica %d): %w", h.Addr, h.Shard, h.Replica, err))
		}
	}
	return errs
}

// apply runs a version's statements in order; what names the version in errors ("migration
// 0004_sink_ledger", "stream agent-task-event").
func (t *target) apply(ctx context.Context, what string, stmts []string) error {
	for i, stmt := range stmts {
		if err := t.exec(ctx, stmt); err != nil {
			return fmt.Errorf("%s statement %d (%s): %w", what, i+1, firstLine(stmt), err)
		}
	}
	return nil
}

// exec runs one statement of a version: on one server as written, and in cluster mode as
// rewritten for the cluster (cluster.go: a replicated <table>_local on every shard under a
// Distributed <table>, views ON CLUSTER, an ADD or MODIFY COLUMN ON CLUSTER on the local
// tables and on each host on the Distributed one). Either way an ADD COLUMN whose column is
// there already, or a MODIFY COLUMN to the type the column has, is skipped (18.16 has no ADD
// COLUMN IF NOT EXISTS).
func (t *target) exec(ctx context.Context, stmt string) error {
	if rb, ok := parseRebuild(t.version, stmt); ok {
		return t.rebuild().run(ctx, rb, t.opts.RebuildLimit, func(st RebuildState) { t.progress(st.String()) })
	}
	if isBackfill(stmt) {
		return t.runBackfill(ctx, stmt)
	}
	if t.c.Cluster == "" {
		return execStmt(ctx, t.seed, oneServer(stmt))
	}
	cstmts, err := clusterStatements(stmt, t.c.Cluster, t.c.Database, t.c.ZooKeeperPath, t.names)
	if err != nil {
		return err
	}
	for _, cs := range cstmts {
		if !cs.PerHost {
			if err := execStmt(ctx, t.seed, cs); err != nil {
				return err
			}
			continue
		}
		if errs := t.connectHosts(ctx); len(errs) > 0 {
			return errors.Join(errs...)
		}
		for i, hc := range t.conns {
			if err := execStmt(ctx, hc, cs); err != nil {
				return fmt.Errorf("on %s: %w", t.hosts[i].Addr, err)
			}
		}
	}
	return nil
}

// execStmt runs cs on conn unless it adds a column the table already has, or gives a column the
// type it already has. An ON CLUSTER statement's check looks at the host it is sent from;
// ClickHouse runs it on every host. A column statement that fails is looked up again: another
// instance of a stream's stage, following the same new schema, may have run it between the
// check and the statement (the server then refuses the column as a duplicate), which is done,
// not failed.
func execStmt(ctx context.Context, conn driver.Conn, cs clusterStmt) error {
	if cs.Column != "" {
		there, err := columnThere(ctx, conn, cs)
		if err != nil || there {
			return err
		}
	}
	err := conn.Exec(ctx, cs.SQL)
	if err != nil && cs.Column != "" {
		if there, lerr := columnThere(ctx, conn, cs); lerr == nil && there {
			return nil
		}
	}
	return err
}

// columnThere reports whether the table of cs has its column (of its type, when it names one).
func columnThere(ctx context.Context, conn driver.Conn, cs clusterStmt) (bool, error) {
	var n uint64
	if err := conn.QueryRow(ctx, `SELECT count() FROM system.columns WHERE database = currentDatabase() AND table = ? AND name = ? AND (? = '' OR type = ?)`,
		cs.Table, cs.Column, cs.Type, cs.Type).Scan(&n); err != nil {
		return false, fmt.Errorf("look up column %s.%s: %w", cs.Table, cs.Column, err)
	}
	return n > 0, nil
}

var addColumn = regexp.MustCompile("(?is)^ALTER\\s+TABLE\\s+([A-Za-z0-9_]+)\\s+ADD\\s+COLUMN\\s+(?:IF\\s+NOT\\s+EXISTS\\s+)?`?([A-Za-z0-9_]+)`?\\s")

// modifyColumn matches an ALTER TABLE ... MODIFY COLUMN: the table, the column, its new type.
var modifyColumn = regexp.MustCompile("(?is)^ALTER\\s+TABLE\\s+([A-Za-z0-9_]+)\\s+MODIFY\\s+COLUMN\\s+`?([A-Za-z0-9_]+)`?\\s+(.+?)\\s*$")

// IsModifyColumn reports whether stmt is an ALTER TABLE ... MODIFY COLUMN, which changes the
// type of rows already decoded for the table.
func IsModifyColumn(stmt string) bool { return modifyColumn.MatchString(stmt) }

// oneServer is stmt as one server runs it: an ADD COLUMN names its column for the
// already-there check; any other statement runs as it is.
func oneServer(stmt string) clusterStmt {
	cs := clusterStmt{SQL: stmt}
	if m := addColumn.FindStringSubmatch(stmt); m != nil {
		cs.Table, cs.Column = m[1], m[2]
	}
	return cs
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// rebuild is where a REBUILD runs: the seed server, with the ON CLUSTER forms in cluster mode.
func (t *target) rebuild() rebuildTarget {
	if t.c.Cluster == "" {
		return rebuildTarget{conn: t.seed} // the connection's database
	}
	t.connectHosts(context.Background()) // a host it cannot reach fails the rebuild's first sync (syncReplicas)
	return rebuildTarget{conn: t.seed, cluster: t.c.Cluster, db: t.c.withDefaults().Database, zkPath: t.c.withDefaults().ZooKeeperPath, hosts: t.conns}
}

func (t *target) progress(s string) {
	if t.opts.Progress != nil {
		t.opts.Progress(s)
	}
}
