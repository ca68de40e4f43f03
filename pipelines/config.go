// Package pipelines wires backflow's stages into runnable wholes from configuration. Start with
// Config: every external system's connection settings in one struct, loaded from BACKFLOW_*
// environment variables (the names deploy/local/stack writes to .stack/env), and Check, which
// asks each system for a real answer; Preflight is the start-up form of Check that stops a
// stage on refused credentials or a failed TLS handshake.
package pipelines

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/internal/moderation"
	"github.com/backflowhq/backflow/internal/secure"
	"github.com/backflowhq/backflow/sinks/clickhouse"
	"github.com/backflowhq/backflow/sinks/redis"
)

// Conns holds the connection settings of every external system. Zero fields take each
// package's defaults: the local stack's loopback addresses.
type Conns struct {
	Kafka      kafka.Conn
	Registry   avro.RegistryConn
	ClickHouse clickhouse.Conn
	Redis      redis.Conn
	Moderation moderation.Conn
}

// Environment variables FromEnv reads. Secrets (passwords, tokens) are read only from here or
// from the file a *_FILE variable names, never from flags, so they do not show in `ps`.
const (
	EnvKafkaBrokers           = "BACKFLOW_KAFKA_BROKERS"            // comma-separated host:port list
	EnvKafkaSASLMechanism     = "BACKFLOW_KAFKA_SASL_MECHANISM"     // PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
	EnvKafkaSASLUsername      = "BACKFLOW_KAFKA_SASL_USERNAME"      //
	EnvKafkaSASLPassword      = "BACKFLOW_KAFKA_SASL_PASSWORD"      // secret
	EnvKafkaSASLPasswordFile  = "BACKFLOW_KAFKA_SASL_PASSWORD_FILE" // file holding it
	EnvKafkaTLS               = "BACKFLOW_KAFKA_TLS"                // true: TLS with the system roots
	EnvKafkaTLSCAFile         = "BACKFLOW_KAFKA_TLS_CA_FILE"
	EnvKafkaTLSCertFile       = "BACKFLOW_KAFKA_TLS_CERT_FILE"
	EnvKafkaTLSKeyFile        = "BACKFLOW_KAFKA_TLS_KEY_FILE"
	EnvKafkaTLSServerName     = "BACKFLOW_KAFKA_TLS_SERVER_NAME"
	EnvRegistryURL            = "BACKFLOW_REGISTRY_URL"      // Confluent-API base URL
	EnvRegistryUsername       = "BACKFLOW_REGISTRY_USERNAME" // basic auth
	EnvRegistryPassword       = "BACKFLOW_REGISTRY_PASSWORD" // basic auth, secret
	EnvRegistryPasswordFile   = "BACKFLOW_REGISTRY_PASSWORD_FILE"
	EnvRegistryTLSCAFile      = "BACKFLOW_REGISTRY_TLS_CA_FILE"
	EnvRegistryTLSCertFile    = "BACKFLOW_REGISTRY_TLS_CERT_FILE"
	EnvRegistryTLSKeyFile     = "BACKFLOW_REGISTRY_TLS_KEY_FILE"
	EnvRegistryTLSServerName  = "BACKFLOW_REGISTRY_TLS_SERVER_NAME"
	EnvClickHouseAddr         = "BACKFLOW_CLICKHOUSE_ADDR"     // native protocol host:port
	EnvClickHouseDatabase     = "BACKFLOW_CLICKHOUSE_DATABASE" // default "default"
	EnvClickHouseUser         = "BACKFLOW_CLICKHOUSE_USER"     // default "default"
	EnvClickHousePassword     = "BACKFLOW_CLICKHOUSE_PASSWORD" // secret
	EnvClickHousePasswordFile = "BACKFLOW_CLICKHOUSE_PASSWORD_FILE"
	EnvClickHouseTLS          = "BACKFLOW_CLICKHOUSE_TLS"
	EnvClickHouseTLSCAFile    = "BACKFLOW_CLICKHOUSE_TLS_CA_FILE"
	EnvClickHouseTLSCertFile  = "BACKFLOW_CLICKHOUSE_TLS_CERT_FILE"
	EnvClickHouseTLSKeyFile   = "BACKFLOW_CLICKHOUSE_TLS_KEY_FILE"
	EnvClickHouseTLSServer    = "BACKFLOW_CLICKHOUSE_TLS_SERVER_NAME"
	EnvRedisAddr              = "BACKFLOW_REDIS_ADDR" // host:port
	EnvRedisDB                = "BACKFLOW_REDIS_DB"   // database number, default 0
	EnvRedisUsername          = "BACKFLOW_REDIS_USERNAME"
	EnvRedisPassword          = "BACKFLOW_REDIS_PASSWORD" // secret
	EnvRedisPasswordFile      = "BACKFLOW_REDIS_PASSWORD_FILE"
	EnvRedisTLS               = "BACKFLOW_REDIS_TLS"
	EnvRedisTLSCAFile         = "BACKFLOW_REDIS_TLS_CA_FILE"
	EnvRedisTLSCertFile       = "BACKFLOW_REDIS_TLS_CERT_FILE"
	EnvRedisTLSKeyFile        = "BACKFLOW_REDIS_TLS_KEY_FILE"
	EnvRedisTLSServerName     = "BACKFLOW_REDIS_TLS_SERVER_NAME"
	EnvSensitiveURL           = "BACKFLOW_SENSITIVE_URL"   // sensitive-word service base URL
	EnvSensitiveToken         = "BACKFLOW_SENSITIVE_TOKEN" // its bearer token, secret
	EnvSensitiveTokenFile     = "BACKFLOW_SENSITIVE_TOKEN_FILE"
	EnvSensitiveTLSCAFile     = "BACKFLOW_SENSITIVE_TLS_CA_FILE"
	EnvSensitiveTLSCertFile   = "BACKFLOW_SENSITIVE_TLS_CERT_FILE"
	EnvSensitiveTLSKeyFile    = "BACKFLOW_SENSITIVE_TLS_KEY_FILE"
	EnvSensitiveTLSServerName = "BACKFLOW_SENSITIVE_TLS_SERVER_NAME"
)

// EnvVar documents one variable FromEnv reads; `backflow --help` and the README list them.
type EnvVar struct {
	Name    string
	Default string // what applies when unset
	Doc     string
	Secret  bool // never logged or printed; prefer the *_FILE twin
}

// EnvVars is every variable FromEnv reads, grouped by system, in the order --help shows them.
var EnvVars = []EnvVar{
	{EnvKafkaBrokers, kafka.DefaultBrokers, "bootstrap brokers, comma-separated host:port", false},
	{EnvKafkaSASLMechanism, "none", "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (both clients: franz-go and goka's sarama)", false},
	{EnvKafkaSASLUsername, "none", "SASL user", false},
	{EnvKafkaSASLPassword, "none", "SASL password", true},
	{EnvKafkaSASLPasswordFile, "none", "file holding the SASL password (read on each new connection)", false},
	{EnvKafkaTLS, "false", "true: TLS with the system's root CAs (any TLS_* below also turns TLS on)", false},
	{EnvKafkaTLSCAFile, "system roots", "PEM CA bundle the brokers' certificates are checked against", false},
	{EnvKafkaTLSCertFile + ", " + EnvKafkaTLSKeyFile, "none", "client certificate and key (mutual TLS)", false},
	{EnvKafkaTLSServerName, "each broker's host", "name the brokers' certificates must carry", false},
	{EnvRegistryURL, avro.DefaultRegistryURL, "Confluent-API registry base; https:// for TLS", false},
	{EnvRegistryUsername, "none", "basic-auth user", false},
	{EnvRegistryPassword, "none", "basic-auth password", true},
	{EnvRegistryPasswordFile, "none", "file holding it", false},
	{EnvRegistryTLSCAFile, "system roots", "PEM CA bundle for an https registry", false},
	{EnvRegistryTLSCertFile + ", " + EnvRegistryTLSKeyFile, "none", "client certificate and key", false},
	{EnvRegistryTLSServerName, "the URL's host", "name the certificate must carry", false},
	{EnvClickHouseAddr, clickhouse.DefaultAddr, "native protocol host:port (the secure native port with TLS)", false},
	{EnvClickHouseDatabase, "default", "database of backflow's tables", false},
	{EnvClickHouseUser, "default", "user", false},
	{EnvClickHousePassword, "none", "password", true},
	{EnvClickHousePasswordFile, "none", "file holding it", false},
	{EnvClickHouseTLS, "false", "true: TLS with the system's root CAs", false},
	{EnvClickHouseTLSCAFile, "system roots", "PEM CA bundle (turns TLS on)", false},
	{EnvClickHouseTLSCertFile + ", " + EnvClickHouseTLSKeyFile, "none", "client certificate and key", false},
	{EnvClickHouseTLSServer, "the address's host", "name the certificate must carry", false},
	{EnvRedisAddr, redis.DefaultAddr, "host:port (Redis's tls-port with TLS)", false},
	{EnvRedisDB, "0", "database number", false},
	{EnvRedisUsername, "none", "ACL user (a password alone authenticates as default)", false},
	{EnvRedisPassword, "none", "password", true},
	{EnvRedisPasswordFile, "none", "file holding it (read on each new connection)", false},
	{EnvRedisTLS, "false", "true: TLS with the system's root CAs", false},
	{EnvRedisTLSCAFile, "system roots", "PEM CA bundle (turns TLS on)", false},
	{EnvRedisTLSCertFile + ", " + EnvRedisTLSKeyFile, "none", "client certificate and key", false},
	{EnvRedisTLSServerName, "the address's host", "name the certificate must carry", false},
	{EnvSensitiveURL, DefaultSensitiveURL, "sensitive-word service base; https:// for TLS", false},
	{EnvSensitiveToken, "none", "its bearer token", true},
	{EnvSensitiveTokenFile, "none", "file holding it", false},
	{EnvSensitiveTLSCAFile, "system roots", "PEM CA bundle for an https service", false},
	{EnvSensitiveTLSCertFile + ", " + EnvSensitiveTLSKeyFile, "none", "client certificate and key", false},
	{EnvSensitiveTLSServerName, "the URL's host", "name the certificate must carry", false},
}

// DefaultSensitiveURL is the local stack's sensitive-word service.
const DefaultSensitiveURL = "http://127.0.0.1:18090"

// FromEnv builds a Config from environment variables looked up with getenv (os.Getenv in
// production), then validates it. All problems are reported at once, each naming its
// variable; no error shows a secret.
func FromEnv(getenv func(string) string) (Conns, error) {
	var errs []error
	tlsOf := func(enabled, ca, cert, key, server string) secure.TLS {
		t := secure.TLS{CAFile: getenv(ca), CertFile: getenv(cert), KeyFile: getenv(key), ServerName: getenv(server)}
		if enabled != "" {
			if v := getenv(enabled); v != "" {
				on, err := strconv.ParseBool(v)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: %q, want true or false", enabled, v))
				}
				t.Enabled = on
			}
		}
		return t
	}
	c := Conns{
		Kafka: kafka.Conn{
			Brokers: kafka.ParseBrokers(getenv(EnvKafkaBrokers)),
			SASL: kafka.SASL{
				Mechanism:    strings.TrimSpace(getenv(EnvKafkaSASLMechanism)),
				Username:     getenv(EnvKafkaSASLUsername),
				Password:     getenv(EnvKafkaSASLPassword),
				PasswordFile: getenv(EnvKafkaSASLPasswordFile),
			},
			TLS: tlsOf(EnvKafkaTLS, EnvKafkaTLSCAFile, EnvKafkaTLSCertFile, EnvKafkaTLSKeyFile, EnvKafkaTLSServerName),
		},
		Registry: avro.RegistryConn{
			URL:          getenv(EnvRegistryURL),
			Username:     getenv(EnvRegistryUsername),
			Password:     getenv(EnvRegistryPassword),
			PasswordFile: getenv(EnvRegistryPasswordFile),
			TLS:          tlsOf("", EnvRegistryTLSCAFile, EnvRegistryTLSCertFile, EnvRegistryTLSKeyFile, EnvRegistryTLSServerName),
		},
		ClickHouse: clickhouse.Conn{
			Addr:         getenv(EnvClickHouseAddr),
			Database:     getenv(EnvClickHouseDatabase),
			User:         getenv(EnvClickHouseUser),
			Password:     getenv(EnvClickHousePassword),
			PasswordFile: getenv(EnvClickHousePasswordFile),
			TLS:          tlsOf(EnvClickHouseTLS, EnvClickHouseTLSCAFile, EnvClickHouseTLSCertFile, EnvClickHouseTLSKeyFile, EnvClickHouseTLSServer),
		},
		Redis: redis.Conn{
			Addr:         getenv(EnvRedisAddr),
			Username:     getenv(EnvRedisUsername),
			Password:     getenv(EnvRedisPassword),
			PasswordFile: getenv(EnvRedisPasswordFile),
			TLS:          tlsOf(EnvRedisTLS, EnvRedisTLSCAFile, EnvRedisTLSCertFile, EnvRedisTLSKeyFile, EnvRedisTLSServerName),
		},
		Moderation: moderation.Conn{
			URL:       getenv(EnvSensitiveURL),
			Token:     getenv(EnvSensitiveToken),
			TokenFile: getenv(EnvSensitiveTokenFile),
			TLS:       tlsOf("", EnvSensitiveTLSCAFile, EnvSensitiveTLSCertFile, EnvSensitiveTLSKeyFile, EnvSensitiveTLSServerName),
		},
	}
	if c.Moderation.URL == "" {
		c.Moderation.URL = DefaultSensitiveURL
	}
	if v := getenv(EnvRedisDB); v != "" {
		db, err := strconv.Atoi(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %q is not a number", EnvRedisDB, v))
		}
		c.Redis.DB = db
	}
	if err := c.Validate(); err != nil {
		errs = append(errs, err)
	}
	return c, errors.Join(errs...)
}

// Validate checks every part and reports all errors at once.
func (c Conns) Validate() error {
	return errors.Join(c.Kafka.Validate(), c.Registry.Validate(), c.ClickHouse.Validate(), c.Redis.Validate(), c.Moderation.Validate())
}
