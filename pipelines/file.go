package pipelines

import (
	"time"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/dlq"
	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/internal/moderation"
	"github.com/backflowhq/backflow/internal/ops"
	"github.com/backflowhq/backflow/sinks/clickhouse"
	"github.com/backflowhq/backflow/sinks/redis"
)

// Config is backflow's configuration file: what `backflow run --config FILE` reads and
// `backflow check-config` checks. Every key is optional and takes the default Defaults
// gives; deploy/config.example.yaml lists them all with their defaults (ExampleYAML writes
// it, and a test keeps it in sync).
//
// Precedence, lowest first: Defaults, the file, environment variables, then command-line
// flags a command was given explicitly. Every key a.b_c has the variable BACKFLOW_A_B_C (a
// list as comma-separated values), so the connection variables BACKFLOW_KAFKA_BROKERS,
// BACKFLOW_CLICKHOUSE_ADDR, ... keep working and win over the file.
//
// Secrets are never in the file and never on the command line: a key ending in _file (tag
// secret) names a file holding the secret, and the variable in its secret tag holds the
// secret itself (it wins over the file). A key such as password or token is rejected with a
// message that says so.
//
// Tags: yaml is the key; doc is the reference text; secret names the variable holding the
// secret a _file key points at; zero:"ok" allows 0 where every other number and duration
// must be positive.
type Config struct {
	Stages          []string      `yaml:"stages" doc:"stages backflow run starts, in one process: ingest, sink-clickhouse (with its DLQ mirror), sink-features"`
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout" doc:"on SIGTERM or SIGINT: the longest backflow waits for the stages to stop consuming, flush and commit; past it, it exits with code 3 and what was not committed is redelivered"`

	Log        LogFile        `yaml:"log" doc:"structured logs on stderr (log/slog); ids, offsets and counts, never record payloads or secrets"`
	Metrics    MetricsFile    `yaml:"metrics" doc:"the HTTP endpoints /metrics (Prometheus), /healthz and /readyz"`
	Kafka      KafkaFile      `yaml:"kafka" doc:"the Kafka cluster every stage reads and writes"`
	Registry   RegistryFile   `yaml:"registry" doc:"the Confluent-API schema registry"`
	ClickHouse ClickHouseFile `yaml:"clickhouse" doc:"ClickHouse, native protocol (sink-clickhouse)"`
	Redis      RedisFile      `yaml:"redis" doc:"Redis, the Feast online store (sink-features)"`
	Sensitive  SensitiveFile  `yaml:"sensitive" doc:"the sensitive-word service (ingest)"`

	Ingest         IngestFile         `yaml:"ingest" doc:"the ingest stage: decode, dedupe, moderate, emit to the enriched topic"`
	SinkClickHouse SinkClickHouseFile `yaml:"sink_clickhouse" doc:"the ClickHouse sink and its DLQ mirror"`
	SinkFeatures   SinkFeaturesFile   `yaml:"sink_features" doc:"the feature-store sink (Redis in Feast's layout)"`
}

// LogFile configures logging.
type LogFile struct {
	Format string `yaml:"format" doc:"text or json"`
	Level  string `yaml:"level" doc:"debug, info, warn or error"`
}

// MetricsFile configures the HTTP endpoints.
type MetricsFile struct {
	Addr         string        `yaml:"addr" doc:"host:port of /metrics, /healthz and /readyz; port 0 picks a free port (logged); off disables them"`
	LagInterval  time.Duration `yaml:"lag_interval" doc:"how often consumer lag and consume rate are polled from Kafka"`
	ReadyTimeout time.Duration `yaml:"ready_timeout" doc:"bound on each dependency check /readyz makes"`
	Pprof        bool          `yaml:"pprof" doc:"also serve Go's runtime profiles under /debug/pprof/ (live heap, goroutines, CPU on request)"`
}

// KafkaFile is kafka.Config as a file section.
type KafkaFile struct {
	Brokers          []string      `yaml:"brokers" doc:"bootstrap brokers, host:port"`
	ClientID         string        `yaml:"client_id" doc:"client id in broker logs and quotas"`
	DialTimeout      time.Duration `yaml:"dial_timeout" doc:"bound on one connection attempt"`
	TableReplication int           `yaml:"table_replication" doc:"replication factor of the topics backflow creates (group tables, changelogs, loopback, DLQ); 3 on a production cluster"`
	SASLMechanism    string        `yaml:"sasl_mechanism" doc:"PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; empty: no SASL"`
	SASLUsername     string        `yaml:"sasl_username" doc:"SASL user"`
	SASLPasswordFile string        `yaml:"sasl_password_file" secret:"BACKFLOW_KAFKA_SASL_PASSWORD" doc:"file holding the SASL password (read on each new connection)"`
	TLS              bool          `yaml:"tls" doc:"TLS with the system's roots (implied by any other tls_ key)"`
	TLSCAFile        string        `yaml:"tls_ca_file" doc:"PEM file of the CA that signed the brokers's certificate"`
	TLSCertFile      string        `yaml:"tls_cert_file" doc:"PEM client certificate, for a server that asks for one"`
	TLSKeyFile       string        `yaml:"tls_key_file" doc:"PEM key of the client certificate"`
	TLSServerName    string        `yaml:"tls_server_name" doc:"name to verify the server's certificate against; default: the host of the address"`
}

// RegistryFile is avro.RegistryConfig as a file section.
type RegistryFile struct {
	URL           string        `yaml:"url" doc:"base URL of the Confluent-compatible API"`
	Username      string        `yaml:"username" doc:"basic-auth user; empty: no auth"`
	PasswordFile  string        `yaml:"password_file" secret:"BACKFLOW_REGISTRY_PASSWORD" doc:"file holding the basic-auth password"`
	Timeout       time.Duration `yaml:"timeout" doc:"bound on one HTTP request"`
	TLSCAFile     string        `yaml:"tls_ca_file" doc:"PEM file of the CA that signed the registry's certificate"`
	TLSCertFile   string        `yaml:"tls_cert_file" doc:"PEM client certificate, for a server that asks for one"`
	TLSKeyFile    string        `yaml:"tls_key_file" doc:"PEM key of the client certificate"`
	TLSServerName string        `yaml:"tls_server_name" doc:"name to verify the server's certificate against; default: the host of the address"`
}

// ClickHouseFile is clickhouse.Config as a file section.
type ClickHouseFile struct {
	Addr          string        `yaml:"addr" doc:"host:port of the native protocol"`
	Database      string        `yaml:"database" doc:"database of backflow's tables"`
	User          string        `yaml:"user" doc:"user"`
	PasswordFile  string        `yaml:"password_file" secret:"BACKFLOW_CLICKHOUSE_PASSWORD" doc:"file holding the user's password"`
	DialTimeout   time.Duration `yaml:"dial_timeout" doc:"bound on one connection attempt"`
	TLS           bool          `yaml:"tls" doc:"TLS with the system's roots (implied by any other tls_ key)"`
	TLSCAFile     string        `yaml:"tls_ca_file" doc:"PEM file of the CA that signed ClickHouse's certificate"`
	TLSCertFile   string        `yaml:"tls_cert_file" doc:"PEM client certificate, for a server that asks for one"`
	TLSKeyFile    string        `yaml:"tls_key_file" doc:"PEM key of the client certificate"`
	TLSServerName string        `yaml:"tls_server_name" doc:"name to verify the server's certificate against; default: the host of the address"`
}

// RedisFile is redis.Config as a file section.
type RedisFile struct {
	Addr          string        `yaml:"addr" doc:"host:port"`
	DB            int           `yaml:"db" zero:"ok" doc:"database number"`
	Username      string        `yaml:"username" doc:"ACL user; empty: the default user"`
	PasswordFile  string        `yaml:"password_file" secret:"BACKFLOW_REDIS_PASSWORD" doc:"file holding the password (read on each new connection)"`
	DialTimeout   time.Duration `yaml:"dial_timeout" doc:"bound on one connection attempt"`
	TLS           bool          `yaml:"tls" doc:"TLS with the system's roots (implied by any other tls_ key)"`
	TLSCAFile     string        `yaml:"tls_ca_file" doc:"PEM file of the CA that signed Redis's certificate"`
	TLSCertFile   string        `yaml:"tls_cert_file" doc:"PEM client certificate, for a server that asks for one"`
	TLSKeyFile    string        `yaml:"tls_key_file" doc:"PEM key of the client certificate"`
	TLSServerName string        `yaml:"tls_server_name" doc:"name to verify the server's certificate against; default: the host of the address"`
}

// SensitiveFile is moderation.Config as a file section.
type SensitiveFile struct {
	URL           string        `yaml:"url" doc:"base URL of the sensitive-word service"`
	TokenFile     string        `yaml:"token_file" secret:"BACKFLOW_SENSITIVE_TOKEN" doc:"file holding the service's bearer token"`
	Timeout       time.Duration `yaml:"timeout" doc:"bound on one check call"`
	MaxItems      int           `yaml:"max_items" doc:"most texts per call; at most the service's --max-items"`
	TLSCAFile     string        `yaml:"tls_ca_file" doc:"PEM file of the CA that signed the service's certificate"`
	TLSCertFile   string        `yaml:"tls_cert_file" doc:"PEM client certificate, for a server that asks for one"`
	TLSKeyFile    string        `yaml:"tls_key_file" doc:"PEM key of the client certificate"`
	TLSServerName string        `yaml:"tls_server_name" doc:"name to verify the server's certificate against; default: the host of the address"`
}

// IngestFile is ingest.Config as a file section.
type IngestFile struct {
	Group           string        `yaml:"group" doc:"goka group: consumer group, table and loopback topic prefix"`
	InferenceTopic  string        `yaml:"inference_topic" doc:"source topic of inference results"`
	GatewayTopic    string        `yaml:"gateway_topic" doc:"source topic of gateway logs"`
	EnrichedTopic   string        `yaml:"enriched_topic" doc:"topic enriched records go to"`
	DLQTopic        string        `yaml:"dlq_topic" doc:"dead-letter topic"`
	ControlTopic    string        `yaml:"control_topic" doc:"compacted topic holding the replay epoch"`
	DedupeWindow    time.Duration `yaml:"dedupe_window" doc:"how long a requestId keeps later records with it out"`
	ExpireEvery     time.Duration `yaml:"expire_every" doc:"how often claims older than the dedupe window are swept"`
	BatchSize       int           `yaml:"batch_size" doc:"texts per moderation batch"`
	BatchLinger     time.Duration `yaml:"batch_linger" doc:"longest wait before a partial batch is sent"`
	MaxInFlight     int           `yaml:"max_in_flight" doc:"records per source partition read but not yet committed; consumption pauses at the cap"`
	Policy          string        `yaml:"policy" doc:"during a moderation outage: block (pause, drop nothing) or pass (emit flagged UNAVAILABLE)"`
	MaxAttempts     int           `yaml:"max_attempts" doc:"moderation attempts before policy pass lets a batch through, and mismatch retries before checking one by one"`
	BackoffMin      time.Duration `yaml:"backoff_min" doc:"shortest backoff between retries of an outage"`
	BackoffMax      time.Duration `yaml:"backoff_max" doc:"longest backoff between retries of an outage"`
	BreakerFailures int           `yaml:"breaker_failures" doc:"consecutive failed moderation calls that open the circuit breaker"`
	BreakerOpen     time.Duration `yaml:"breaker_open" doc:"how long the breaker stays open before one probe"`
	MaxRecordBytes  int           `yaml:"max_record_bytes" doc:"larger source values go to the DLQ as oversized"`
	StorageDir      string        `yaml:"storage_dir" doc:"local table storage, rebuilt from the changelog when missing; empty: <tmp>/backflow-goka"`
}

// SinkClickHouseFile is clickhouse.SinkConfig (and the DLQ mirror's settings) as a file
// section.
type SinkClickHouseFile struct {
	Group          string        `yaml:"group" doc:"Kafka consumer group (also recorded in sink_ledger)"`
	Topic          string        `yaml:"topic" doc:"enriched topic to consume"`
	DLQTopic       string        `yaml:"dlq_topic" doc:"dead-letter topic for records that do not decode or that ClickHouse rejects"`
	BatchRows      int           `yaml:"batch_rows" doc:"flush at this many buffered records; also the cap on buffered records"`
	BatchInterval  time.Duration `yaml:"batch_interval" doc:"flush this long after the first buffered record"`
	InsertTimeout  time.Duration `yaml:"insert_timeout" doc:"bound on one INSERT attempt (a timed-out attempt is retried), and on the flushes at shutdown (the one under way and the final one)"`
	BackoffMin     time.Duration `yaml:"backoff_min" doc:"shortest backoff between attempts of a failed flush"`
	BackoffMax     time.Duration `yaml:"backoff_max" doc:"longest backoff between attempts of a failed flush"`
	FromStart      bool          `yaml:"from_start" doc:"a group with no committed offsets starts at the topic's start (false: at its end)"`
	Migrate        bool          `yaml:"migrate" doc:"apply pending ClickHouse migrations before starting"`
	MirrorDLQ      bool          `yaml:"mirror_dlq" doc:"also mirror the DLQ topic into the dlq_entries table (its own consumer group)"`
	MirrorDLQGroup string        `yaml:"mirror_dlq_group" doc:"consumer group of the DLQ mirror"`
}

// SinkFeaturesFile is features.Config and the Redis writer's batching as a file section.
type SinkFeaturesFile struct {
	Group         string        `yaml:"group" doc:"goka group: consumer group, table and loopback topic prefix"`
	EnrichedTopic string        `yaml:"enriched_topic" doc:"topic of enriched records"`
	DLQTopic      string        `yaml:"dlq_topic" doc:"dead-letter topic for enriched records that cannot be decoded"`
	Project       string        `yaml:"project" doc:"Feast project (suffix of every Redis key)"`
	RequestTTL    time.Duration `yaml:"request_ttl" doc:"Redis TTL of request_features keys"`
	RequestWindow time.Duration `yaml:"request_window" doc:"how long a request's table entry (what makes its replayed records no-ops) is kept after its last record"`
	SweepEvery    time.Duration `yaml:"sweep_every" doc:"how often expired request entries are deleted"`
	RedisBatch    int           `yaml:"redis_batch" doc:"most Redis writes per pipeline"`
	RedisLinger   time.Duration `yaml:"redis_linger" doc:"longest wait before a partial pipeline is sent"`
	StorageDir    string        `yaml:"storage_dir" doc:"local table storage, rebuilt from the changelog when missing; empty: <tmp>/backflow-goka-features"`
}

// Stage names, as --stages and the stages key take them.
const (
	StageIngest         = "ingest"
	StageSinkClickHouse = "sink-clickhouse"
	StageSinkFeatures   = "sink-features"
)

// DefaultShutdownTimeout bounds a graceful stop unless shutdown_timeout says otherwise. It
// leaves room for the ClickHouse sink's final flush (insert_timeout, 30s) inside the 60s a
// Kubernetes pod gets by default in deploy/k8s.
const DefaultShutdownTimeout = 45 * time.Second

// Defaults returns the configuration every key falls back to: the local stack's addresses,
// every stage, and each package's documented defaults.
func Defaults() Config {
	return Config{
		Stages:          []string{StageIngest, StageSinkClickHouse, StageSinkFeatures},
		ShutdownTimeout: DefaultShutdownTimeout,
		Log:             LogFile{Format: ops.LogText, Level: "info"},
		Metrics:         MetricsFile{Addr: ops.DefaultAddr, LagInterval: 10 * time.Second, ReadyTimeout: 3 * time.Second},
		Kafka:           KafkaFile{Brokers: []string{kafka.DefaultBrokers}, ClientID: "backflow", DialTimeout: 10 * time.Second, TableReplication: 1},
		Registry:        RegistryFile{URL: avro.DefaultRegistryURL, Timeout: 10 * time.Second},
		ClickHouse:      ClickHouseFile{Addr: clickhouse.DefaultAddr, Database: "default", User: "default", DialTimeout: 5 * time.Second},
		Redis:           RedisFile{Addr: redis.DefaultAddr, DialTimeout: 5 * time.Second},
		Sensitive:       SensitiveFile{URL: DefaultSensitiveURL, Timeout: moderation.DefaultTimeout, MaxItems: moderation.DefaultMaxItems},
		Ingest: IngestFile{Group: "backflow-ingest", InferenceTopic: avro.TopicInferenceResult, GatewayTopic: avro.TopicGatewayLog,
			EnrichedTopic: "backflow.enriched", DLQTopic: dlq.DefaultTopic, ControlTopic: "backflow.control",
			DedupeWindow: 7 * 24 * time.Hour, ExpireEvery: time.Hour, BatchSize: 100, BatchLinger: 100 * time.Millisecond,
			MaxInFlight: 2000, Policy: "block", MaxAttempts: 5, BackoffMin: 100 * time.Millisecond, BackoffMax: 30 * time.Second,
			BreakerFailures: 5, BreakerOpen: 10 * time.Second, MaxRecordBytes: avro.DefaultMaxRecordBytes},
		SinkClickHouse: SinkClickHouseFile{Group: clickhouse.DefaultGroup, Topic: clickhouse.DefaultTopic, DLQTopic: dlq.DefaultTopic,
			BatchRows: clickhouse.DefaultBatchRows, BatchInterval: clickhouse.DefaultBatchInterval, InsertTimeout: 30 * time.Second,
			BackoffMin: 100 * time.Millisecond, BackoffMax: 10 * time.Second, FromStart: true, MirrorDLQ: true,
			MirrorDLQGroup: clickhouse.DefaultMirrorGroup},
		SinkFeatures: SinkFeaturesFile{Group: "backflow-features", EnrichedTopic: "backflow.enriched", DLQTopic: dlq.DefaultTopic,
			Project: "backflow", RequestTTL: 7 * 24 * time.Hour, RequestWindow: 7 * 24 * time.Hour, SweepEvery: time.Hour,
			RedisBatch: 500, RedisLinger: 20 * time.Millisecond},
	}
}
