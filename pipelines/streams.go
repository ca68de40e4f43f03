package pipelines

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	hamba "github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/conf"
	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/internal/moderation"
	"github.com/backflowhq/backflow/internal/retry"
	"github.com/backflowhq/backflow/sinks/clickhouse"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
	"github.com/backflowhq/backflow/sinks/clickhouse/rollups"
)

// A declared stream (the streams list of Config) runs as the stage stream-<name>: a
// ClickHouse sink of its own (clickhouse.NewStream) over its topic, with its own group, its
// table derived from its subject's schema. docs/streams.md.

// streamNeeds are the systems a stream's stage needs.
var streamNeeds = []string{SystemKafka, SystemRegistry, SystemClickHouse}

// streamNamed returns the declared stream whose stage is name (stream-<name>).
func (c Config) streamNamed(stage string) (chschema.StreamConfig, bool) {
	name, ok := strings.CutPrefix(stage, chschema.StreamStagePrefix)
	if !ok {
		return chschema.StreamConfig{}, false
	}
	for _, s := range c.Streams {
		if s.Name == name {
			return s.WithDefaults(), true
		}
	}
	return chschema.StreamConfig{}, false
}

// needs are the systems the configured stages need: NeedsOf, and the sensitive-word service
// for a stream that screens text fields.
func (c Config) needs() []string {
	out := NeedsOf(c.Stages...)
	for _, name := range c.Stages {
		if sc, ok := c.streamNamed(name); ok && len(sc.Screen) > 0 && !slices.Contains(out, SystemSensitiveWords) {
			out = append(out, SystemSensitiveWords)
		}
	}
	return out
}

// streamStage is the stage of the declared stream sc.
func streamStage(sc chschema.StreamConfig) stage {
	needs := streamNeeds
	if len(sc.Screen) > 0 {
		needs = append(slices.Clone(streamNeeds), SystemSensitiveWords)
	}
	return stage{
		name:   sc.Stage(),
		needs:  needs,
		groups: func(Config) []string { return []string{sc.Group} },
		parts:  justThe(sc.Stage()),
		run:    func(ctx context.Context, e *stageEnv) error { return runStream(ctx, e, sc) },
	}
}

// validateStreams checks each stream and that no two share a name, table or group.
func (c Config) validateStreams() error {
	var errs []error
	names, tables, groups := map[string]int{}, map[string]int{}, map[string]int{}
	for i, s := range c.Streams {
		at := "Streams[" + strconv.Itoa(i) + "]"
		errs = append(errs, conf.Nest(at, "", s.Validate()))
		s = s.WithDefaults()
		for _, u := range []struct {
			seen        map[string]int
			field, what string
			v           string
		}{{names, "Name", "name", s.Name}, {tables, "Table", "table", s.Table}, {groups, "Group", "group", s.Group}} {
			if j, dup := u.seen[u.v]; dup {
				errs = append(errs, conf.Errorf(at+"."+u.field, "%s %q is streams[%d]'s too", u.what, u.v, j))
				continue
			}
			u.seen[u.v] = i
		}
		if s.Group == c.SinkClickHouse.Group || s.Group == c.Ingest.Group || s.Group == c.SinkFeatures.Group {
			errs = append(errs, conf.Errorf(at+".Group", "group %q is a built-in stage's", s.Group))
		}
	}
	return errors.Join(errs...)
}

// runStream runs the declared stream sc: it waits for its subject's schema and its topic,
// brings its table to the schema (creating it only when sink_clickhouse.migrate is on;
// otherwise `backflow migrate` does), then runs its sink.
func runStream(ctx context.Context, e *stageEnv, sc chschema.StreamConfig) error {
	log := e.log.With("stage", sc.Stage())
	reg, err := avro.NewRegistryClient(e.conn.Registry)
	if err != nil {
		return err
	}
	if err := e.waitForSources(ctx, log, sc.Stage(), kafka.Source{Topic: sc.Topic, Key: streamTopicKey(e, sc)}); err != nil {
		return nil // stopped while waiting
	}
	ss, err := streamSchema(ctx, log, reg, sc)
	schema, schemaID := ss.Schema, ss.ID
	if err == nil {
		err = e.migrateBuiltIn(ctx, log)
	}
	var caps chschema.Capabilities
	if err == nil {
		caps, err = prepareStreamTable(ctx, e, log, sc, schema, schemaID)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while waiting for the registry or ClickHouse
		}
		return err
	}
	rc := clickhouse.RunConfig{Kafka: e.conn.Kafka, Registry: reg, ClickHouse: e.conn.ClickHouse, Logger: log,
		Metrics: e.metrics.Stage(sc.Stage()), OnAssigned: e.readyHook(sc.Stage())}
	if len(sc.Screen) > 0 {
		if rc.SensitiveWords, err = moderation.New(e.conn.SensitiveWords); err != nil {
			return err
		}
		defer rc.SensitiveWords.Close()
	}
	if e.cfg.SinkClickHouse.Rollups {
		// The stream's flushes mark the ledger minutes they wrote, for the rollup loop of the
		// sink-clickhouse stage (wherever it runs).
		if err := rollups.EnsureTopic(ctx, e.conn.Kafka, e.cfg.SinkClickHouse); err != nil {
			return err
		}
	}
	sink, err := clickhouse.NewStream(sc, e.cfg.SinkClickHouse, clickhouse.StreamRun{Schema: schema, Caps: caps, Type: ss.Type, Message: ss.Message}, rc)
	if err != nil {
		return err
	}
	start := time.Now()
	err = sink.Run(ctx)
	st := sink.Stats()
	log.Info("stream stopped", "records", st.Records, "rows", st.Rows, "dlq", st.DLQ, "flushes", st.Flushes,
		"retries", st.Retries, "ran", time.Since(start).Round(time.Second).String())
	return err
}

// streamTopicKey is the config key that names the stream's topic, for the start-up wait's
// messages.
func streamTopicKey(e *stageEnv, sc chschema.StreamConfig) string {
	for i, d := range e.cfg.Streams {
		if d.Name == sc.Name {
			return fmt.Sprintf("streams[%d].topic", i)
		}
	}
	return "streams[].topic"
}

// streamWait is how the stream's start-up retries the registry and ClickHouse.
var streamWait = retry.Policy{Min: time.Second, Max: 30 * time.Second}

// streamSchema is the subject's latest schema, waited for while the registry is down or has
// none under the subject yet.
func streamSchema(ctx context.Context, log *slog.Logger, reg *sr.Client, sc chschema.StreamConfig) (ss avro.StreamSchema, err error) {
	err = retry.Do(ctx, streamWait, func(err error) bool { return avro.IsRetryable(err) || errors.Is(err, errNoSubject) }, func(err error, attempt int, _ time.Duration) {
		log.Warn("stream: waiting for the subject's schema", "subject", sc.Subject, "attempt", attempt, "error", err)
	}, func() (err error) {
		ss, err = LatestStreamSchema(ctx, reg, sc.Subject, sc.Message)
		return err
	})
	return ss, err
}

// prepareStreamTable brings the stream's table to the schema (creating it only when migrations
// are on) and returns the server's capabilities, retrying while ClickHouse is unavailable.
func prepareStreamTable(ctx context.Context, e *stageEnv, log *slog.Logger, sc chschema.StreamConfig, schema hamba.Schema, schemaID int) (caps chschema.Capabilities, err error) {
	err = retry.Do(ctx, streamWait, migrationRetryable, func(err error, attempt int, _ time.Duration) {
		log.Warn("clickhouse or kafka unavailable for the stream's table; retrying", "attempt", attempt, "error", err)
	}, func() error {
		var plan chschema.StreamPlan
		if caps, plan, err = planStreamTable(ctx, e, sc, schema, schemaID); err != nil || len(plan.Statements) == 0 {
			return err
		}
		if plan.Create && !e.cfg.SinkClickHouse.Migrate {
			return fmt.Errorf("stream %s: table %s does not exist: run backflow migrate (or set sink_clickhouse.migrate)", sc.Name, sc.Table)
		}
		// Another instance of the stage may be bringing the table to the same schema: under
		// the migration lock the plan is made again, and is empty once it has.
		return withMigrationLock(ctx, e.conn.Kafka, e.conn.ClickHouse, log, func(ctx context.Context) error {
			if _, plan, err = planStreamTable(ctx, e, sc, schema, schemaID); err != nil {
				return err
			}
			for _, s := range plan.Heads() {
				log.Info("stream: bringing the table to the subject's schema", "statement", s)
			}
			tctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			version, err := chschema.ApplyStream(tctx, e.conn.ClickHouse, plan)
			if err == nil && version > 0 {
				log.Info("stream: recorded the table's migration", "version", version, "schema_id", schemaID, "change", plan.Change())
			}
			return err
		})
	})
	return caps, err
}

// planStreamTable is what it takes to bring the stream's table to schema, and the server's
// capabilities.
func planStreamTable(ctx context.Context, e *stageEnv, sc chschema.StreamConfig, schema hamba.Schema, schemaID int) (chschema.Capabilities, chschema.StreamPlan, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	conn, err := chschema.Open(ctx, e.conn.ClickHouse)
	if err != nil {
		return chschema.Capabilities{}, chschema.StreamPlan{}, err
	}
	defer conn.Close()
	v, err := chschema.Server(ctx, conn)
	if err != nil {
		return chschema.Capabilities{}, chschema.StreamPlan{}, err
	}
	caps := v.Capabilities()
	plan, err := chschema.PlanStream(ctx, conn, sc, schema, schemaID, caps)
	return caps, plan, err
}

// errNoSubject: the registry has no schema under the subject yet (no producer registered one).
var errNoSubject = errors.New("pipelines: the registry has no schema under the subject")

// LatestSchema is the newest schema registered under the stream's subject, parsed, with its
// id (LatestStreamSchema's schema: a Protobuf message as the Avro record it maps to).
func LatestSchema(ctx context.Context, reg *sr.Client, sc chschema.StreamConfig) (hamba.Schema, int, error) {
	sc = sc.WithDefaults()
	ss, err := LatestStreamSchema(ctx, reg, sc.Subject, sc.Message)
	return ss.Schema, ss.ID, err
}

// subjectSchemaError: the subject's newest schema is of a type a stream does not read, or does
// not parse (or compile): a problem of the subject, not of the registry.
type subjectSchemaError struct {
	subject string
	version int
	err     error
}

func (e *subjectSchemaError) Error() string {
	return fmt.Sprintf("subject %s version %d: %v", e.subject, e.version, e.err)
}

func (e *subjectSchemaError) Unwrap() error { return e.err }

// LatestStreamSchema is the newest schema registered under subject as a declared stream
// reads it (avro.ParseStreamSchema): an AVRO schema, or a PROTOBUF one compiled with its
// references, as the Avro record of message ("" the file's first). A subject without one is
// errNoSubject; a schema of another type, one that does not parse, or one without the message,
// a *subjectSchemaError.
func LatestStreamSchema(ctx context.Context, reg *sr.Client, subject, message string) (avro.StreamSchema, error) {
	ss, err := reg.SchemaByVersion(ctx, subject, -1)
	if err != nil {
		var re *sr.ResponseError
		if errors.As(err, &re) && re.StatusCode == http.StatusNotFound {
			return avro.StreamSchema{}, fmt.Errorf("%w: %s", errNoSubject, subject)
		}
		return avro.StreamSchema{}, &avro.DecodeError{Kind: avro.ErrRegistryUnavailable, Err: err}
	}
	out, err := avro.ParseStreamSchema(ctx, reg, ss.ID, ss.Schema, message)
	switch {
	case err != nil && avro.IsRetryable(err):
		return out, err
	case err != nil:
		return out, &subjectSchemaError{subject: subject, version: ss.Version, err: err}
	}
	return out, nil
}

// ErrRegistryUnreachable: CheckStreams could not ask the registry (down, refusing, or not a
// registry at that URL), so the streams were not checked; the configuration may be valid.
var ErrRegistryUnreachable = errors.New("pipelines: the streams were not checked: the registry did not answer")

// CheckStreams checks each declared stream of l against its subject's current schema: the
// subject exists, and the field paths it names exist and fit (a dedupe key is a single
// non-null value, an event time a timestamp or date). Each problem is a conf.Error at its
// key (streams[1].dedupe_key) with its line in the file at path ("" for none).
//
// found are the problems Load reported, if any: a stream they make uncheckable (its topic or
// subject is bad) is skipped, none is checked when the registry's settings are bad, and a
// problem at a key they already name is not reported again. When the registry cannot be
// asked, the error matches ErrRegistryUnreachable and the problems found so far are returned.
func CheckStreams(ctx context.Context, l Loaded, path string, found conf.Errors) (conf.Errors, error) {
	if len(l.Config.Streams) == 0 || !l.Config.Conns.IsSet(SystemRegistry) || reported(found, "registry") {
		return nil, nil
	}
	var lines map[string]int
	if path != "" {
		lines, _ = schema.Lines(path)
	}
	var out conf.Errors
	add := func(p, msg string) {
		if reported(found, p) {
			return
		}
		e := &conf.Error{Path: p, Msg: msg}
		if ln, ok := lines[p]; ok {
			e.Line = ln
		} else if i := strings.Index(p, "]"); i > 0 {
			e.Line = lines[p[:i+1]]
		}
		out = append(out, e)
	}
	reg, err := avro.NewRegistryClient(l.Config.Registry)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRegistryUnreachable, err)
	}
	for i, s := range l.Config.Streams {
		item := fmt.Sprintf("streams[%d]", i)
		if reported(found, item+".topic") || reported(found, item+".subject") || slices.ContainsFunc(found, func(e *conf.Error) bool { return e.Path == item }) {
			continue
		}
		given := s.Subject != ""
		s = s.WithDefaults()
		at := "Streams[" + strconv.Itoa(i) + "]"
		sch, id, err := LatestSchema(ctx, reg, s)
		switch {
		case errors.Is(err, errNoSubject) && given:
			add(item+".subject", fmt.Sprintf("the registry has no schema under subject %s: register the values' schema there first", s.Subject))
			continue
		case errors.Is(err, errNoSubject):
			add(item+".topic", fmt.Sprintf("the registry has no schema under subject %s (the topic's, as subject is not set): register the values' schema there first, or set subject", s.Subject))
			continue
		case errors.As(err, new(*subjectSchemaError)):
			key := item + ".topic"
			if errors.Is(err, avro.ErrStreamMessage) {
				key = item + ".message"
			} else if given {
				key = item + ".subject"
			}
			add(key, subjectSchemaProblem(err))
			continue
		case err != nil:
			return out, fmt.Errorf("%w: at %s (registry.url): %w", ErrRegistryUnreachable, l.Config.Registry.URL, err)
		}
		if _, err := s.Columns(sch, chschema.Capabilities{}); err != nil {
			for _, fe := range conf.Fields(err) {
				p := schema.PathOf(at)
				if fe.Field != "" {
					p = schema.PathOf(at + "." + fe.Field)
				}
				add(p, fmt.Sprintf("%v (subject %s, schema id %d)", fe, s.Subject, id))
			}
		}
	}
	return out, nil
}

// subjectSchemaProblem says in one line what is wrong with a subject's schema (a type a
// stream does not read, or a schema that does not parse) and what to do.
func subjectSchemaProblem(err error) string {
	if errors.Is(err, avro.ErrStreamSchemaType) {
		return fmt.Sprintf("%v: register the values' schema again as one of those", err)
	}
	return fmt.Sprintf("%v: fix the schema registered there", err)
}

// reported says whether found holds a problem at the key path p or under it (p's section).
func reported(found conf.Errors, p string) bool {
	return slices.ContainsFunc(found, func(e *conf.Error) bool {
		return e.Path == p || strings.HasPrefix(e.Path, p+".")
	})
}

// PlanStreams plans each declared stream's table against its subject's latest schema on the
// server conn is connected to (chschema.PlanStream). It stops at the first stream it cannot
// plan: a subject with no schema, or a change the table cannot follow.
func PlanStreams(ctx context.Context, c Conns, conn driver.Conn, streams []chschema.StreamConfig, caps chschema.Capabilities) ([]chschema.StreamPlan, error) {
	if len(streams) == 0 {
		return nil, nil
	}
	reg, err := avro.NewRegistryClient(c.Registry)
	if err != nil {
		return nil, err
	}
	var out []chschema.StreamPlan
	for _, sc := range streams {
		sc = sc.WithDefaults()
		s, id, err := LatestSchema(ctx, reg, sc)
		if err != nil {
			return out, fmt.Errorf("stream %s: subject %s: %w", sc.Name, sc.Subject, err)
		}
		p, err := chschema.PlanStream(ctx, conn, sc, s, id, caps)
		if err != nil {
			return out, fmt.Errorf("%w (subject %s, schema id %d)", err, sc.Subject, id)
		}
		out = append(out, p)
	}
	return out, nil
}
