package chschema

import (
	"errors"
	"regexp"
	"slices"
	"strings"
	"time"

	hamba "github.com/hamba/avro/v2"

	"github.com/backflowhq/backflow/internal/conf"
)

// kafkaName is what Kafka takes as a topic or group name.
var kafkaName = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// A declared stream: any Avro, Protobuf or JSON Schema topic into a table derived from its subject's schema
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
	Topic   string `key:"topic" doc:"the topic to read: Avro, Protobuf or JSON values in the Confluent wire format (the subject's schemaType says which)"`
	Subject string `key:"subject" doc:"registry subject of the values' schema; empty: <topic>-value"`
	Table   string `key:"table" doc:"ClickHouse table the stream lands in (and v_<table>, its deduplicated view); empty: the name with '-' as '_'"`
	Group   string `key:"group" doc:"Kafka consumer group (also recorded in sink_ledger); empty: backflow-stream-<name>"`
	// Message is, for a Protobuf subject, the message the stream reads: its full name
	// (shop.v1.Order) or its name in the file's package. Empty: the file's first message.
	Message string `key:"message" doc:"Protobuf subjects only: the message the stream reads, by full name (shop.v1.Order) or by its name in the file's package; records of another message of the file are dead-lettered as invalid; empty: the file's first message"`
	// DedupeKey is the field path (a.b) of the schema (an Avro record's, a Protobuf message's or a JSON Schema object's) whose value identifies a record: rows with equal
	// keys collapse to the one at the highest offset. Empty: each record is its own row, and
	// only a record written twice collapses.
	DedupeKey string `key:"dedupe_key" doc:"field path (a.b) of the schema identifying a record: rows with equal keys collapse to the latest (highest offset); empty: none, every record is a row"`
	// DedupeWindow, with DedupeKey, makes equal keys collapse only when their event times fall
	// in the same window (tumbling, counted from the Unix epoch). 0: whenever.
	DedupeWindow time.Duration `key:"dedupe_window,zero" doc:"with dedupe_key: equal keys collapse only within the same window of event time (tumbling windows from the epoch; needs event_time); 0: at any distance"`
	// EventTime is the Avro field path of the record's time (a timestamp-millis or -micros
	// long, or a date): the table is partitioned by its month and the ledger dates flushes by it.
	EventTime string   `key:"event_time" doc:"field path of the event time (timestamp-millis, timestamp-micros or date; a Protobuf google.protobuf.Timestamp, a JSON string of format date-time or date): partitions the table by month; empty: one partition"`
	Include   []string `key:"include" doc:"field paths whose columns the table keeps (a record keeps every field under it); empty: every field"`
	Exclude   []string `key:"exclude" doc:"field paths whose columns the table leaves out"`
	// Rename maps a derived column name (user_id) to the name the table uses.
	Rename map[string]string `key:"rename" doc:"column renames: derived column name (user_id) to the table's name for it"`
	// Screen are the Avro field paths of text fields checked with the sensitive-word service;
	// the dictionary words found in them land in ColSensitiveWords.
	Screen []string `key:"screen" doc:"field paths of text fields (string or optional string) to screen with the sensitive-word service: the dictionary words found land in _sensitive_words; the stage then needs sensitive_words"`
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
//
// A name made from another (the table and group from the name, the subject from the topic) is
// checked only when that one is good: a bad name is one problem, not three.
func (c StreamConfig) Validate() error {
	given := c
	c = c.WithDefaults()
	var errs []error
	bad := func(field, format string, a ...any) { errs = append(errs, conf.Errorf(field, format, a...)) }
	goodName, goodTopic := streamName.MatchString(c.Name), kafkaName.MatchString(c.Topic)
	if !goodName {
		bad("Name", "name: %q, want lowercase letters, digits, '_' or '-' (at most 57)", c.Name)
	}
	if !goodTopic {
		bad("Topic", "topic: %q is not a valid Kafka topic name", c.Topic)
	}
	if strings.TrimSpace(c.Subject) == "" && (given.Subject != "" || goodTopic) {
		bad("Subject", "subject: empty")
	}
	if (given.Table != "" || goodName) && (!identName.MatchString(c.Table) || strings.HasPrefix(c.Table, "v_") || strings.HasSuffix(c.Table, LocalSuffix)) {
		bad("Table", "table: %q, want letters, digits and '_', not starting with v_ or ending in %s", c.Table, LocalSuffix)
	}
	if c.Message != "" && !fieldPath.MatchString(c.Message) {
		bad("Message", "message: %q, want a Protobuf message name (shop.v1.Order, or Order in the file's package)", c.Message)
	}
	if (given.Group != "" || goodName) && !kafkaName.MatchString(c.Group) {
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
	cols, errs := c.pick(all)
	errs = append(errs, c.checkFields(all, cols)...)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return cols, nil
}

// pick is the columns of all the table keeps: those Include names (all without it) and
// Exclude does not, renamed by Rename. Each error is a conf.FieldError naming the key.
func (c StreamConfig) pick(all []Column) ([]Column, []error) {
	var errs []error
	bad := func(key, format string, a ...any) { errs = append(errs, conf.Errorf(key, format, a...)) }
	under := func(field, path string) bool { return field == path || strings.HasPrefix(field, path+".") }
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
	return cols, errs
}

// checkFields checks the fields the stream gives a role against the columns it keeps: the
// dedupe key a single non-null value, the event time a time or date, the screened fields
// strings. Each error is a conf.FieldError naming the key.
func (c StreamConfig) checkFields(all, cols []Column) []error {
	var errs []error
	bad := func(key, format string, a ...any) { errs = append(errs, conf.Errorf(key, format, a...)) }
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
	return errs
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
// A field not in the schema gets the path meant, when one is near: the dotted path of a nested
// field named by its column (agent_id for agent.id), or a field path a misspelling away.
func missing(all []Column, field string) string {
	if _, ok := columnOf(all, field); ok {
		return "left out by include or exclude"
	}
	for _, c := range all {
		if strings.HasPrefix(c.Field, field+".") {
			return "a record, not a single value"
		}
	}
	if f := nearField(all, field); f != "" {
		return "not in the schema; did you mean " + f + "?"
	}
	return "not in the schema"
}

// nearField is the field path of all that field most likely meant: the one whose column name
// (its path joined with '_') is field, or else the nearest path (conf.Nearest). "" for none.
func nearField(all []Column, field string) string {
	var paths []string
	for _, c := range all {
		if c.MapPart != "" {
			continue
		}
		if strings.ReplaceAll(c.Field, ".", "_") == field {
			return c.Field
		}
		paths = append(paths, c.Field)
	}
	return conf.Nearest(field, paths)
}

// Spec is the stream's table for cols: backflow's columns after the schema's, ordered by the
// dedupe key (and window) or else by partition and offset, versioned by the offset; with an
// event time, partitioned by its day and sorted by its minute first (its day for a date).
func (c StreamConfig) Spec(cols []Column) TableSpec {
	c = c.WithDefaults()
	t := TableSpec{Name: c.Table, Columns: append(slices.Clone(cols), c.MetaColumns()...), Version: ColOffset}
	if key, ok := columnOf(cols, c.DedupeKey); ok {
		t.OrderBy = []string{key.Name}
		if c.DedupeWindow > 0 {
			t.OrderBy = append(t.OrderBy, ColWindow)
		}
	} else {
		t.OrderBy = []string{ColPartition, ColOffset}
	}
	if ev, ok := columnOf(cols, c.EventTime); ok {
		t.PartitionBy = "toYYYYMMDD(" + QuoteIdent(ev.Name) + ")"
		t.TimeKey = "toStartOfMinute(" + QuoteIdent(ev.Name) + ")"
		if ev.Type == "Date" {
			t.TimeKey = QuoteIdent(ev.Name)
		}
	}
	return t
}

// MetaColumns are the columns every row of the stream's table has besides its schema's: where
// the record came from, and the dedupe window and sensitive words when configured.
func (c StreamConfig) MetaColumns() []Column {
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

// ViewAfter is stmts, which add or modify columns, followed by what re-creates the view over the table:
// a view lists the columns its table had when it was created (ClickHouse 18.16 expands the *
// then, and refuses to ALTER a view), so it is dropped and created again to show the new
// columns and types. Readers of the view may
// see it missing for that moment.
func (c StreamConfig) ViewAfter(stmts []string) []string {
	if len(stmts) == 0 {
		return nil
	}
	return append(slices.Clone(stmts), "DROP TABLE IF EXISTS "+c.View(), c.ViewDDL())
}
