// Package pipelines wires backflow's stages into runnable wholes from configuration. Start with
// Config: every external system's connection settings in one struct, loaded from BACKFLOW_*
// environment variables (the names deploy/local/stack writes to .stack/env), and Check, which
// asks each system for a real answer.
package pipelines

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/moderation"
	"github.com/backflowhq/backflow/sinks/clickhouse"
	"github.com/backflowhq/backflow/sinks/features"
)

// Config holds the connection settings of every external system. Zero fields take each
// package's defaults: the local stack's loopback addresses.
type Config struct {
	Kafka      kafka.Config
	Registry   avro.RegistryConfig
	ClickHouse clickhouse.Config
	Redis      features.Config
	Moderation moderation.Config
}

// Environment variables FromEnv reads. Secrets (passwords) are read only from here, never
// from flags, so they do not show in `ps`.
const (
	EnvKafkaBrokers       = "BACKFLOW_KAFKA_BROKERS"       // comma-separated host:port list
	EnvRegistryURL        = "BACKFLOW_REGISTRY_URL"        // Confluent-API base URL
	EnvRegistryUsername   = "BACKFLOW_REGISTRY_USERNAME"   // basic auth
	EnvRegistryPassword   = "BACKFLOW_REGISTRY_PASSWORD"   // basic auth
	EnvClickHouseAddr     = "BACKFLOW_CLICKHOUSE_ADDR"     // native protocol host:port
	EnvClickHouseDatabase = "BACKFLOW_CLICKHOUSE_DATABASE" // default "default"
	EnvClickHouseUser     = "BACKFLOW_CLICKHOUSE_USER"     // default "default"
	EnvClickHousePassword = "BACKFLOW_CLICKHOUSE_PASSWORD"
	EnvRedisAddr          = "BACKFLOW_REDIS_ADDR" // host:port
	EnvRedisDB            = "BACKFLOW_REDIS_DB"   // database number, default 0
	EnvRedisUsername      = "BACKFLOW_REDIS_USERNAME"
	EnvRedisPassword      = "BACKFLOW_REDIS_PASSWORD"
	EnvSensitiveURL       = "BACKFLOW_SENSITIVE_URL"   // sensitive-word service base URL
	EnvSensitiveToken     = "BACKFLOW_SENSITIVE_TOKEN" // its bearer token, if it wants one
)

// DefaultSensitiveURL is the local stack's sensitive-word service.
const DefaultSensitiveURL = "http://127.0.0.1:18090"

// FromEnv builds a Config from environment variables looked up with getenv (os.Getenv in
// production), then validates it. All problems are reported at once.
func FromEnv(getenv func(string) string) (Config, error) {
	var errs []error
	c := Config{
		Kafka: kafka.Config{Brokers: kafka.ParseBrokers(getenv(EnvKafkaBrokers))},
		Registry: avro.RegistryConfig{
			URL:      getenv(EnvRegistryURL),
			Username: getenv(EnvRegistryUsername),
			Password: getenv(EnvRegistryPassword),
		},
		ClickHouse: clickhouse.Config{
			Addr:     getenv(EnvClickHouseAddr),
			Database: getenv(EnvClickHouseDatabase),
			User:     getenv(EnvClickHouseUser),
			Password: getenv(EnvClickHousePassword),
		},
		Redis: features.Config{
			Addr:     getenv(EnvRedisAddr),
			Username: getenv(EnvRedisUsername),
			Password: getenv(EnvRedisPassword),
		},
		Moderation: moderation.Config{URL: getenv(EnvSensitiveURL), Token: getenv(EnvSensitiveToken)},
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
func (c Config) Validate() error {
	return errors.Join(c.Kafka.Validate(), c.Registry.Validate(), c.ClickHouse.Validate(), c.Redis.Validate(), c.Moderation.Validate())
}
