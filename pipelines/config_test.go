package pipelines

import (
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/dlq"
	"github.com/backflowhq/backflow/internal/ops"
	"github.com/backflowhq/backflow/internal/secure/securetest"
	"github.com/backflowhq/backflow/sinks/clickhouse"
)

func TestFromEnv(t *testing.T) {
	pki := securetest.New(t)
	secretFile := securetest.SecretFile(t, "pa55word")
	tests := []struct {
		name    string
		env     map[string]string
		check   func(t *testing.T, c Conns)
		wantErr []string // every substring must appear: all errors are reported at once
	}{
		{
			// Regression: an empty environment gave the local stack's loopback addresses.
			name: "empty environment: no address, and each system Required names its variable",
			env:  map[string]string{},
			check: func(t *testing.T, c Conns) {
				for _, sys := range []string{SystemKafka, SystemRegistry, SystemClickHouse, SystemRedis, SystemSensitiveWords} {
					if c.IsSet(sys) {
						t.Errorf("%s has an address: %+v", sys, c)
					}
				}
				err := c.Require(SystemKafka, SystemRedis)
				if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "kafka.brokers: not set: give BACKFLOW_KAFKA_BROKERS") ||
					!strings.Contains(err.Error(), "redis.addr: not set: give BACKFLOW_REDIS_ADDR") || strings.Contains(err.Error(), "clickhouse") {
					t.Errorf("Require(kafka, redis) = %v", err)
				}
			},
		},
		{
			name: "values are read",
			env: map[string]string{
				"BACKFLOW_KAFKA_BROKERS": " k1:9092, k2:9092 ,", "BACKFLOW_REGISTRY_URL": "https://sr.example:8081",
				"BACKFLOW_REGISTRY_USERNAME": "u", "BACKFLOW_REGISTRY_PASSWORD": "p", "BACKFLOW_CLICKHOUSE_ADDR": "ch:9000",
				"BACKFLOW_CLICKHOUSE_USER": "writer", "BACKFLOW_REDIS_ADDR": "r:6379", "BACKFLOW_REDIS_DB": "3",
			},
			check: func(t *testing.T, c Conns) {
				if c.Kafka.Endpoint() != "k1:9092,k2:9092" || c.Registry.Username != "u" || c.Registry.Password != "p" ||
					c.ClickHouse.User != "writer" || c.Redis.DB != 3 || c.Redis.Endpoint() != "r:6379" {
					t.Errorf("config not read as set: %+v", c)
				}
			},
		},
		{
			name:    "every bad value is reported together",
			env:     map[string]string{"BACKFLOW_KAFKA_BROKERS": "nohost", "BACKFLOW_REGISTRY_URL": "ftp://x", "BACKFLOW_CLICKHOUSE_ADDR": ":9000", "BACKFLOW_REDIS_DB": "x"},
			wantErr: []string{"BACKFLOW_REDIS_DB", `kafka: brokers: "nohost"`, "avro: registry url", "clickhouse: addr"},
		},
		{
			name:    "password without user",
			env:     map[string]string{"BACKFLOW_REGISTRY_PASSWORD": "pa55word"},
			wantErr: []string{"registry username"},
		},
		{
			name: "security settings are read for every system",
			env: map[string]string{
				"BACKFLOW_KAFKA_SASL_MECHANISM": "scram-sha-512", "BACKFLOW_KAFKA_SASL_USERNAME": "backflow", "BACKFLOW_KAFKA_SASL_PASSWORD_FILE": secretFile,
				"BACKFLOW_KAFKA_TLS_CA_FILE": pki.CAFile, "BACKFLOW_KAFKA_TLS_SERVER_NAME": "kafka.internal",
				"BACKFLOW_REGISTRY_URL": "https://sr:8443", "BACKFLOW_REGISTRY_USERNAME": "backflow", "BACKFLOW_REGISTRY_PASSWORD_FILE": secretFile, "BACKFLOW_REGISTRY_TLS_CA_FILE": pki.CAFile,
				"BACKFLOW_CLICKHOUSE_ADDR": "ch:9440", "BACKFLOW_CLICKHOUSE_USER": "backflow", "BACKFLOW_CLICKHOUSE_PASSWORD_FILE": secretFile, "BACKFLOW_CLICKHOUSE_TLS": "true",
				"BACKFLOW_REDIS_ADDR": "r:6380", "BACKFLOW_REDIS_USERNAME": "backflow", "BACKFLOW_REDIS_PASSWORD_FILE": secretFile, "BACKFLOW_REDIS_TLS_CA_FILE": pki.CAFile,
				"BACKFLOW_REDIS_TLS_CERT_FILE": pki.CertFile, "BACKFLOW_REDIS_TLS_KEY_FILE": pki.KeyFile,
				"BACKFLOW_SENSITIVE_WORDS_URL": "https://sw:8443", "BACKFLOW_SENSITIVE_WORDS_TOKEN_FILE": secretFile, "BACKFLOW_SENSITIVE_WORDS_TLS_CA_FILE": pki.CAFile,
			},
			check: func(t *testing.T, c Conns) {
				k := c.Kafka
				if k.SASL.Mechanism != "scram-sha-512" || k.SASL.Username != "backflow" || k.SASL.PasswordFile != secretFile ||
					k.TLS.CAFile != pki.CAFile || k.TLS.ServerName != "kafka.internal" {
					t.Errorf("kafka: %+v", k)
				}
				if c.Registry.PasswordFile != secretFile || c.Registry.TLS.CAFile != pki.CAFile {
					t.Errorf("registry: %+v", c.Registry)
				}
				if c.ClickHouse.PasswordFile != secretFile || !c.ClickHouse.TLS.Enabled || c.ClickHouse.TLS.CAFile != "" {
					t.Errorf("clickhouse: %+v", c.ClickHouse)
				}
				if c.Redis.Username != "backflow" || c.Redis.PasswordFile != secretFile || c.Redis.TLS.CertFile != pki.CertFile || c.Redis.TLS.KeyFile != pki.KeyFile {
					t.Errorf("redis: %+v", c.Redis)
				}
				if c.SensitiveWords.TokenFile != secretFile || c.SensitiveWords.TLS.CAFile != pki.CAFile {
					t.Errorf("moderation: %+v", c.SensitiveWords)
				}
				if c.Kafka.SASL.Password != "" || c.Redis.Password != "" {
					t.Error("a *_FILE secret was copied inline")
				}
			},
		},
		{
			name: "every bad security setting is reported together",
			env: map[string]string{
				"BACKFLOW_KAFKA_SASL_MECHANISM": "GSSAPI", "BACKFLOW_KAFKA_TLS": "maybe",
				"BACKFLOW_REGISTRY_USERNAME": "u", "BACKFLOW_REGISTRY_PASSWORD": "pa55word", "BACKFLOW_REGISTRY_PASSWORD_FILE": secretFile,
				"BACKFLOW_CLICKHOUSE_PASSWORD_FILE":    "/nonexistent/ch-password",
				"BACKFLOW_REDIS_TLS_CA_FILE":           "/nonexistent/ca.crt",
				"BACKFLOW_SENSITIVE_WORDS_TLS_CA_FILE": pki.CAFile, // with an http:// URL
				"BACKFLOW_SENSITIVE_WORDS_URL":         "http://sensitive-words:8090",
			},
			wantErr: []string{`kafka: sasl mechanism: "GSSAPI"`, `kafka.tls (BACKFLOW_KAFKA_TLS): want true or false, got "maybe"`, "avro: registry password: set inline and as a file",
				"clickhouse.password_file (BACKFLOW_CLICKHOUSE_PASSWORD_FILE): cannot read the secret: open /nonexistent/ch-password", "redis: tls ca file", "moderation: tls: set, but the url"},
		},
		{
			name:    "sasl without password",
			env:     map[string]string{"BACKFLOW_KAFKA_SASL_MECHANISM": "PLAIN", "BACKFLOW_KAFKA_SASL_USERNAME": "u"},
			wantErr: []string{"kafka: sasl password: empty"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := FromEnv(func(k string) string { return tt.env[k] })
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatal("no error")
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not mention %q", err, w)
					}
				}
				if strings.Contains(err.Error(), "pa55word") {
					t.Errorf("error %q shows a secret", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

// TestEnvVarsDocumented: every variable of a connection key FromEnv reads is in EnvVars (what
// --help prints) and in docs/configuration.md's table for external services.
func TestEnvVarsDocumented(t *testing.T) {
	var read []string
	if _, err := FromEnv(func(k string) string { read = append(read, k); return "" }); err != nil {
		t.Fatal(err)
	}
	conn := map[string]bool{}
	for _, k := range schema.Keys() {
		if section, _, _ := strings.Cut(k.Path, "."); slices.Contains(connSections, section) {
			conn[k.Env], conn[k.Secret] = true, k.Secret != ""
		}
	}
	listed := map[string]bool{}
	for _, v := range EnvVars() {
		listed[v.Name] = true
	}
	readme, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(readme), "## Pointing backflow at external services")
	section, _, _ = strings.Cut(section, "\n## ")
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("`(BACKFLOW_[A-Z_]+)`").FindAllStringSubmatch(section, -1) {
		documented[m[1]] = true
	}
	n := 0
	for _, k := range read {
		if !conn[k] {
			continue
		}
		n++
		if !listed[k] {
			t.Errorf("%s is read but not in EnvVars", k)
		}
		if !documented[k] {
			t.Errorf("%s is read but not in docs/configuration.md's \"Pointing backflow at external services\" (each name in backquotes)", k)
		}
	}
	if n < 40 {
		t.Fatalf("FromEnv read only %d connection variables", n)
	}
}

// TestConnectionVariablesKeepTheirNames: the variables the connection settings were read from
// before they were keys (deploy/local/stack writes them to .stack/env) are read still.
func TestConnectionVariablesKeepTheirNames(t *testing.T) {
	read := map[string]bool{}
	FromEnv(func(k string) string { read[k] = true; return "" })
	for _, name := range []string{
		"BACKFLOW_KAFKA_BROKERS",
		"BACKFLOW_KAFKA_SASL_MECHANISM",
		"BACKFLOW_KAFKA_SASL_USERNAME",
		"BACKFLOW_KAFKA_SASL_PASSWORD",
		"BACKFLOW_KAFKA_SASL_PASSWORD_FILE",
		"BACKFLOW_KAFKA_TLS",
		"BACKFLOW_KAFKA_TLS_CA_FILE",
		"BACKFLOW_KAFKA_TLS_CERT_FILE",
		"BACKFLOW_KAFKA_TLS_KEY_FILE",
		"BACKFLOW_KAFKA_TLS_SERVER_NAME",
		"BACKFLOW_REGISTRY_URL",
		"BACKFLOW_REGISTRY_USERNAME",
		"BACKFLOW_REGISTRY_PASSWORD",
		"BACKFLOW_REGISTRY_PASSWORD_FILE",
		"BACKFLOW_REGISTRY_TLS_CA_FILE",
		"BACKFLOW_REGISTRY_TLS_CERT_FILE",
		"BACKFLOW_REGISTRY_TLS_KEY_FILE",
		"BACKFLOW_REGISTRY_TLS_SERVER_NAME",
		"BACKFLOW_CLICKHOUSE_ADDR",
		"BACKFLOW_CLICKHOUSE_DATABASE",
		"BACKFLOW_CLICKHOUSE_USER",
		"BACKFLOW_CLICKHOUSE_PASSWORD",
		"BACKFLOW_CLICKHOUSE_PASSWORD_FILE",
		"BACKFLOW_CLICKHOUSE_TLS",
		"BACKFLOW_CLICKHOUSE_TLS_CA_FILE",
		"BACKFLOW_CLICKHOUSE_TLS_CERT_FILE",
		"BACKFLOW_CLICKHOUSE_TLS_KEY_FILE",
		"BACKFLOW_CLICKHOUSE_TLS_SERVER_NAME",
		"BACKFLOW_REDIS_ADDR",
		"BACKFLOW_REDIS_DB",
		"BACKFLOW_REDIS_USERNAME",
		"BACKFLOW_REDIS_PASSWORD",
		"BACKFLOW_REDIS_PASSWORD_FILE",
		"BACKFLOW_REDIS_TLS",
		"BACKFLOW_REDIS_TLS_CA_FILE",
		"BACKFLOW_REDIS_TLS_CERT_FILE",
		"BACKFLOW_REDIS_TLS_KEY_FILE",
		"BACKFLOW_REDIS_TLS_SERVER_NAME",
		"BACKFLOW_SENSITIVE_WORDS_URL",
		"BACKFLOW_SENSITIVE_WORDS_TOKEN",
		"BACKFLOW_SENSITIVE_WORDS_TOKEN_FILE",
		"BACKFLOW_SENSITIVE_WORDS_TLS_CA_FILE",
		"BACKFLOW_SENSITIVE_WORDS_TLS_CERT_FILE",
		"BACKFLOW_SENSITIVE_WORDS_TLS_KEY_FILE",
		"BACKFLOW_SENSITIVE_WORDS_TLS_SERVER_NAME",
	} {
		if !read[name] {
			t.Errorf("%s is no longer read", name)
		}
	}
}

// TestDefaultsAreTheConstants: where code outside the configuration names a default by a
// constant, the key's declared default is that constant.
func TestDefaultsAreTheConstants(t *testing.T) {
	d := Defaults()
	for _, c := range []struct {
		key       string
		got, want any
	}{
		{"ingest.inference_topic", d.Ingest.InferenceTopic, avro.TopicInferenceResult},
		{"ingest.gateway_topic", d.Ingest.GatewayTopic, avro.TopicGatewayLog},
		{"ingest.dlq_topic", d.Ingest.DLQTopic, dlq.DefaultTopic},
		{"ingest.max_record_bytes", d.Ingest.Decoder.MaxRecordBytes, avro.DefaultMaxRecordBytes},
		{"sink_clickhouse.dlq_topic", d.SinkClickHouse.DLQTopic, dlq.DefaultTopic},
		{"sink_clickhouse.batch_rows", d.SinkClickHouse.BatchRows, clickhouse.DefaultBatchRows},
		{"sink_features.dlq_topic", d.SinkFeatures.DLQTopic, dlq.DefaultTopic},
		{"metrics.addr", d.Metrics.Addr, ops.DefaultAddr},
		{"log.format", d.Log.Format, ops.LogText},
	} {
		if c.got != c.want {
			t.Errorf("%s defaults to %v, the code's constant is %v", c.key, c.got, c.want)
		}
	}
	if d.Ingest.InferenceTopic == "" || d.Kafka.Endpoint() != "" {
		t.Fatalf("defaults %+v", d)
	}
}

// TestSettingsOfARefusal: after a refusal, the operator is pointed at the variables of the
// section's user, secret and CA keys.
func TestSettingsOfARefusal(t *testing.T) {
	for system, want := range map[string]string{
		SystemKafka: "BACKFLOW_KAFKA_SASL_MECHANISM, BACKFLOW_KAFKA_SASL_USERNAME, BACKFLOW_KAFKA_SASL_PASSWORD[_FILE], " +
			"BACKFLOW_KAFKA_SASL_OAUTH_TOKEN_URL, BACKFLOW_KAFKA_SASL_OAUTH_CLIENT_SECRET[_FILE], BACKFLOW_KAFKA_SASL_OAUTH_TOKEN_FILE, BACKFLOW_KAFKA_TLS_CA_FILE",
		SystemClickHouse:     "BACKFLOW_CLICKHOUSE_USER, BACKFLOW_CLICKHOUSE_PASSWORD[_FILE], BACKFLOW_CLICKHOUSE_TLS_CA_FILE",
		SystemSensitiveWords: "BACKFLOW_SENSITIVE_WORDS_TOKEN[_FILE], BACKFLOW_SENSITIVE_WORDS_TLS_CA_FILE",
	} {
		if got := settingsOf(system); got != want {
			t.Errorf("settingsOf(%s) = %q, want %q", system, got, want)
		}
	}
}
