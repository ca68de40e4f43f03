package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"

	hamba "github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	srtype "github.com/twmb/franz-go/pkg/sr"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/dlq"
	"github.com/backflowhq/backflow/internal/moderation"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
)

// StreamRun is what a stream's sink starts from: the schema its table follows (the subject's
// latest, which PlanStream and chschema.ApplyStream brought the table to) and the server's capabilities.
type StreamRun struct {
	Schema hamba.Schema
	Caps   chschema.Capabilities
	// Type is the subject's schema type (avro.StreamSchema's): for PROTOBUF and JSON, Schema
	// is the Avro record the message or the JSON Schema maps to. Zero: AVRO.
	Type srtype.SchemaType
	// Message is, for a Protobuf subject, the full name of the message the stream reads.
	Message string
}

// streamDecoder reads a declared stream's values: avro.GenericDecoder for an Avro subject,
// avro.ProtoDecoder for a Protobuf one, avro.JSONDecoder for a JSON Schema one. Each gives a record as the map a generic Avro decode
// gives, shaped by an Avro schema, which the schema engine maps to a row.
type streamDecoder interface {
	Frame(b []byte) (int, []byte, error)
	Writer(ctx context.Context, id int) (hamba.Schema, error)
	Decode(id int, body []byte, writer, reader hamba.Schema) (map[string]any, error)
}

// NewStream validates the configs and builds the sink of the declared stream sc: cfg's
// Group and Topic are sc's; its batching, DLQ topic and backoff apply. The table must follow
// sr.Schema already (chschema.ApplyStream).
func NewStream(sc chschema.StreamConfig, cfg Config, sr StreamRun, rc RunConfig) (*Sink, error) {
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
	var dec streamDecoder
	switch sr.Type {
	case srtype.TypeProtobuf:
		dec, err = avro.NewProtoDecoder(rc.Registry, avro.DecoderConfig{}, sr.Message)
	case srtype.TypeJSON:
		dec, err = avro.NewJSONDecoder(rc.Registry, avro.DecoderConfig{})
	default:
		dec, err = avro.NewGenericDecoder(rc.Registry, avro.DecoderConfig{})
	}
	if err != nil {
		return nil, err
	}
	m := &streamMapping{sc: sc, ch: rc.ClickHouse, caps: sr.Caps, dec: dec, mod: rc.SensitiveWords, log: logger(rc.Logger),
		reader: sr.Schema, cur: newStreamCols(sc, cols), met: map[int]bool{}}
	return newSink(cfg, rc, m, sc.Stage()), nil
}

// ErrStreamStopped is what a stream's sink stops with (errors.Is) when a record's schema makes
// a change its table cannot follow; the error says which field (an *IncompatibleError, or
// the writer schema's resolution to the table's). The record and those after it stay
// uncommitted: fix the schema (or the table), and the stream resumes from them.
var ErrStreamStopped = errors.New("clickhouse: stream stopped: its table cannot follow the record's schema")

// streamMapping is a declared stream's mapping (NewStream): a record is decoded with its writer
// schema resolved to the schema the table follows, and becomes one row of the stream's table
// (streamRow). A record whose writer schema the stream has not met yet is checked against the
// table first: columns it adds (each from a field with a default) are added, and types it
// widens modified, before the record is buffered; a change the table cannot follow
// (*IncompatibleError) stops the sink with the record and what follows it uncommitted:
// neither dropped nor dead-lettered.
type streamMapping struct {
	sc   chschema.StreamConfig
	ch   chschema.Conn
	caps chschema.Capabilities
	dec  streamDecoder
	mod  *moderation.Client // screens the Screen fields; nil without
	log  *slog.Logger

	// Map's own, from Run's goroutine:
	reader hamba.Schema // the newest schema the table follows
	cur    *streamCols
	met    map[int]bool // writer ids checked against the table

	// alter keeps a MODIFY COLUMN (follow, holding it) and an insert (holding it shared) apart,
	// so that rows decoded before a column's type changed are inserted recast to the type the
	// table has (types, which it guards).
	alter sync.RWMutex
	types map[string]string // column name → type, for the columns a MODIFY COLUMN changed
}

func (t *streamMapping) Map(ctx context.Context, r Waiter, rec *kgo.Record) (Row, error, error) {
	id, body, err := t.dec.Frame(rec.Value)
	if err != nil {
		return nil, err, nil
	}
	var writer hamba.Schema
	err = r.Await(ctx, "registry", avro.IsRetryable, func() (err error) {
		writer, err = t.dec.Writer(ctx, id)
		return err
	})
	switch {
	case err != nil && avro.IsRetryable(err):
		return nil, nil, ctx.Err()
	case err != nil:
		return nil, err, nil // unknown schema id: the record's own fault
	}
	if !t.met[id] {
		if err := t.follow(ctx, r, id, writer); err != nil {
			return nil, nil, err
		}
	}
	m, err := t.dec.Decode(id, body, writer, t.reader)
	switch {
	case errors.Is(err, avro.ErrIncompatibleSchema):
		return nil, nil, fmt.Errorf("%w: stream %s: schema id %d: %w", ErrStreamStopped, t.sc.Name, id, err)
	case err != nil:
		return nil, err, nil
	}
	vals, err := chschema.RowValues(t.cur.cols, m)
	if err != nil {
		return nil, dlq.WithClass(avro.ClassInvalid, err), nil
	}
	return t.cur.row(t.sc, vals, rec, id), nil, nil
}

// follow checks a writer schema met for the first time against the table, adding the columns
// it adds and modifying those whose types it changes (PlanEvolution); the table then follows
// it.
func (t *streamMapping) follow(ctx context.Context, r Waiter, id int, writer hamba.Schema) error {
	cols, err := t.sc.Columns(writer, t.caps)
	if err != nil {
		return fmt.Errorf("%w: stream %s: schema id %d: %w", ErrStreamStopped, t.sc.Name, id, err)
	}
	stmts, next, err := chschema.Evolve(t.sc.Table, t.cur.cols, cols, t.sc.Spec(cols).OrderBy)
	if err != nil {
		return fmt.Errorf("%w: stream %s: schema id %d: %w", ErrStreamStopped, t.sc.Name, id, err)
	}
	if len(stmts) > 0 {
		t.log.Info("stream: a newer schema changes columns; following it", "stream", t.sc.Name, "schema_id", id, "statements", strings.Join(stmts, "; "))
		modifies := slices.ContainsFunc(stmts, chschema.IsModifyColumn)
		if modifies {
			t.alter.Lock() // no insert of rows with the older types while their columns change
			defer t.alter.Unlock()
		}
		if err := r.Retry(ctx, "alter "+t.sc.Table, nil, IsRetryable, func(ctx context.Context) error {
			v, err := chschema.ApplyStream(ctx, t.ch, chschema.StreamPlan{Stream: t.sc, SchemaID: id, Statements: t.sc.ViewAfter(stmts)})
			if err == nil {
				t.log.Info("stream: recorded the table's migration", "stream", t.sc.Name, "version", v, "schema_id", id)
			}
			return err
		}); err != nil {
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

// insert recasts rows decoded before a MODIFY COLUMN, screens their texts, and inserts them,
// rows of one column version at a time: rows decoded before and after a schema added columns
// are inserted apart, each with its own column list (the older ones get the new columns'
// defaults).
func (t *streamMapping) Insert(ctx context.Context, in Lander, rows []Row) (map[int]error, error) {
	srs := make([]*streamRow, len(rows))
	for i, r := range rows {
		srs[i] = r.(*streamRow)
	}
	t.alter.RLock()
	defer t.alter.RUnlock()
	if err := t.recast(srs); err != nil {
		return nil, err
	}
	if t.mod != nil {
		if err := t.screen(ctx, in, srs); err != nil {
			return nil, err
		}
	}
	rejects := map[int]error{}
	for start := 0; start < len(srs); {
		n := 1
		for start+n < len(srs) && srs[start+n].cols == srs[start].cols {
			n++
		}
		owners := make([]int, n)
		for i := range owners {
			owners[i] = start + i
		}
		if err := in.Insert(ctx, streamBatch{table: t.sc.Table, rows: srs[start : start+n]}, owners, rejects); err != nil {
			return nil, err
		}
		start += n
	}
	return rejects, nil
}

// recast converts the values of rows decoded before a MODIFY COLUMN changed their column's
// type (Int32 values for an Int64 column, ...) to the type the table has now, and points them
// at columns of those types. Rows of one column version share their *streamCols, so each
// version is checked once.
func (t *streamMapping) recast(rows []*streamRow) error {
	if len(t.types) == 0 {
		return nil
	}
	now := map[*streamCols]*streamCols{}
	for _, r := range rows {
		nc, seen := now[r.cols]
		if !seen {
			nc = r.cols.retyped(t.sc, t.types)
			now[r.cols] = nc
		}
		if nc == nil {
			continue
		}
		for i, c := range r.cols.cols {
			if c.Type == nc.cols[i].Type {
				continue
			}
			v, err := chschema.RecastValue(r.vals[i], nc.cols[i].Type)
			if err != nil {
				return fmt.Errorf("stream %s: column %s from %s: %w", t.sc.Name, c.Name, c.Type, err)
			}
			r.vals[i] = v
		}
		r.cols = nc
	}
	return nil
}

// screen checks the batch's screened texts with the sensitive-word service, each distinct text
// once, MaxItems at a time, and sets each row's ColSensitiveWords. An outage of the service is
// retried like ClickHouse's (fetching paused), never dead-lettered.
func (t *streamMapping) screen(ctx context.Context, in Lander, rows []*streamRow) error {
	words := map[string][]string{}
	var texts []string
	for _, r := range rows {
		for _, i := range r.cols.screen {
			if txt := textOf(r.vals[i]); txt != "" {
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
		if err := in.Retry(ctx, "screen", moderation.IsRetryable, func(ctx context.Context) (err error) {
			res, err = t.mod.Check(ctx, items)
			return err
		}); err != nil {
			return fmt.Errorf("stream %s: screen: %w", t.sc.Name, err)
		}
		for i, r := range res {
			for _, h := range r.Hits {
				words[chunk[i]] = append(words[chunk[i]], h.Word)
			}
		}
	}
	for _, r := range rows {
		var found []string
		for _, i := range r.cols.screen {
			found = append(found, words[textOf(r.vals[i])]...)
		}
		slices.Sort(found)
		r.vals[len(r.vals)-1] = slices.Compact(found)
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
