package chschema

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// A rebuild gives an existing table a new sorting key and partitioning, with its rows: the one
// change of a table that ALTER cannot make. A migration asks for it with a statement of its
// own, which is not sent to ClickHouse:
//
//	REBUILD TABLE inference_results PARTITION BY toYYYYMMDD(event_time) ORDER BY (toStartOfMinute(event_time), source_topic, request_id)
//
// The table's copy under the new key, <table>_rebuild, is created from the table's own
// definition (its columns as they are now, later ALTERs included); the rows are copied in
// chunks of about Rebuild.ChunkRows, each a range of the old key inside one old partition, so a
// chunk reads only its own granules; the plan and each copied chunk are recorded in
// backflow_rebuilds, so a rebuild stopped part way (a crash, a timeout) goes on from the first
// chunk not recorded, after deleting what that chunk had copied. Once every row is copied the
// two tables swap names in one RENAME: the table keeps its name (the views read it by name)
// and the old rows stay in <table>_before_<version> for the operator to drop.
//
// A rebuild needs the table to hold still: rows written while it copies would be lost at the
// swap. It checks the table's row count against the plan's before it swaps, and if they differ
// it starts over and says why (ErrRebuildSourceChanged). The sinks apply a rebuild themselves
// only when the table is small (AutoRebuildRows); a larger one waits for `backflow migrate`
// with the sinks stopped (ErrRebuildNeeded).

// DefaultRebuildChunkRows is the default size of one chunk of a rebuild.
const DefaultRebuildChunkRows = 2_000_000

// AutoRebuildRows is the largest table a stage rebuilds at start-up; a larger one is left to
// `backflow migrate` (ErrRebuildNeeded).
const AutoRebuildRows = 1_000_000

var (
	// ErrRebuildNeeded: a migration rebuilds a table too large to rebuild at a stage's
	// start-up; run `backflow migrate` with the sinks stopped.
	ErrRebuildNeeded = errors.New("clickhouse: a migration rebuilds a large table; stop the ClickHouse sinks and run backflow migrate")
	// ErrRebuildSourceChanged: rows were written to a table while it was rebuilt (a sink was
	// running); the copy was discarded.
	ErrRebuildSourceChanged = errors.New("clickhouse: the table changed while it was rebuilt")
)

var rebuildStmt = regexp.MustCompile(`(?is)^REBUILD\s+TABLE\s+([A-Za-z0-9_]+)\s+PARTITION\s+BY\s+(.+?)\s+ORDER\s+BY\s+(.+?)\s*$`)

// Rebuild is one table's rebuild, as a migration's REBUILD TABLE statement asks for it.
type Rebuild struct {
	Version     uint32 // the migration's
	Table       string
	PartitionBy string
	OrderBy     string
	// ChunkRows is the size of one chunk; 0: DefaultRebuildChunkRows.
	ChunkRows uint64
}

// parseRebuild reads a REBUILD TABLE statement (ok false: stmt is not one).
func parseRebuild(version uint32, stmt string) (Rebuild, bool) {
	m := rebuildStmt.FindStringSubmatch(strings.TrimSpace(stmt))
	if m == nil {
		return Rebuild{}, false
	}
	return Rebuild{Version: version, Table: m[1], PartitionBy: m[2], OrderBy: m[3]}, true
}

func (rb Rebuild) chunkRows() uint64 {
	if rb.ChunkRows == 0 {
		return DefaultRebuildChunkRows
	}
	return rb.ChunkRows
}

func (rb Rebuild) copyName() string   { return rb.Table + "_rebuild" }
func (rb Rebuild) beforeName() string { return fmt.Sprintf("%s_before_%04d", rb.Table, rb.Version) }

// rebuildTarget is what a rebuild runs its statements on: one server, or a cluster's seed
// server with the ON CLUSTER forms (cluster non-empty). Reads go to the table's name, a
// Distributed table in cluster mode; DDL and deletes go to the local tables there.
type rebuildTarget struct {
	conn    driver.Conn
	cluster string // "" on one server
	db      string
	zkPath  string
	// hosts are connections to every host of the cluster: a count through a Distributed table
	// reads one replica of each shard, which may not have fetched the newest parts yet, so the
	// counts a rebuild compares are taken after SYSTEM SYNC REPLICA on each (syncReplicas).
	hosts []driver.Conn
}

// syncReplicas waits until every replica of the cluster has fetched the parts of table's
// _local tables that any of them has; nothing on one server.
func (t rebuildTarget) syncReplicas(ctx context.Context, table string) error {
	for i, h := range t.hosts {
		if h == nil {
			return fmt.Errorf("sync the replicas of %s: host %d of the cluster is not reachable", t.local(table), i+1)
		}
		if err := h.Exec(ctx, "SYSTEM SYNC REPLICA "+t.q(t.local(table))); err != nil {
			return fmt.Errorf("sync the replicas of %s: %w", t.local(table), err)
		}
	}
	return nil
}

func (t rebuildTarget) on() string {
	if t.cluster == "" {
		return ""
	}
	return " ON CLUSTER " + t.cluster
}

// local is the name of the table that holds name's rows: name itself on one server, its
// _local table in cluster mode.
func (t rebuildTarget) local(name string) string {
	if t.cluster == "" {
		return name
	}
	return name + LocalSuffix
}

func (t rebuildTarget) q(name string) string {
	if t.db == "" {
		return QuoteIdent(name)
	}
	return QuoteIdent(t.db) + "." + QuoteIdent(name)
}

type tableInfo struct {
	exists                 bool
	create, partitionKey   string
	sortingKey, engineFull string
	rows                   uint64
}

func (t rebuildTarget) info(ctx context.Context, name string) (tableInfo, error) {
	var ti tableInfo
	rows, err := t.conn.Query(ctx, `SELECT create_table_query, partition_key, sorting_key, engine_full FROM system.tables WHERE database = currentDatabase() AND name = ?`, name)
	if err != nil {
		return ti, fmt.Errorf("look up table %s: %w", name, err)
	}
	defer rows.Close()
	if rows.Next() {
		ti.exists = true
		if err := rows.Scan(&ti.create, &ti.partitionKey, &ti.sortingKey, &ti.engineFull); err != nil {
			return ti, err
		}
	}
	if err := rows.Err(); err != nil {
		return ti, err
	}
	if ti.exists {
		if err := t.conn.QueryRow(ctx, "SELECT toUInt64(count()) FROM "+t.q(name)).Scan(&ti.rows); err != nil {
			return ti, fmt.Errorf("count %s: %w", name, err)
		}
	}
	return ti, nil
}

// sameKey reports whether a table's sorting key (as system.tables writes it: "a, b") is the
// ORDER BY expression key ("(a, b)").
func sameKey(sortingKey, orderBy string) bool {
	norm := func(s string) string {
		s = strings.TrimSpace(strings.ReplaceAll(s, "`", ""))
		if strings.HasPrefix(s, "(") && strings.HasSuffix(s, ")") {
			s = s[1 : len(s)-1]
		}
		return strings.Join(strings.Fields(strings.ReplaceAll(s, ",", ", ")), " ")
	}
	return norm(sortingKey) == norm(orderBy)
}

// RebuildsOf lists the REBUILD TABLE statements of m.
func RebuildsOf(m Migration) []Rebuild {
	var out []Rebuild
	for _, s := range m.Statements {
		if rb, ok := parseRebuild(m.Version, s); ok {
			out = append(out, rb)
		}
	}
	return out
}

// RunRebuild applies rb on conn (one server): see the comment at the top of this file. A table
// of more than limit rows is left alone (ErrRebuildNeeded; 0: no limit): a stage applying
// migrations at start-up passes AutoRebuildRows. progress, if set, is told after each copied
// chunk.
func RunRebuild(ctx context.Context, conn driver.Conn, rb Rebuild, limit uint64, progress func(RebuildState)) error {
	return rebuildTarget{conn: conn}.run(ctx, rb, limit, progress)
}

func (t rebuildTarget) run(ctx context.Context, rb Rebuild, limit uint64, progress func(RebuildState)) error {
	st, err := t.status(ctx, rb)
	if err != nil || st.Done {
		return err
	}
	if st.Missing {
		return fmt.Errorf("rebuild %s: no such table", rb.Table)
	}
	if err := t.syncReplicas(ctx, rb.Table); err != nil {
		return err
	}
	if st, err = t.status(ctx, rb); err != nil {
		return err
	}
	if limit > 0 && st.Rows > limit {
		return fmt.Errorf("%w: migration %04d gives %s (%d rows) a new key", ErrRebuildNeeded, rb.Version, rb.Table, st.Rows)
	}
	plan, copied, total, err := t.state(ctx, rb)
	if err != nil {
		return err
	}
	if len(plan) == 0 {
		if err := t.createCopy(ctx, rb); err != nil {
			return err
		}
		if plan, err = t.plan(ctx, rb); err != nil {
			return err
		}
		total = st.Rows
		if err := t.record(ctx, rb, plan, total); err != nil {
			return err
		}
	}
	st.Chunks = len(plan)
	for _, c := range plan {
		if copied[c.N] {
			st.Copied++
			st.CopiedRows += c.Rows
			continue
		}
		// A chunk not recorded as copied may have been copied in part by a run that stopped:
		// its rows go first, so that none is there twice.
		if err := t.deleteRows(ctx, rb, c.Where); err != nil {
			return err
		}
		if err := t.conn.Exec(ctx, "INSERT INTO "+t.q(rb.copyName())+" SELECT * FROM "+t.q(rb.Table)+" WHERE "+c.Where); err != nil {
			return fmt.Errorf("rebuild %s: copy chunk %d: %w", rb.Table, c.N, err)
		}
		if err := InsertRows(ctx, t.conn, RebuildsTable, []rebuildRow{{Version: rb.Version, Table: rb.Table, Kind: "copied", Chunk: c.N, Where: c.Where, Rows: c.Rows, Total: total, RecordAt: time.Now()}}); err != nil {
			return fmt.Errorf("rebuild %s: record chunk %d: %w", rb.Table, c.N, err)
		}
		st.Copied++
		st.CopiedRows += c.Rows
		if progress != nil {
			progress(st)
		}
	}
	return t.swap(ctx, rb, total)
}

// createCopy creates <table>_rebuild: the table's definition with the new key.
func (t rebuildTarget) createCopy(ctx context.Context, rb Rebuild) error {
	ti, err := t.info(ctx, t.local(rb.Table))
	if err != nil {
		return err
	}
	create, err := rekey(ti.create, t.q(t.local(rb.copyName())), t.on(), rb.PartitionBy, rb.OrderBy)
	if err != nil {
		return fmt.Errorf("rebuild %s: %w", rb.Table, err)
	}
	if t.cluster != "" {
		path := strings.NewReplacer("{database}", t.db, "{table}", t.local(rb.copyName())).Replace(t.zkPath)
		create = replicatedPath.ReplaceAllString(create, "${1}'"+path+"'")
	}
	if err := t.conn.Exec(ctx, create); err != nil {
		return fmt.Errorf("rebuild %s: create %s: %w", rb.Table, rb.copyName(), err)
	}
	if t.cluster != "" {
		dist, err := t.info(ctx, rb.Table)
		if err != nil {
			return err
		}
		engine := strings.Replace(dist.engineFull, "'"+t.local(rb.Table)+"'", "'"+t.local(rb.copyName())+"'", 1)
		if engine == dist.engineFull {
			engine = strings.Replace(dist.engineFull, t.local(rb.Table), t.local(rb.copyName()), 1)
		}
		stmt := fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s%s AS %s ENGINE = %s", t.q(rb.copyName()), t.on(), t.q(t.local(rb.copyName())), engine)
		if err := t.conn.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("rebuild %s: create %s: %w", rb.Table, rb.copyName(), err)
		}
	}
	return nil
}

// emptyRebuild is what a rebuild of an empty table on one server runs, given the table's
// create_table_query: the copy under the new key, the swap, and the old table dropped (for the
// test that runs the migrations on a current ClickHouse without a connection of this package).
func emptyRebuild(rb Rebuild, create string) ([]string, error) {
	c, err := rekey(create, QuoteIdent(rb.copyName()), "", rb.PartitionBy, rb.OrderBy)
	if err != nil {
		return nil, err
	}
	return []string{c, fmt.Sprintf("RENAME TABLE %s TO %s, %s TO %s", QuoteIdent(rb.Table), QuoteIdent(rb.beforeName()), QuoteIdent(rb.copyName()), QuoteIdent(rb.Table)),
		"DROP TABLE " + QuoteIdent(rb.beforeName())}, nil
}

// replicatedPath finds the ZooKeeper path of a Replicated engine in a CREATE TABLE.
var replicatedPath = regexp.MustCompile(`(Replicated[A-Za-z]*MergeTree\()'[^']*'`)

var createHead = regexp.MustCompile(`(?is)^CREATE\s+TABLE\s+\S+\s*\(`)

// keyClauses matches a CREATE TABLE's PARTITION BY and ORDER BY, up to what follows them.
var keyClauses = regexp.MustCompile(`(?is)\s(PARTITION\s+BY\s.+?\s)?ORDER\s+BY\s.+?(\s+(?:PRIMARY\s+KEY|SAMPLE\s+BY|TTL|SETTINGS)\s|$)`)

// rekey rewrites create (system.tables' create_table_query) to create name on with the key.
func rekey(create, name, on, partitionBy, orderBy string) (string, error) {
	head := createHead.FindString(create)
	if head == "" {
		return "", fmt.Errorf("cannot read the table's definition: %.60q", create)
	}
	body := create[len(head):]
	loc := keyClauses.FindStringSubmatchIndex(body)
	if loc == nil {
		return "", fmt.Errorf("no ORDER BY in the table's definition: %.80q", create)
	}
	rest := ""
	if loc[4] >= 0 {
		rest = body[loc[4]:]
	}
	return "CREATE TABLE IF NOT EXISTS " + name + on + " (" + body[:loc[0]] + " PARTITION BY " + partitionBy + " ORDER BY " + orderBy + rest, nil
}

// deleteRows deletes the copy's rows that where selects, and waits for the deletion.
func (t rebuildTarget) deleteRows(ctx context.Context, rb Rebuild, where string) error {
	if err := t.deleteWhere(ctx, t.q(t.local(rb.copyName()))+t.on(), rb.copyName(), where); err != nil {
		return fmt.Errorf("rebuild %s: delete a partial chunk: %w", rb.Table, err)
	}
	return nil
}

// deleteWhere deletes the rows of table that where selects (alter is what ALTER TABLE names:
// the table, or its local tables ON CLUSTER) and waits until none is left: a DELETE is a
// mutation that ClickHouse applies in the background.
func (t rebuildTarget) deleteWhere(ctx context.Context, alter, table, where string) error {
	count := "SELECT toUInt64(count()) FROM " + t.q(table) + " WHERE " + where
	var n uint64
	if err := t.conn.QueryRow(ctx, count).Scan(&n); err != nil {
		return fmt.Errorf("count the rows to delete: %w", err)
	}
	if n == 0 {
		return nil
	}
	if err := t.conn.Exec(ctx, "ALTER TABLE "+alter+" DELETE WHERE "+where); err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	for {
		if err := t.conn.QueryRow(ctx, count).Scan(&n); err != nil {
			return fmt.Errorf("wait for the deletion: %w", err)
		}
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the deletion: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// swap checks that the copy holds every row of a table that did not change, then gives the
// copy the table's name and the table the name <table>_before_<version>.
func (t rebuildTarget) swap(ctx context.Context, rb Rebuild, total uint64) error {
	for _, table := range []string{rb.Table, rb.copyName()} {
		if err := t.syncReplicas(ctx, table); err != nil {
			return err
		}
	}
	src, err := t.info(ctx, rb.Table)
	if err != nil {
		return err
	}
	cp, err := t.info(ctx, rb.copyName())
	if err != nil {
		return err
	}
	if src.rows != total {
		// Start over next time: the plan and the copy are of rows that are not all there is.
		_ = t.conn.Exec(ctx, "DROP TABLE IF EXISTS "+t.q(rb.copyName())+t.on())
		if t.cluster != "" {
			_ = t.conn.Exec(ctx, "DROP TABLE IF EXISTS "+t.q(t.local(rb.copyName()))+t.on())
		}
		if err := t.forget(ctx, rb); err != nil {
			return fmt.Errorf("%w: %s had %d rows when the rebuild began and has %d now; %w", ErrRebuildSourceChanged, rb.Table, total, src.rows, err)
		}
		return fmt.Errorf("%w: %s had %d rows when the rebuild began and has %d now; the copy was dropped: stop the ClickHouse sinks and run backflow migrate again", ErrRebuildSourceChanged, rb.Table, total, src.rows)
	}
	if cp.rows != total {
		return fmt.Errorf("rebuild %s: the copy holds %d rows, the table %d; run migrate again to redo the chunks", rb.Table, cp.rows, total)
	}
	rename := fmt.Sprintf("RENAME TABLE %s TO %s, %s TO %s%s", t.q(t.local(rb.Table)), t.q(t.local(rb.beforeName())),
		t.q(t.local(rb.copyName())), t.q(t.local(rb.Table)), t.on())
	if err := t.conn.Exec(ctx, rename); err != nil {
		return fmt.Errorf("rebuild %s: swap: %w", rb.Table, err)
	}
	if t.cluster != "" {
		// The Distributed table keeps its name and now reads the rebuilt _local tables; the
		// copy's Distributed table pointed at a name that is gone.
		if err := t.conn.Exec(ctx, "DROP TABLE IF EXISTS "+t.q(rb.copyName())+t.on()); err != nil {
			return fmt.Errorf("rebuild %s: drop the copy's Distributed table: %w", rb.Table, err)
		}
	}
	if total == 0 {
		// An empty table (a new install) leaves nothing worth keeping.
		if err := t.conn.Exec(ctx, "DROP TABLE IF EXISTS "+t.q(t.local(rb.beforeName()))+t.on()); err != nil {
			return fmt.Errorf("rebuild %s: drop the empty old table: %w", rb.Table, err)
		}
	}
	return InsertRows(ctx, t.conn, RebuildsTable, []rebuildRow{{Version: rb.Version, Table: rb.Table, Kind: "swapped", Rows: total, Total: total, RecordAt: time.Now()}})
}
