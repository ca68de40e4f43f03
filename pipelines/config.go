// Package pipelines wires backflow's stages into runnable wholes from configuration. Start with
// Config, backflow's configuration file, and Load, which reads it with the BACKFLOW_*
// variables (the names deploy/local/stack writes to .stack/env) and flags. Conns, part of
// Config, is every external system's connection settings; Check asks each system for a real
// answer, and Preflight is the start-up form of Check that stops a stage on refused
// credentials or a failed TLS handshake.
package pipelines

import (
	"errors"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/alerts"
	"github.com/backflowhq/backflow/internal/conf"
	"github.com/backflowhq/backflow/internal/dashboard"
	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/internal/moderation"
	"github.com/backflowhq/backflow/internal/ops"
	"github.com/backflowhq/backflow/processors/features"
	"github.com/backflowhq/backflow/processors/ingest"
	"github.com/backflowhq/backflow/sinks/clickhouse"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
	"github.com/backflowhq/backflow/sinks/redis"
)

// Config is backflow's configuration file: what `backflow run --config FILE` reads and
// `backflow check-config` checks. Its sections are the packages' own Conn and Config structs,
// whose tagged fields declare each key once, with its default and doc (package conf): the
// YAML keys, the variables, the flags, the reference and the key paths of errors all come
// from those declarations. Every key is optional but the addresses of the systems the stages need (which have no
// default: see Conns.Require); deploy/config.example.yaml lists them all
// with their defaults (ExampleYAML writes it, and a test keeps it in sync).
//
// Precedence, lowest first: the defaults, the file, environment variables, then command-line
// flags a command was given explicitly. Every key a.b_c has the variable BACKFLOW_A_B_C (a list
// as comma-separated values).
//
// Secrets are never in the file and never on the command line: a key ending in _file names a
// file holding the secret, and the variable named after the secret (the key's variable without
// _FILE) holds the secret itself; it wins over a file the config file names. A key such as
// password or token is rejected with a message that says so.
type Config struct {
	Stages          []string      `key:"stages" default:"ingest,sink-clickhouse,sink-features" doc:"stages backflow run starts, in one process: ingest, sink-clickhouse (with its DLQ mirror), sink-features, and stream-<name> for a declared stream"`
	ShutdownTimeout time.Duration `key:"shutdown_timeout" default:"45s" doc:"on SIGTERM or SIGINT: the longest backflow waits for the stages to stop consuming, flush and commit; past it, it exits with code 3 and what was not committed is redelivered"`

	Log     LogConfig     `key:"log" doc:"structured logs on stderr (log/slog); ids, offsets and counts, never record payloads or secrets"`
	Metrics MetricsConfig `key:"metrics" doc:"the HTTP endpoints /metrics (Prometheus), /healthz and /readyz"`

	Conns `key:",squash"`

	Ingest         IngestConfig       `key:"ingest" doc:"the ingest stage: decode, dedupe, moderate, emit to the enriched topic"`
	SinkClickHouse clickhouse.Config  `key:"sink_clickhouse" doc:"the ClickHouse sink and its DLQ mirror"`
	SinkFeatures   SinkFeaturesConfig `key:"sink_features" doc:"the feature-store sink (Redis in Feast's layout)"`

	Dashboard dashboard.Auth `key:"dashboard" doc:"backflow dashboard's HTTP basic auth; without a password it serves only on a loopback address"`

	// Streams are the declared streams: any Avro, Protobuf or JSON Schema topic into a ClickHouse table derived from its
	// subject's schema, each run by the stage stream-<name> (streams.go, docs/streams.md).
	Streams []chschema.StreamConfig `key:"streams" doc:"declared streams: any Avro, Protobuf or JSON Schema topic into a ClickHouse table derived from its subject's schema, each the stage stream-<name> (list it in stages); batching, DLQ topic and backoff are sink_clickhouse's. A list is given in the file only: it has no environment variables"`
}

// Conns holds the connection settings of every external system: the kafka, registry,
// clickhouse, redis, sensitive and prometheus sections of Config.
type Conns struct {
	Kafka          kafka.Conn        `key:"kafka" doc:"the Kafka cluster every stage reads and writes"`
	Registry       avro.RegistryConn `key:"registry" doc:"the Confluent-API schema registry"`
	ClickHouse     chschema.Conn     `key:"clickhouse" doc:"ClickHouse, native protocol (sink-clickhouse)"`
	Redis          redis.Conn        `key:"redis" doc:"Redis, the Feast online store (sink-features)"`
	SensitiveWords moderation.Conn   `key:"sensitive_words" doc:"the sensitive-word service (ingest)"`
	Prometheus     alerts.Conn       `key:"prometheus" doc:"Prometheus, whose firing alerts backflow dashboard shows (optional)"`
}

// LogConfig configures logging.
type LogConfig struct {
	Format string `key:"format" default:"text" doc:"text or json"`
	Level  string `key:"level" default:"info" doc:"debug, info, warn or error"`
}

// MetricsConfig configures the HTTP endpoints.
type MetricsConfig struct {
	Addr         string        `key:"addr" default:"127.0.0.1:9464" doc:"host:port of /metrics, /healthz and /readyz; port 0 picks a free port (logged); off disables them"`
	LagInterval  time.Duration `key:"lag_interval" default:"10s" doc:"how often consumer lag and consume rate are polled from Kafka"`
	LagGroups    []string      `key:"lag_groups" doc:"more consumer groups whose lag this process polls and exports, besides its stages' own: a group's lag stays watched while its consumers are down"`
	ReadyTimeout time.Duration `key:"ready_timeout" default:"3s" doc:"bound on each dependency check /readyz makes"`
	Pprof        bool          `key:"pprof" doc:"also serve Go's runtime profiles under /debug/pprof/ (live heap, goroutines, CPU on request)"`
}

// IngestConfig is the ingest section: the stage's settings and where it keeps its table.
type IngestConfig struct {
	ingest.Config
	StorageDir string `key:"storage_dir" doc:"local table storage, rebuilt from the changelog when missing; empty: <tmp>/backflow-goka"`
	Standby    bool   `key:"standby" doc:"keep a warm copy of every table partition this instance does not own (goka hot standby), so a failover restores nothing; costs a read of the whole changelog and its disk on every instance"`
}

// SinkFeaturesConfig is the sink_features section: the stage's settings, its Redis writer's
// batching, and where it keeps its table.
type SinkFeaturesConfig struct {
	features.Config
	Redis      redis.Config `key:",squash"`
	StorageDir string       `key:"storage_dir" doc:"local table storage, rebuilt from the changelog when missing; empty: <tmp>/backflow-goka-features"`
	Standby    bool         `key:"standby" doc:"keep a warm copy of every table partition this instance does not own (goka hot standby), so a failover restores nothing; costs a read of the whole changelog and its disk on every instance"`
}

// Stage names, as --stages and the stages key take them.
const (
	StageIngest         = "ingest"
	StageSinkClickHouse = "sink-clickhouse"
	StageSinkFeatures   = "sink-features"
)

// schema is Config's keys, read once from the declarations.
var schema = conf.New[Config]("BACKFLOW_")

// Defaults returns the configuration every key falls back to: every stage, and each
// package's declared defaults. The services' addresses have none.
func Defaults() Config { return conf.Defaults[Config]() }

// Validate checks every section with its package's rules, and the process's keys, reporting
// all errors at once; each is a conf.FieldError naming its field, so that Load reports it at
// its key.
func (c Config) Validate() error {
	return errors.Join(c.validateStages(), c.Conns.missing(c.needs()...), conf.Nest("Log", "", c.Log.Validate()), conf.Nest("Metrics", "", c.Metrics.Validate()),
		c.Conns.Validate(), conf.Nest("Ingest", "", c.Ingest.Validate()), conf.Nest("SinkClickHouse", "", c.SinkClickHouse.Validate()),
		conf.Nest("SinkFeatures", "", c.SinkFeatures.Validate()), c.validateStreams())
}

func (c Config) validateStages() error {
	if len(c.Stages) == 0 {
		return conf.Errorf("Stages", "empty; want one or more of %s", strings.Join(StageNames(), ", "))
	}
	var errs []error
	seen := map[string]bool{}
	for _, s := range c.Stages {
		_, stream := c.streamNamed(s)
		switch {
		case strings.HasPrefix(s, chschema.StreamStagePrefix) && !stream:
			errs = append(errs, conf.Errorf("Stages", "stage %q: no stream of that name is declared in streams", s))
		case !stream && !slices.Contains(StageNames(), s):
			errs = append(errs, conf.Errorf("Stages", "unknown stage %q; stages: %s, and stream-<name> for each declared stream", s, strings.Join(StageNames(), ", ")))
		case seen[s]:
			errs = append(errs, conf.Errorf("Stages", "stage %q given twice", s))
		}
		seen[s] = true
	}
	return errors.Join(errs...)
}

// Validate checks the format and the level.
func (c LogConfig) Validate() error {
	var errs []error
	if _, err := ops.NewLogger(io.Discard, c.Format, "info"); err != nil {
		errs = append(errs, conf.Errorf("Format", "%q, want text or json", c.Format))
	}
	if _, err := ops.ParseLevel(c.Level); err != nil {
		errs = append(errs, conf.Errorf("Level", "%q, want debug, info, warn or error", c.Level))
	}
	return errors.Join(errs...)
}

// Validate checks the address and the lag groups.
func (c MetricsConfig) Validate() error {
	var errs []error
	if a := c.Addr; a != "" && a != "off" {
		if err := conf.CheckHostPort(a, true, true); err != nil {
			errs = append(errs, conf.Errorf("Addr", "%v (or off)", err))
		}
	}
	if slices.ContainsFunc(c.LagGroups, func(g string) bool { return strings.TrimSpace(g) == "" }) {
		errs = append(errs, conf.Errorf("LagGroups", "%q holds an empty group name", c.LagGroups))
	}
	return errors.Join(errs...)
}

// Validate checks every connection, reporting all errors at once. An address not given is
// not an error here: it is one for the stages (Config.Validate) and commands (Require) that
// need the system.
func (c Conns) Validate() error {
	all := errors.Join(conf.Nest("Kafka", "", c.Kafka.Validate()), conf.Nest("Registry", "", c.Registry.Validate()),
		conf.Nest("ClickHouse", "", c.ClickHouse.Validate()), conf.Nest("Redis", "", c.Redis.Validate()),
		conf.Nest("SensitiveWords", "", c.SensitiveWords.Validate()), conf.Nest("Prometheus", "", c.Prometheus.Validate()))
	var errs []error
	for _, fe := range conf.Fields(all) {
		if !errors.Is(fe, conf.ErrNotSet) {
			errs = append(errs, fe)
		}
	}
	return errors.Join(errs...)
}
