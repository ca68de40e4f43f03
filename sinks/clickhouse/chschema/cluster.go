package chschema

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Cluster mode (Conn.Cluster set) keeps every name the sink, the views and the dashboards use,
// and changes what stands behind it. A migration's
//
//	CREATE TABLE IF NOT EXISTS t (...) ENGINE = ReplacingMergeTree(version) ...
//
// becomes two statements run ON CLUSTER: t_local, a ReplicatedReplacingMergeTree at
// Conn.ZooKeeperPath with replica '{replica}', and t itself, a Distributed table over t_local
// sharded by cityHash64(request_id) (or, for a table without request_id, of its ORDER BY key),
// so every version of a row lands on the same shard and FINAL still collapses them. Views are
// created ON CLUSTER over the Distributed tables. An ADD or MODIFY COLUMN runs ON CLUSTER on
// t_local and on each host on t (ClickHouse 18.16 refuses ALTER ... ON CLUSTER of a Distributed table
// over replicated shards). Each host keeps its own backflow_migrations.

// LocalSuffix names the shard-local replicated table behind each Distributed table.
const LocalSuffix = "_local"

// DefaultZooKeeperPath is the default of Conn.ZooKeeperPath.
const DefaultZooKeeperPath = "/clickhouse/tables/{shard}/{database}/{table}"

// clusterSettings are the session settings of a connection in cluster mode.
// insert_distributed_sync makes an INSERT into a Distributed table return only once every
// shard has its part, so a flush that succeeded has landed (the sink commits offsets after it)
// and a flush that failed is retried as the same block, which each shard's replicated table
// drops if it had it (insert deduplication by block hash).
func clusterSettings() ch.Settings {
	return ch.Settings{"insert_distributed_sync": 1}
}

// clusterStmt is one statement of a migration rewritten for a cluster.
type clusterStmt struct {
	SQL string
	// PerHost: run on each host without ON CLUSTER.
	PerHost bool
	// Table and Column name the column an ADD or MODIFY COLUMN changes, for the already-done
	// check; Type is the type a MODIFY COLUMN gives it ("" for an ADD).
	Table, Column, Type string
}

var (
	createTable = regexp.MustCompile(`(?is)^CREATE\s+TABLE\s+IF\s+NOT\s+EXISTS\s+([A-Za-z0-9_]+)\s*\((.*)\)\s*ENGINE\s*=\s*(ReplacingMergeTree|MergeTree)(?:\(([^)]*)\))?(.*)$`)
	createView  = regexp.MustCompile(`(?is)^CREATE\s+VIEW\s+IF\s+NOT\s+EXISTS\s+([A-Za-z0-9_]+)\s+AS\s`)
	dropTable   = regexp.MustCompile(`(?is)^DROP\s+TABLE\s+IF\s+EXISTS\s+([A-Za-z0-9_]+)\s*$`)
	alterTable  = regexp.MustCompile(`(?is)^ALTER\s+TABLE\s+([A-Za-z0-9_]+)\s+(.*)$`)
	orderBy     = regexp.MustCompile("(?is)ORDER\\s+BY\\s+\\(?([A-Za-z0-9_,`\\s()]+?)\\)?\\s*(?:SETTINGS|$)")
)

// objectNames lists the tables and views the migrations create, and the shard-local table
// (<table>_local) behind each table.
func objectNames(ms []Migration) map[string]bool {
	out := map[string]bool{}
	for _, m := range ms {
		for _, s := range m.Statements {
			if c := createTable.FindStringSubmatch(s); c != nil {
				out[c[1]], out[c[1]+LocalSuffix] = true, true
			}
			if c := createView.FindStringSubmatch(s); c != nil {
				out[c[1]] = true
			}
		}
	}
	return out
}

var fromName = regexp.MustCompile(`(?i)\b(FROM|JOIN)(\s+)([A-Za-z_][A-Za-z0-9_]*)\b`)

// qualify prefixes db. to each FROM or JOIN of one of names. ClickHouse runs an ON CLUSTER
// statement on the other hosts in their default database, so every name in it is qualified.
func qualify(body, db string, names map[string]bool) string {
	return fromName.ReplaceAllStringFunc(body, func(s string) string {
		m := fromName.FindStringSubmatch(s)
		if !names[m[3]] {
			return s
		}
		return m[1] + m[2] + QuoteIdent(db) + "." + m[3]
	})
}

// QuoteIdent quotes a table or column name for a statement: `name`, a backquote inside
// escaped.
func QuoteIdent(s string) string { return "`" + strings.ReplaceAll(s, "`", "\\`") + "`" }

// clusterStatements rewrites one statement of a migration for cluster on database db with
// the ZooKeeper path template zkPath; names are the migrations' tables and views (objectNames).
func clusterStatements(stmt, cluster, db, zkPath string, names map[string]bool) ([]clusterStmt, error) {
	on := " ON CLUSTER " + cluster
	q := QuoteIdent(db) + "."
	if m := createTable.FindStringSubmatch(stmt); m != nil {
		name, cols, engine, args, rest := m[1], m[2], m[3], strings.TrimSpace(m[4]), m[5]
		local := name + LocalSuffix
		path := strings.NewReplacer("{database}", db, "{table}", local).Replace(zkPath)
		repArgs := fmt.Sprintf("'%s', '{replica}'", path)
		if args != "" {
			repArgs += ", " + args
		}
		key, err := shardingKey(cols, rest)
		if err != nil {
			return nil, fmt.Errorf("table %s: %w", name, err)
		}
		return []clusterStmt{
			{SQL: fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s%s%s (%s) ENGINE = Replicated%s(%s)%s", q, local, on, cols, engine, repArgs, rest)},
			{SQL: fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s%s%s AS %s%s ENGINE = Distributed(%s, %s, %s, %s)", q, name, on, q, local, cluster, QuoteIdent(db), local, key)},
		}, nil
	}
	if m := createView.FindStringSubmatchIndex(stmt); m != nil {
		return []clusterStmt{{SQL: stmt[:m[2]] + q + stmt[m[2]:m[3]] + on + qualify(stmt[m[3]:], db, names)}}, nil
	}
	if m := dropTable.FindStringSubmatch(stmt); m != nil {
		drop := []clusterStmt{{SQL: "DROP TABLE IF EXISTS " + q + m[1] + on}}
		if names[m[1]+LocalSuffix] {
			// A table: its shard-local table goes too, so that a CREATE after it makes both anew.
			drop = append(drop, clusterStmt{SQL: "DROP TABLE IF EXISTS " + q + m[1] + LocalSuffix + on})
		}
		return drop, nil
	}
	if m := alterTable.FindStringSubmatch(stmt); m != nil {
		table, op := m[1], m[2]
		var col, typ string
		if am := addColumn.FindStringSubmatch(stmt); am != nil {
			col = am[2]
		} else if mm := modifyColumn.FindStringSubmatch(stmt); mm != nil {
			col, typ = mm[2], mm[3]
		} else {
			// MODIFY TTL and the like concern the stored data: the local tables only.
			return []clusterStmt{{SQL: "ALTER TABLE " + q + table + LocalSuffix + on + " " + op}}, nil
		}
		// A column's type is the local tables' and the Distributed table's alike.
		return []clusterStmt{
			{SQL: "ALTER TABLE " + q + table + LocalSuffix + on + " " + op, Table: table + LocalSuffix, Column: col, Type: typ},
			{SQL: "ALTER TABLE " + table + " " + op, PerHost: true, Table: table, Column: col, Type: typ},
		}, nil
	}
	return nil, fmt.Errorf("no cluster form for statement %.60q", stmt)
}

// shardingKey is cityHash64(request_id) for a table ordered by request_id (and more), else
// cityHash64 of its whole ORDER BY key: a row's key decides its shard, so re-writes meet. cols
// is the table's column list; a key column of a type ClickHouse 18.16's cityHash64 refuses
// (UUID, Enum, Decimal, Float, as a declared stream's dedupe key may be) is hashed as its text.
func shardingKey(cols, rest string) (string, error) {
	m := orderBy.FindStringSubmatch(rest)
	if m == nil {
		return "", errors.New("no ORDER BY to shard by")
	}
	var keys []string
	for _, c := range strings.Split(m[1], ",") {
		// An expression (a time key, toStartOfMinute(...)) is a function of the columns that
		// identify the row: those alone decide its shard.
		if c = strings.Trim(strings.TrimSpace(c), "`"); c != "" && !strings.ContainsAny(c, "()") {
			keys = append(keys, c)
		}
	}
	for _, c := range keys {
		if c == "request_id" {
			return "cityHash64(request_id)", nil
		}
	}
	for i, c := range keys {
		if !hashable(columnType(cols, c)) {
			keys[i] = "toString(" + QuoteIdent(c) + ")"
		}
	}
	return "cityHash64(" + strings.Join(keys, ", ") + ")", nil
}

// columnType is the type of column name in a CREATE TABLE's column list, or "" if not found.
func columnType(cols, name string) string {
	re := regexp.MustCompile("(?m)^\\s*`?" + regexp.QuoteMeta(name) + "`?\\s+([A-Za-z0-9_]+)")
	if m := re.FindStringSubmatch(cols); m != nil {
		return m[1]
	}
	return ""
}

// hashable reports whether 18.16's cityHash64 takes a column of type typ as it is: strings,
// integers, dates and times (and a type not found, hashed as written).
func hashable(typ string) bool {
	if typ == "" {
		return true
	}
	for _, p := range []string{"String", "FixedString", "Int", "UInt", "Date", "LowCardinality"} {
		if strings.HasPrefix(typ, p) {
			return true
		}
	}
	return false
}

// Host is one server of a cluster, as system.clusters lists it.
type Host struct {
	Shard, Replica uint32
	Addr           string // host:port of the native protocol
}

// HostReport is what MigrateCluster found and did on one host.
type HostReport struct {
	Host
	// Had is how many migrations the host had recorded before; Pending lists those it lacked;
	// Recorded those recorded on it by this run (none in a dry run).
	Had      int
	Pending  []Migration
	Recorded []Migration
}

// ClusterHosts lists the hosts of c.Cluster as the server conn is connected to sees them.
func ClusterHosts(ctx context.Context, conn driver.Conn, cluster string) ([]Host, error) {
	rows, err := conn.Query(ctx, `SELECT shard_num, replica_num, host_address, port FROM system.clusters WHERE cluster = ? ORDER BY shard_num, replica_num`, cluster)
	if err != nil {
		return nil, fmt.Errorf("clickhouse: list cluster %s: %w", cluster, err)
	}
	defer rows.Close()
	var out []Host
	for rows.Next() {
		var shard, replica uint32
		var host string
		var port uint16
		if err := rows.Scan(&shard, &replica, &host, &port); err != nil {
			return nil, fmt.Errorf("clickhouse: list cluster %s: %w", cluster, err)
		}
		out = append(out, Host{Shard: shard, Replica: replica, Addr: fmt.Sprintf("%s:%d", host, port)})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("clickhouse: list cluster %s: %w", cluster, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("clickhouse: cluster %q is not in the server's system.clusters (check <remote_servers> and clickhouse.cluster)", cluster)
	}
	return out, nil
}

// MigrateCluster applies the pending migrations to every host of c.Cluster. Before it changes
// anything it connects to every host (as c says, at the host's address), checks that each has
// the macros shard and replica and a live ZooKeeper session, and reads each host's
// backflow_migrations: a host that does not answer or is not ready stops the run with nothing
// applied, so the cluster is never left half-migrated by a host that was known to be down. A
// migration is pending when any host lacks it; its statements run ON CLUSTER (ClickHouse
// fails the statement if any host fails it) and per host where they must (the engine of
// migrate.go), and it is recorded on each host that lacked it. Re-running after a failure
// converges, as every statement is safe to re-run.
//
// With dryRun it stops after the checks, with each host's Pending filled in.
func MigrateCluster(ctx context.Context, c Conn, dryRun bool) ([]HostReport, error) {
	return MigrateClusterWith(ctx, c, dryRun, MigrateOptions{})
}

// MigrateClusterWith is MigrateCluster with o saying how the long statements run.
func MigrateClusterWith(ctx context.Context, c Conn, dryRun bool, o MigrateOptions) ([]HostReport, error) {
	if c.Cluster == "" {
		return nil, errors.New("clickhouse: MigrateCluster without clickhouse.cluster")
	}
	t, err := openTarget(ctx, c, nil)
	if err != nil {
		return nil, err
	}
	defer t.close()
	v, err := Server(ctx, t.seed)
	if err != nil {
		return nil, err
	}
	all, err := MigrationsFor(v.Capabilities())
	if err != nil {
		return nil, err
	}
	t.names = objectNames(all)
	t.opts = o
	reports, applied, err := t.survey(ctx)
	if err != nil {
		return reports, err
	}
	lacking := map[uint32][]int{} // version → the hosts that lack it
	var todo []Migration
	for _, m := range all {
		if o.UpTo != 0 && m.Version > o.UpTo {
			break
		}
		for i := range t.hosts {
			if _, ok := applied[i][m.Version]; !ok {
				reports[i].Pending = append(reports[i].Pending, m)
				lacking[m.Version] = append(lacking[m.Version], i)
			}
		}
		if len(lacking[m.Version]) > 0 {
			todo = append(todo, m)
		}
	}
	if dryRun {
		return reports, nil
	}
	for _, m := range todo {
		t.version = m.Version
		if err := t.apply(ctx, m.label(), m.Statements); err != nil {
			return reports, fmt.Errorf("clickhouse: %w", err)
		}
		for _, i := range lacking[m.Version] {
			if err := recordMigration(ctx, t.conns[i], m); err != nil {
				return reports, fmt.Errorf("clickhouse: on %s: %w", t.hosts[i].Addr, err)
			}
			reports[i].Recorded = append(reports[i].Recorded, m)
		}
	}
	return reports, nil
}

// survey connects to every host and reads what each has applied, refusing (with nothing
// applied) when a host does not answer or is not ready for replicated tables.
func (t *target) survey(ctx context.Context) ([]HostReport, []map[uint32]AppliedMigration, error) {
	reports := make([]HostReport, len(t.hosts))
	applied := make([]map[uint32]AppliedMigration, len(t.hosts))
	notReady := t.connectHosts(ctx)
	for i, h := range t.hosts {
		reports[i].Host = h
		if t.conns[i] == nil {
			continue // in notReady already
		}
		var err error
		if err = hostReady(ctx, t.conns[i]); err != nil {
			notReady = append(notReady, fmt.Errorf("host %s (shard %d replica %d): %w", h.Addr, h.Shard, h.Replica, err))
			continue
		}
		if applied[i], err = Applied(ctx, t.conns[i]); err != nil {
			notReady = append(notReady, fmt.Errorf("host %s: %w", h.Addr, err))
			continue
		}
		reports[i].Had = len(applied[i])
	}
	if len(notReady) > 0 {
		return reports, nil, fmt.Errorf("clickhouse: cluster %s: refusing to migrate part of the cluster, nothing applied: %w", t.c.Cluster, errors.Join(notReady...))
	}
	return reports, applied, nil
}

// hostReady checks what replicated tables need of a host: the shard and replica macros, and a
// ZooKeeper session.
func hostReady(ctx context.Context, conn driver.Conn) error {
	var n uint64
	if err := conn.QueryRow(ctx, `SELECT count() FROM system.macros WHERE macro IN ('shard', 'replica')`).Scan(&n); err != nil {
		return fmt.Errorf("read system.macros: %w", err)
	}
	if n != 2 {
		return errors.New("the macros shard and replica are not both defined (<macros> in the server's config)")
	}
	if err := conn.QueryRow(ctx, `SELECT count() FROM system.zookeeper WHERE path = '/'`).Scan(&n); err != nil {
		return fmt.Errorf("no ZooKeeper session: %w", err)
	}
	return nil
}
