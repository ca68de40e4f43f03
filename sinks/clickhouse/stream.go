package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	hamba "github.com/hamba/avro/v2"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/conf"
	"github.com/backflowhq/backflow/internal/dlq"
	"github.com/backflowhq/backflow/internal/moderation"
)

// A declared stream: any Avro topic into a table derived from its subject's schema
// (derive.go), with the built-in sink's batching, retries, DLQ, ledger and commits (Sink).
// Start with StreamConfig (one section of the config's streams list), PlanStream (what
// `backflow migrate` shows and applies) and NewStream (the stage's sink).

// StreamStagePrefix names a stream's stage: stream-<name>, in stages, the DLQ's stage header
// and the metrics' stage label (a DLQ stage is lowercase letters, digits, '_' and '-').
const StreamStagePrefix = "stream-"

// The columns backflow adds to a stream's table besides the schema's. _offset is the
// ReplacingMergeTree version: a record written twice (a redelivery, a replay) is one row.
const (
	ColPartition = "_partition" // Int32: the record's partition
	ColOffset    = "_offset"    // UInt64: its offset, the rows' version
	ColSchemaID  = "_schema_id" // UInt32: its writer schema's registry id
	// ColWindow is the dedupe window the record's event time falls in (event time divided by
	// dedupe_window); only with a dedupe window.
	ColWindow = "_window"
	// ColSensitiveWords are the dictionary words the sensitive-word service found in the
	// screened fields, distinct and sorted; only with screen.
	ColSensitiveWords = "_sensitive_words"
)

// StreamConfig is one declared stream: one section of the config file's streams list. Each
// field's default is its default tag; Subject, Table and Group default to names made from
// Name and Topic (withDefaults).
type StreamConfig struct {
	Name    string `key:"name" doc:"the stream's name (lowercase letters, digits, '_', '-'; at most 57); its stage is stream-<name>"`
	Topic   string `key:"topic" doc:"the topic to read: Avro values in the Confluent wire format"`
	Subject string `key:"subject" doc:"registry subject of the values' schema; empty: <topic>-value"`
	Table   string `key:"table" doc:"ClickHouse table the stream lands in (and v_<table>, its deduplicated view); empty: the name with '-' as '_'"`
	Group   string `key:"group" doc:"Kafka consumer group (also recorded in sink_ledger); empty: backflow-stream-<name>"`
	// DedupeKey is the Avro field path (a.b) whose value identifies a record: rows with equal
	// keys collapse to the one at the highest offset. Empty: each record is its own row, and
	// only a record written twice collapses.
	DedupeKey string `key:"dedupe_key" doc:"Avro field path (a.b) identifying a record: rows with equal keys collapse to the latest (highest offset); empty: none, every record is a row"`
	// DedupeWindow, with DedupeKey, makes equal keys collapse only when their event times fall
	// in the same window (tumbling, counted from the Unix epoch). 0: whenever.
	DedupeWindow time.Duration `key:"dedupe_window,zero" doc:"with dedupe_key: equal keys collapse only within the same window of event time (tumbling windows from the epoch; needs event_time); 0: at any distance"`
	// EventTime is the Avro field path of the record's time (a timestamp-millis or -micros
	// long, or a date): the table is partitioned by its month and the ledger dates flushes by it.
	EventTime string   `key:"event_time" doc:"Avro field path of the event time (timestamp-millis, timestamp-micros or date): partitions the table by month; empty: one partition"`
	Include   []string `key:"include" doc:"Avro field paths whose columns the table keeps (a record keeps every field under it); empty: every field"`
	Exclude   []string `key:"exclude" doc:"Avro field paths whose columns the table leaves out"`
	// Rename maps a derived column name (user_id) to the name the table uses.
	Rename map[string]string `key:"rename" doc:"column renames: derived column name (user_id) to the table's name for it"`
	// Screen are the Avro field paths of text fields checked with the sensitive-word service;
	// the dictionary words found in them land in ColSensitiveWords.
	Screen []string `key:"screen" doc:"Avro field paths of text fields (string or optional string) to screen with the sensitive-word service: the dictionary words found land in _sensitive_words; the stage then needs sensitive_words"`
}

var (
	streamName = regexp.MustCompile(`^[a-z0-9_-]{1,57}$`)
	identName  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	fieldPath  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)
)

// WithDefaults fills in Subject, Table and Group.
func (c StreamConfig) WithDefaults() StreamConfig {
	if c.Subject == "" && c.Topic != "" {
		c.Subject = c.Topic + "-value"
	}
	if c.Table == "" {
		c.Table = strings.ReplaceAll(c.Name, "-", "_")
	}
	if c.Group == "" {
		c.Group = "backflow-stream-" + c.Name
	}
	return c
}

// Stage is the stream's stage name, stream-<name>.
func (c StreamConfig) Stage() string { return StreamStagePrefix + c.Name }

// View is the stream's deduplicated view, v_<table>.
func (c StreamConfig) View() string { return "v_" + c.WithDefaults().Table }

// Validate reports every bad field that can be told without the schema, each a
// conf.FieldError naming it; CheckSchema checks the field paths against a schema.
func (c StreamConfig) Validate() error {
	c = c.WithDefaults()
	var errs []error
	bad := func(field, format string, a ...any) { errs = append(errs, conf.Errorf(field, format, a...)) }
	if !streamName.MatchString(c.Name) {
		bad("Name", "name: %q, want lowercase letters, digits, '_' or '-' (at most 57)", c.Name)
	}
	if !kafkaName.MatchString(c.Topic) {
		bad("Topic", "topic: %q is not a valid Kafka topic name", c.Topic)
	}
	if strings.TrimSpace(c.Subject) == "" {
		bad("Subject", "subject: empty")
	}
	if !identName.MatchString(c.Table) || strings.HasPrefix(c.Table, "v_") || strings.HasSuffix(c.Table, LocalSuffix) {
		bad("Table", "table: %q, want letters, digits and '_', not starting with v_ or ending in %s", c.Table, LocalSuffix)
	}
	if !kafkaName.MatchString(c.Group) {
		bad("Group", "group: %q is not a valid group name (letters, digits, '.', '_', '-')", c.Group)
	}
	for _, f := range []struct{ name, path string }{{"DedupeKey", c.DedupeKey}, {"EventTime", c.EventTime}} {
		if f.path != "" && !fieldPath.MatchString(f.path) {
			bad(f.name, "%q is not an Avro field path (name.name...)", f.path)
		}
	}
	for _, f := range []struct {
		name  string
		paths []string
	}{{"Include", c.Include}, {"Exclude", c.Exclude}, {"Screen", c.Screen}} {
		for _, p := range f.paths {
			if !fieldPath.MatchString(p) {
				bad(f.name, "%q is not an Avro field path (name.name...)", p)
			}
		}
	}
	switch {
	case c.DedupeWindow < 0:
		bad("DedupeWindow", "dedupe window: %v is negative", c.DedupeWindow)
	case c.DedupeWindow > 0 && c.DedupeKey == "":
		bad("DedupeWindow", "dedupe window: %v without a dedupe_key", c.DedupeWindow)
	case c.DedupeWindow > 0 && c.EventTime == "":
		bad("DedupeWindow", "dedupe window: %v without an event_time to window by", c.DedupeWindow)
	case c.DedupeWindow > 0 && c.DedupeWindow%time.Second != 0:
		bad("DedupeWindow", "dedupe window: %v, want whole seconds", c.DedupeWindow)
	}
	seen := map[string]string{}
	for from, to := range c.Rename {
		switch {
		case !identName.MatchString(to) || strings.HasPrefix(to, "_"):
			bad("Rename", "rename %s: %q, want letters, digits and '_', not starting with '_'", from, to)
		case seen[to] != "":
			bad("Rename", "rename: %s and %s both become %s", seen[to], from, to)
		}
		seen[to] = from
	}
	return errors.Join(errs...)
}

// Columns are the columns of the stream's table for schema (without backflow's own, ColPartition
// and the rest): DeriveColumns, then Include and Exclude, then Rename. An error is a
// conf.FieldError naming the key (Include, DedupeKey, ...) whose field is missing or does not
// fit, and the field.
func (c StreamConfig) Columns(schema hamba.Schema, caps Capabilities) ([]Column, error) {
	c = c.WithDefaults()
	all, err := DeriveColumns(schema, caps)
	if err != nil {
		return nil, err
	}
	under := func(field, path string) bool { return field == path || strings.HasPrefix(field, path+".") }
	var errs []error
	bad := func(key, format string, a ...any) { errs = append(errs, conf.Errorf(key, format, a...)) }
	matches := func(paths []string, key string) map[string]bool {
		out := map[string]bool{}
		for _, p := range paths {
			found := false
			for _, col := range all {
				if under(col.Field, p) {
					found, out[col.Name] = true, true
				}
			}
			if !found {
				bad(key, "field %s: not in the schema", p)
			}
		}
		return out
	}
	include, exclude := matches(c.Include, "Include"), matches(c.Exclude, "Exclude")
	var cols []Column
	renamed := map[string]bool{}
	for _, col := range all {
		if (len(c.Include) > 0 && !include[col.Name]) || exclude[col.Name] {
			continue
		}
		if to, ok := c.Rename[col.Name]; ok {
			renamed[col.Name] = true
			col.Name = to
		}
		cols = append(cols, col)
	}
	for from := range c.Rename {
		if !renamed[from] {
			bad("Rename", "rename %s: no such column (the derived names are the field paths joined with '_')", from)
		}
	}
	names := map[string]bool{}
	for _, col := range cols {
		if names[col.Name] {
			bad("Rename", "two columns are named %s", col.Name)
		}
		names[col.Name] = true
	}
	if c.DedupeKey != "" {
		switch col, ok := columnOf(cols, c.DedupeKey); {
		case !ok:
			bad("DedupeKey", "field %s: %s", c.DedupeKey, missing(all, c.DedupeKey))
		case strings.HasPrefix(col.Type, "Nullable") || strings.HasPrefix(col.Type, "Array") || col.JSON || col.MapPart != "":
			bad("DedupeKey", "field %s is %s: a dedupe key must be a single non-null value", c.DedupeKey, col.Type)
		}
	}
	if c.EventTime != "" {
		switch col, ok := columnOf(cols, c.EventTime); {
		case !ok:
			bad("EventTime", "field %s: %s", c.EventTime, missing(all, c.EventTime))
		case !strings.HasPrefix(col.Type, "DateTime") && col.Type != "Date":
			bad("EventTime", "field %s is %s: an event time must be a timestamp-millis, timestamp-micros or date, not null", c.EventTime, col.Type)
		}
	}
	for _, f := range c.Screen {
		switch col, ok := columnOf(cols, f); {
		case !ok:
			bad("Screen", "field %s: %s", f, missing(all, f))
		case col.Type != "String" && col.Type != "Nullable(String)" || col.JSON:
			bad("Screen", "field %s is %s: only a string (or an optional string) is screened", f, col.Type)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return cols, nil
}

func columnOf(cols []Column, field string) (Column, bool) {
	for _, c := range cols {
		if c.Field == field && c.MapPart == "" {
			return c, true
		}
	}
	return Column{}, false
}

// missing says why field has no column: not in the schema, or left out by include/exclude.
func missing(all []Column, field string) string {
	if _, ok := columnOf(all, field); ok {
		return "left out by include or exclude"
	}
	for _, c := range all {
		if strings.HasPrefix(c.Field, field+".") {
			return "a record, not a single value"
		}
	}
	return "not in the schema"
}

// Spec is the stream's table for cols: backflow's columns after the schema's, ordered by the
// dedupe key (and window) or else by partition and offset, versioned by the offset,
// partitioned by the event time's month.
func (c StreamConfig) Spec(cols []Column) TableSpec {
	c = c.WithDefaults()
	t := TableSpec{Name: c.Table, Columns: append(slices.Clone(cols), c.meta()...), Version: ColOffset}
	if key, ok := columnOf(cols, c.DedupeKey); ok {
		t.OrderBy = []string{key.Name}
		if c.DedupeWindow > 0 {
			t.OrderBy = append(t.OrderBy, ColWindow)
		}
	} else {
		t.OrderBy = []string{ColPartition, ColOffset}
	}
	if ev, ok := columnOf(cols, c.EventTime); ok {
		t.PartitionBy = "toYYYYMM(" + backquote(ev.Name) + ")"
	}
	return t
}

func (c StreamConfig) meta() []Column {
	m := []Column{{Name: ColPartition, Type: "Int32"}, {Name: ColOffset, Type: "UInt64"}, {Name: ColSchemaID, Type: "UInt32"}}
	if c.DedupeWindow > 0 {
		m = append(m, Column{Name: ColWindow, Type: "UInt64"})
	}
	if len(c.Screen) > 0 {
		m = append(m, Column{Name: ColSensitiveWords, Type: "Array(String)"})
	}
	return m
}

// ViewDDL creates the stream's deduplicated view: its table read FINAL, one row per key.
func (c StreamConfig) ViewDDL() string {
	c = c.WithDefaults()
	return "CREATE VIEW IF NOT EXISTS " + c.View() + " AS SELECT * FROM " + c.Table + " FINAL"
}

// viewAfter is stmts, which add or modify columns, followed by what re-creates the view over the table:
// a view lists the columns its table had when it was created (ClickHouse 18.16 expands the *
// then, and refuses to ALTER a view), so it is dropped and created again to show the new
// columns and types. Readers of the view may
// see it missing for that moment.
func (c StreamConfig) viewAfter(stmts []string) []string {
	if len(stmts) == 0 {
		return nil
	}
	return append(slices.Clone(stmts), "DROP TABLE IF EXISTS "+c.View(), c.ViewDDL())
}

// StreamPlan is what following a schema takes for a stream's table: creating it (and its
// view), or the columns to add, or nothing. Applied (ApplyStream), it is recorded as the
// stream's next version in StreamMigrationsTable.
type StreamPlan struct {
	Stream   StreamConfig
	SchemaID int      // the registry id of the schema the plan follows
	Columns  []Column // the schema's columns, as the table will have them
	Create   bool     // the table does not exist yet
	// Statements are the DDL in order: CREATE TABLE and CREATE VIEW, or the ADD and MODIFY
	// COLUMNs and the view's re-creation; empty: up to date.
	Statements []string
	// Version is the version the plan would be recorded under (the stream's last one, plus
	// one), or with no Statements the version the table is at; 0 for a stream whose table
	// backflow has not recorded (StreamMigrationsTable missing or without its rows).
	Version uint32
}

// Change says in a few words what the plan does: "create", "add columns a, b", "modify
// columns c" (a type it follows: new enum symbols, a promotion), both joined by "; ", or "up
// to date".
func (p StreamPlan) Change() string {
	if p.Create {
		return "create"
	}
	var added, modified []string
	for _, s := range p.Statements {
		if m := addColumn.FindStringSubmatch(s); m != nil {
			added = append(added, m[2])
		}
		if m := modifyColumn.FindStringSubmatch(s); m != nil {
			modified = append(modified, m[2])
		}
	}
	var parts []string
	if len(added) > 0 {
		parts = append(parts, "add columns "+strings.Join(added, ", "))
	}
	if len(modified) > 0 {
		parts = append(parts, "modify columns "+strings.Join(modified, ", "))
	}
	if len(parts) == 0 {
		return "up to date"
	}
	return strings.Join(parts, "; ")
}

// PlanStream compares the stream's table on the server conn is connected to with the columns
// schema (registry id schemaID) derives: a table to create, columns to add or modify
// (PlanEvolution), or nothing. A change the table cannot follow is an *IncompatibleError naming the field.
func PlanStream(ctx context.Context, conn driver.Conn, c StreamConfig, schema hamba.Schema, schemaID int, caps Capabilities) (StreamPlan, error) {
	c = c.WithDefaults()
	cols, err := c.Columns(schema, caps)
	if err != nil {
		return StreamPlan{}, fmt.Errorf("stream %s: %w", c.Name, err)
	}
	p := StreamPlan{Stream: c, SchemaID: schemaID, Columns: cols}
	have, err := tableColumns(ctx, conn, c.Table)
	if err != nil {
		return p, err
	}
	var last uint32
	if ok, err := tableExists(ctx, conn, StreamMigrationsTable); err != nil {
		return p, err
	} else if ok { // absent before the built-in migrations ran (a first migrate --dry-run)
		if last, err = lastStreamVersion(ctx, conn, c.Name); err != nil {
			return p, err
		}
	}
	p.Version = last
	if len(have) == 0 {
		p.Create = true
		p.Statements = []string{c.Spec(cols).CreateDDL(), c.ViewDDL()}
	} else {
		stmts, err := PlanEvolution(c.Table, have, cols, c.Spec(cols).OrderBy...)
		if err != nil {
			return p, fmt.Errorf("stream %s: table %s: %w", c.Name, c.Table, err)
		}
		p.Statements = c.viewAfter(stmts)
	}
	if len(p.Statements) > 0 {
		p.Version = last + 1
	}
	return p, nil
}

// StreamMigrationsTable records each declared stream's versioned migrations, one row per
// version (migration 0013): version 1 created the table, each later one added or modified the
// columns of a newer schema.
const StreamMigrationsTable = "stream_migrations"

// streamMigration is a row of StreamMigrationsTable.
type streamMigration struct {
	Stream     string    `ch:"stream"`
	Table      string    `ch:"table_name"`
	Version    uint32    `ch:"version"`
	SchemaID   uint32    `ch:"schema_id"`
	Change     string    `ch:"change"` // what StreamPlan.Change said
	Statements []string  `ch:"statements"`
	AppliedAt  time.Time `ch:"applied_at"`
}

// lastStreamVersion is the highest version recorded for the stream, 0 for none; the table
// must exist.
func lastStreamVersion(ctx context.Context, conn driver.Conn, stream string) (uint32, error) {
	var v uint32
	if err := conn.QueryRow(ctx, `SELECT max(version) FROM `+StreamMigrationsTable+` WHERE stream = ?`, stream).Scan(&v); err != nil {
		return 0, fmt.Errorf("clickhouse: read %s: %w", StreamMigrationsTable, err)
	}
	return v, nil
}

// recordStream records an applied plan as the stream's next version.
func recordStream(ctx context.Context, conn driver.Conn, p StreamPlan) (uint32, error) {
	if err := CheckTable(ctx, conn, StreamMigrationsTable); err != nil {
		return 0, fmt.Errorf("stream %s: %w", p.Stream.Name, err)
	}
	last, err := lastStreamVersion(ctx, conn, p.Stream.Name)
	if err != nil {
		return 0, err
	}
	row := streamMigration{Stream: p.Stream.Name, Table: p.Stream.Table, Version: last + 1, SchemaID: uint32(p.SchemaID),
		Change: p.Change(), Statements: p.Statements, AppliedAt: time.Now().UTC()}
	if err := InsertRows(ctx, conn, StreamMigrationsTable, []streamMigration{row}); err != nil {
		return 0, fmt.Errorf("stream %s: record migration: %w", p.Stream.Name, err)
	}
	return last + 1, nil
}

// tableColumns lists the columns the table has in the connection's database (none when it
// does not exist).
func tableColumns(ctx context.Context, conn driver.Conn, table string) ([]Column, error) {
	rows, err := conn.Query(ctx, `SELECT name, type FROM system.columns WHERE database = currentDatabase() AND table = ?`, table)
	if err != nil {
		return nil, fmt.Errorf("clickhouse: columns of %s: %w", table, err)
	}
	defer rows.Close()
	var out []Column
	for rows.Next() {
		var c Column
		if err := rows.Scan(&c.Name, &c.Type); err != nil {
			return nil, fmt.Errorf("clickhouse: columns of %s: %w", table, err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// ApplyStream runs a plan's statements on the ClickHouse c points at, then records them in
// StreamMigrationsTable as the stream's next version, which it returns (0: nothing to apply).
// In cluster mode they run as the migrations' do (cluster.go): the table as a replicated
// <table>_local on every shard under a Distributed <table>, the view and the added columns ON
// CLUSTER. An ADD COLUMN whose column is already there is skipped, so applying a plan twice
// converges (and records it twice: a failure between the DDL and its row is retried whole).
func ApplyStream(ctx context.Context, c Conn, p StreamPlan) (uint32, error) {
	if len(p.Statements) == 0 {
		return 0, nil
	}
	c = c.withDefaults()
	conn, err := Open(ctx, c)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	if err := applyStream(ctx, c, conn, p); err != nil {
		return 0, err
	}
	return recordStream(ctx, conn, p)
}

func applyStream(ctx context.Context, c Conn, conn driver.Conn, p StreamPlan) error {
	if c.Cluster == "" {
		for _, stmt := range p.Statements {
			exists, err := columnExists(ctx, conn, stmt)
			if err != nil {
				return fmt.Errorf("stream %s: %w", p.Stream.Name, err)
			}
			if exists {
				continue
			}
			if err := conn.Exec(ctx, stmt); err != nil {
				return fmt.Errorf("stream %s: %s: %w", p.Stream.Name, firstLine(stmt), err)
			}
		}
		return nil
	}
	hosts, err := ClusterHosts(ctx, conn, c.Cluster)
	if err != nil {
		return err
	}
	names := map[string]bool{p.Stream.Table: true}
	var hostConns []driver.Conn
	defer func() {
		for _, hc := range hostConns {
			hc.Close()
		}
	}()
	for _, stmt := range p.Statements {
		cstmts, err := clusterStatements(stmt, c.Cluster, c.Database, c.ZooKeeperPath, names)
		if err != nil {
			return fmt.Errorf("stream %s: %w", p.Stream.Name, err)
		}
		for _, cs := range cstmts {
			targets := []driver.Conn{conn}
			if cs.PerHost {
				if hostConns == nil {
					for _, h := range hosts {
						hc := c
						hc.Addr = h.Addr
						x, err := Open(ctx, hc)
						if err != nil {
							return fmt.Errorf("stream %s: host %s: %w", p.Stream.Name, h.Addr, err)
						}
						hostConns = append(hostConns, x)
					}
				}
				targets = hostConns
			}
			for _, t := range targets {
				if err := execClusterStmt(ctx, t, cs); err != nil {
					return fmt.Errorf("stream %s: %s: %w", p.Stream.Name, firstLine(cs.SQL), err)
				}
			}
		}
	}
	return nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// streamCols is one version of a stream table's columns: the schema's, and the names an
// INSERT lists (backflow's columns included).
type streamCols struct {
	cols   []Column
	insert []string // backquoted
	event  int      // index of the event-time column in cols, -1 without one
	screen []int    // indexes of the screened columns in cols
}

func newStreamCols(c StreamConfig, cols []Column) *streamCols {
	sc := &streamCols{cols: cols, event: -1}
	for i, col := range cols {
		if c.EventTime != "" && col.Field == c.EventTime && col.MapPart == "" {
			sc.event = i
		}
		if slices.Contains(c.Screen, col.Field) {
			sc.screen = append(sc.screen, i)
		}
	}
	for _, col := range append(slices.Clone(cols), c.meta()...) {
		sc.insert = append(sc.insert, backquote(col.Name))
	}
	return sc
}

// streamRow is one record's row: the values of cols.insert, in order.
type streamRow struct {
	cols *streamCols
	vals []any
}

// streamTable is a declared stream's records (see records): decoded with their writer schema
// resolved to the schema the table follows, and inserted into the stream's table. A record
// whose writer schema the stream has not met yet is checked against the table first: columns
// it adds (each from a field with a default) are added before the record is buffered, and a
// change the table cannot follow (*IncompatibleError) stops the sink with the record and what
// follows it uncommitted: neither dropped nor dead-lettered.
type streamTable struct {
	sc   StreamConfig
	ch   Conn
	caps Capabilities
	dec  *avro.GenericDecoder
	mod  *moderation.Client // screens the Screen fields; nil without

	mu     sync.Mutex
	reader hamba.Schema // the newest schema the table follows
	cur    *streamCols
	met    map[int]bool // writer ids checked against the table

	// alter keeps a MODIFY COLUMN (follow, holding it) and an insert (holding it shared) apart,
	// so that rows decoded before a column's type changed are inserted recast to the type the
	// table has (types, which it guards).
	alter sync.RWMutex
	types map[string]string // column name → type, for the columns a MODIFY COLUMN changed
}

// StreamRun is what a stream's sink starts from: the schema its table follows (the subject's
// latest, which PlanStream and ApplyStream brought the table to) and the server's capabilities.
type StreamRun struct {
	Schema hamba.Schema
	Caps   Capabilities
}

// NewStream validates the configs and builds the sink of the declared stream sc: cfg's
// Group and Topic are sc's; its batching, DLQ topic and backoff apply. The table must follow
// sr.Schema already (ApplyStream).
func NewStream(sc StreamConfig, cfg Config, sr StreamRun, rc RunConfig) (*Sink, error) {
	sc = sc.WithDefaults()
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	cfg.Group, cfg.Topic = sc.Group, sc.Topic
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := rc.ClickHouse.Validate(); err != nil {
		return nil, err
	}
	if rc.Registry == nil || sr.Schema == nil {
		return nil, errors.New("clickhouse stream: registry and schema are required")
	}
	cols, err := sc.Columns(sr.Schema, sr.Caps)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", sc.Name, err)
	}
	if len(sc.Screen) > 0 && rc.SensitiveWords == nil {
		return nil, fmt.Errorf("stream %s: screen needs the sensitive-word service", sc.Name)
	}
	dec, err := avro.NewGenericDecoder(rc.Registry, avro.DecoderConfig{})
	if err != nil {
		return nil, err
	}
	st := &streamTable{sc: sc, ch: rc.ClickHouse, caps: sr.Caps, dec: dec, mod: rc.SensitiveWords, reader: sr.Schema,
		cur: newStreamCols(sc, cols), met: map[int]bool{}}
	return newSink(cfg, rc, sc.Stage(), st), nil
}

func (t *streamTable) decode(ctx context.Context, s *Sink, p *pending) error {
	id, body, err := t.dec.Frame(p.rec.Value)
	if err != nil {
		p.err = err
		return nil
	}
	var writer hamba.Schema
	err = s.decodeRetrying(ctx, func() (err error) {
		writer, err = t.dec.Writer(ctx, id)
		return err
	})
	switch {
	case err != nil && avro.IsRetryable(err):
		return ctx.Err()
	case err != nil:
		p.err = err // unknown schema id: the record's own fault
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.met[id] {
		if err := t.follow(ctx, s, id, writer); err != nil {
			return err
		}
	}
	m, err := t.dec.Decode(id, body, writer, t.reader)
	switch {
	case errors.Is(err, avro.ErrIncompatibleSchema):
		return fmt.Errorf("%w: stream %s: schema id %d: %w", ErrStreamStopped, t.sc.Name, id, err)
	case err != nil:
		p.err = err
		return nil
	}
	vals, err := RowValues(t.cur.cols, m)
	if err != nil {
		p.err = dlq.WithClass(avro.ClassInvalid, err)
		return nil
	}
	vals = append(vals, p.rec.Partition, uint64(max(p.rec.Offset, 0)), uint32(id))
	if t.sc.DedupeWindow > 0 {
		var w uint64
		if et, ok := vals[t.cur.event].(time.Time); ok && et.Unix() > 0 {
			w = uint64(et.Unix()) / uint64(t.sc.DedupeWindow/time.Second)
		}
		vals = append(vals, w)
	}
	if len(t.sc.Screen) > 0 {
		vals = append(vals, []string(nil)) // filled in by screen, once per flush
	}
	p.row = streamRow{cols: t.cur, vals: vals}
	return nil
}

// ErrStreamStopped is what a stream's sink stops with (errors.Is) when a record's schema makes
// a change its table cannot follow; the error says which field (an *IncompatibleError, or
// the writer schema's resolution to the table's). The record and those after it stay
// uncommitted: fix the schema (or the table), and the stream resumes from them.
var ErrStreamStopped = errors.New("clickhouse: stream stopped: its table cannot follow the record's schema")

// follow checks a writer schema met for the first time against the table, adding the columns
// it adds and modifying those whose types it changes (PlanEvolution); the table then follows
// it.
func (t *streamTable) follow(ctx context.Context, s *Sink, id int, writer hamba.Schema) error {
	cols, err := t.sc.Columns(writer, t.caps)
	if err != nil {
		return fmt.Errorf("%w: stream %s: schema id %d: %w", ErrStreamStopped, t.sc.Name, id, err)
	}
	stmts, next, err := evolve(t.sc.Table, t.cur.cols, cols, t.sc.Spec(cols).OrderBy)
	if err != nil {
		return fmt.Errorf("%w: stream %s: schema id %d: %w", ErrStreamStopped, t.sc.Name, id, err)
	}
	if len(stmts) > 0 {
		s.log.Info("stream: a newer schema changes columns; following it", "stream", t.sc.Name, "schema_id", id, "statements", strings.Join(stmts, "; "))
		modifies := slices.ContainsFunc(stmts, modifyColumn.MatchString)
		if modifies {
			t.alter.Lock() // no insert of rows with the older types while their columns change
			defer t.alter.Unlock()
		}
		attempts := 0
		if err := s.retry(ctx, "alter "+t.sc.Table, &attempts, func(ctx context.Context) error {
			v, err := ApplyStream(ctx, t.ch, StreamPlan{Stream: t.sc, SchemaID: id, Statements: t.sc.viewAfter(stmts)})
			if err == nil {
				s.log.Info("stream: recorded the table's migration", "stream", t.sc.Name, "version", v, "schema_id", id)
			}
			return err
		}, IsRetryable); err != nil {
			return fmt.Errorf("stream %s: follow schema id %d: %w", t.sc.Name, id, err)
		}
		if modifies {
			if t.types == nil {
				t.types = map[string]string{}
			}
			for _, c := range next {
				t.types[c.Name] = c.Type
			}
		}
		t.cur, t.reader = newStreamCols(t.sc, next), writer
	}
	t.met[id] = true
	return nil
}

func (t *streamTable) insert(ctx context.Context, s *Sink, ps []*pending, rejects map[*pending]error) (int, error) {
	t.alter.RLock()
	defer t.alter.RUnlock()
	if err := t.recast(ps); err != nil {
		return 0, err
	}
	attempts := 0
	if t.mod != nil {
		if err := t.screen(ctx, s, ps, &attempts); err != nil {
			return attempts, err
		}
	}
	for len(ps) > 0 {
		// Rows decoded before and after a schema added columns are inserted apart, each with
		// its own column list (the older ones get the new columns' defaults).
		n := 1
		for n < len(ps) && ps[n].row.cols == ps[0].row.cols {
			n++
		}
		rows := make([]streamRow, n)
		for i, p := range ps[:n] {
			rows[i] = p.row
		}
		a, err := insertRows(ctx, s, t.sc.Table, rows, ps[:n], rejects)
		attempts += a
		if err != nil {
			return attempts, err
		}
		ps = ps[n:]
	}
	return attempts, nil
}

// recast converts the values of rows decoded before a MODIFY COLUMN changed their column's
// type (Int32 values for an Int64 column, ...) to the type the table has now, and points them
// at columns of those types. Rows of one column version share their *streamCols, so each
// version is checked once.
func (t *streamTable) recast(ps []*pending) error {
	if len(t.types) == 0 {
		return nil
	}
	now := map[*streamCols]*streamCols{}
	for _, p := range ps {
		old := p.row.cols
		nc, seen := now[old]
		if !seen {
			var cols []Column
			for i, c := range old.cols {
				if typ, ok := t.types[c.Name]; ok && typ != c.Type {
					if cols == nil {
						cols = slices.Clone(old.cols)
					}
					cols[i].Type = typ
				}
			}
			if cols != nil {
				nc = newStreamCols(t.sc, cols)
			}
			now[old] = nc
		}
		if nc == nil {
			continue
		}
		for i, c := range old.cols {
			if c.Type == nc.cols[i].Type {
				continue
			}
			v, err := recastValue(p.row.vals[i], nc.cols[i].Type)
			if err != nil {
				return fmt.Errorf("stream %s: column %s from %s: %w", t.sc.Name, c.Name, c.Type, err)
			}
			p.row.vals[i] = v
		}
		p.row.cols = nc
	}
	return nil
}

// screen checks the batch's screened texts with the sensitive-word service, each distinct text
// once, MaxItems at a time, and sets each row's ColSensitiveWords. An outage of the service is
// retried like ClickHouse's (fetching paused), never dead-lettered.
func (t *streamTable) screen(ctx context.Context, s *Sink, ps []*pending, attempts *int) error {
	words := map[string][]string{}
	var texts []string
	for _, p := range ps {
		for _, i := range p.row.cols.screen {
			if txt := textOf(p.row.vals[i]); txt != "" {
				if _, ok := words[txt]; !ok {
					words[txt] = nil
					texts = append(texts, txt)
				}
			}
		}
	}
	for len(texts) > 0 {
		chunk := texts[:min(len(texts), t.mod.MaxItems())]
		texts = texts[len(chunk):]
		items := make([]moderation.Item, len(chunk))
		for i, txt := range chunk {
			items[i] = moderation.Item{ID: strconv.Itoa(i), Text: txt}
		}
		var res []moderation.Result
		if err := s.retry(ctx, "screen", attempts, func(ctx context.Context) (err error) {
			res, err = t.mod.Check(ctx, items)
			return err
		}, moderation.IsRetryable); err != nil {
			return fmt.Errorf("stream %s: screen: %w", t.sc.Name, err)
		}
		for i, r := range res {
			for _, h := range r.Hits {
				words[chunk[i]] = append(words[chunk[i]], h.Word)
			}
		}
	}
	for _, p := range ps {
		var found []string
		for _, i := range p.row.cols.screen {
			found = append(found, words[textOf(p.row.vals[i])]...)
		}
		slices.Sort(found)
		p.row.vals[len(p.row.vals)-1] = slices.Compact(found)
	}
	return nil
}

func textOf(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case *string:
		if x != nil {
			return *x
		}
	}
	return ""
}

func (t *streamTable) landed(p *pending) (int, int, time.Time) {
	var et time.Time
	if i := p.row.cols.event; i >= 0 {
		et, _ = p.row.vals[i].(time.Time)
	}
	return 1, 0, et
}

// appendStreamRows is the INSERT of a batch of one stream's rows, all of one column version.
func appendStreamRows(ctx context.Context, conn driver.Conn, table string, rows []streamRow) error {
	if len(rows) == 0 {
		return nil
	}
	b, err := conn.PrepareBatch(ctx, "INSERT INTO "+table+" ("+strings.Join(rows[0].cols.insert, ", ")+") VALUES")
	if err != nil {
		return err
	}
	for _, r := range rows {
		if err := b.Append(r.vals...); err != nil {
			b.Abort()
			return fmt.Errorf("%w: %w", ErrClickHouseRejected, err)
		}
	}
	return b.Send()
}
