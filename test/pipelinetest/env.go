package pipelinetest

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	goredis "github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/internal/moderation"
	"github.com/backflowhq/backflow/pipelines"
	"github.com/backflowhq/backflow/processors/features"
	"github.com/backflowhq/backflow/processors/ingest"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
	"github.com/backflowhq/backflow/sinks/redis"
	"github.com/backflowhq/backflow/test/stackclean"
	"github.com/backflowhq/backflow/test/testenv"
	"github.com/backflowhq/backflow/tools/loadgen"
)

// Env is one test's private pipeline on a shared stack: an ID, the names of its topics, groups,
// database and Feast project made from it, and clients on the stack. When the test ends,
// everything on the stack whose name holds the ID is removed: topics (those the stages create,
// too), consumer groups, registry subjects, the ClickHouse database and the Redis keys.
type Env struct {
	ID       string
	Stack    pipelines.Conns // the stack's connection settings
	Kafka    kafka.Conn      // Stack.Kafka with the test's client id
	Admin    *kgo.Client     // a plain client; closed when the test ends
	Registry *sr.Client

	Ingest   ingest.Config   // inf-, gw-, enriched-, dlq-, control-<id>, group ingest-<id>, short backoffs
	Features features.Config // group features-<id>, project p<id>, DLQ fdlq-<id>, request TTL 1h
	// SinkGroup and MirrorGroup are the ClickHouse sink's and DLQ mirror's groups, SinkDLQ the
	// sink's own DLQ topic (tests that share ingest's DLQ, as production does, ignore it).
	SinkGroup, MirrorGroup, SinkDLQ string
	DB                              string // it_<id>, made by Database
}

// Plain is the plain local stack's connection settings (testenv's addresses; an empty one is
// the package's loopback default).
func Plain() pipelines.Conns {
	return pipelines.Conns{
		Kafka:          kafka.Conn{Brokers: kafka.ParseBrokers(testenv.Get(testenv.KafkaBrokers))},
		Registry:       avro.RegistryConn{URL: testenv.Get(testenv.RegistryURL)},
		ClickHouse:     chschema.Conn{Addr: testenv.Get(testenv.ClickHouseAddr)},
		Redis:          redis.Conn{Addr: testenv.Get(testenv.RedisAddr)},
		SensitiveWords: moderation.Conn{URL: testenv.Get(testenv.SensitiveURL)},
	}
}

// NewEnv is NewEnvOn the plain local stack; it skips under -short.
func NewEnv(t testing.TB, tag string) *Env {
	t.Helper()
	testenv.Integration(t)
	return NewEnvOn(t, tag, Plain())
}

// NewEnvOn makes a private pipeline named after tag (a short word: run, it, fe) on the stack
// conn reaches.
func NewEnvOn(t testing.TB, tag string, conn pipelines.Conns) *Env {
	t.Helper()
	id := testenv.ID(tag)
	e := &Env{ID: id, Stack: conn, Kafka: conn.Kafka, DB: "it_" + id,
		Ingest: ingest.Config{Group: "ingest-" + id, InferenceTopic: "inf-" + id, GatewayTopic: "gw-" + id,
			EnrichedTopic: "enriched-" + id, DLQTopic: "dlq-" + id, ControlTopic: "control-" + id,
			BackoffMin: 20 * time.Millisecond, BackoffMax: 500 * time.Millisecond, BreakerOpen: time.Second},
		Features: features.Config{Group: "features-" + id, EnrichedTopic: "enriched-" + id, DLQTopic: "fdlq-" + id,
			Project: "p" + id, RequestTTL: time.Hour},
		SinkGroup: "sinkch-" + id, MirrorGroup: "dlqm-" + id, SinkDLQ: "sinkdlq-" + id}
	e.Kafka.ClientID = "test-" + tag
	testenv.AtEnd(t, "remove what "+id+" made", e.sweep)
	var err error
	if e.Registry, err = avro.NewRegistryClient(conn.Registry); err != nil {
		t.Fatal(err)
	}
	if e.Admin, err = e.Kafka.NewClient(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Admin.Close)
	return e
}

// sweep removes everything whose name holds the ID, on connections of its own: the test's may
// be closed (or its server restarted) by now.
func (e *Env) sweep(ctx context.Context) error {
	var s stackclean.Stack
	var errs []error
	var err error
	if s.Kafka, err = e.Kafka.NewClient(); err != nil {
		return err
	}
	defer s.Kafka.Close()
	s.Registry = e.Registry
	ch := e.Stack.ClickHouse
	ch.Database = ""
	if s.CH, err = chschema.Open(ctx, ch); err != nil {
		errs = append(errs, err)
	} else {
		defer s.CH.Close()
	}
	if s.Redis, err = redis.Open(ctx, e.Stack.Redis); err != nil {
		errs = append(errs, err)
	} else {
		defer s.Redis.Close()
	}
	_, err = stackclean.Sweep(ctx, s, stackclean.Match{Contains: e.ID})
	return errors.Join(append(errs, err)...)
}

// SourceTopics creates the two source topics, and any extra ones, with partitions each.
func (e *Env) SourceTopics(t testing.TB, ctx context.Context, partitions int32, extra ...string) {
	t.Helper()
	testenv.Topics(t, ctx, e.Kafka, partitions, append([]string{e.Ingest.InferenceTopic, e.Ingest.GatewayTopic}, extra...)...)
}

// Database creates the private ClickHouse database (on the ClickHouse at addr, the stack's when
// ""), and returns a config pointing at it and a connection open on it, closed when the test
// ends. The database is dropped then.
func (e *Env) Database(t testing.TB, ctx context.Context, addr string) (chschema.Conn, driver.Conn) {
	t.Helper()
	base := e.Stack.ClickHouse
	base.Database = ""
	if addr != "" {
		base.Addr = addr
	}
	return Database(t, ctx, base, e.DB)
}

// Database creates database db on the ClickHouse of base, drops it when the test ends, and
// returns base pointing at it with a connection open on it (closed when the test ends).
func Database(t testing.TB, ctx context.Context, base chschema.Conn, db string) (chschema.Conn, driver.Conn) {
	t.Helper()
	testenv.Database(t, ctx, db, func(ctx context.Context) (driver.Conn, error) { return chschema.Open(ctx, base) })
	cfg := base
	cfg.Database = db
	conn, err := chschema.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return cfg, conn
}

// Migrated is Database on the plain stack's ClickHouse, named tag followed by a test ID, with
// backflow's migrations applied; it skips under -short. It returns the connection.
func Migrated(t testing.TB, ctx context.Context, tag string) driver.Conn {
	t.Helper()
	testenv.Integration(t)
	_, conn := Database(t, ctx, Plain().ClickHouse, testenv.ID(tag))
	if _, err := chschema.Migrate(ctx, conn); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return conn
}

// Redis opens a client on the stack's Redis, closed when the test ends (the project's keys
// are deleted then, too).
func (e *Env) Redis(t testing.TB, ctx context.Context) goredis.UniversalClient {
	t.Helper()
	rdb, err := redis.Open(ctx, e.Stack.Redis)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// Moderation is a client of the stack's sensitive-word service.
func (e *Env) Moderation(t testing.TB) *moderation.Client {
	t.Helper()
	mod, err := moderation.New(e.Stack.SensitiveWords)
	if err != nil {
		t.Fatal(err)
	}
	return mod
}

// Load sends cfg's traffic with loadgen to the source topics (see SourceTopics) and returns
// its manifest; the run id is the env's.
func (e *Env) Load(t testing.TB, ctx context.Context, cfg loadgen.Config) *loadgen.Manifest {
	t.Helper()
	m, st, err := e.TryLoad(ctx, cfg)
	if err != nil {
		t.Fatalf("loadgen: %v (%v)", err, st)
	}
	t.Logf("loadgen: %v", st)
	return m
}

// TryLoad is Load for a goroutine: it fails nothing and returns the error.
func (e *Env) TryLoad(ctx context.Context, cfg loadgen.Config) (*loadgen.Manifest, loadgen.Stats, error) {
	cfg.InferenceTopic, cfg.GatewayTopic = e.Ingest.InferenceTopic, e.Ingest.GatewayTopic
	prod, err := e.Kafka.NewClient(loadgen.ProducerOpts()...)
	if err != nil {
		return nil, loadgen.Stats{}, err
	}
	defer prod.Close()
	var buf bytes.Buffer
	st, err := loadgen.Run(ctx, cfg, prod, e.Registry, loadgen.Options{RunID: e.ID, Manifest: &buf})
	if err == nil && st.Failed != 0 {
		err = errors.New("records not acknowledged")
	}
	if err != nil {
		return nil, st, err
	}
	m, err := loadgen.ParseManifest(&buf)
	return m, st, err
}
