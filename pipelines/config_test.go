package pipelines

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/backflowhq/backflow/internal/secure/securetest"
)

func TestFromEnv(t *testing.T) {
	pki := securetest.New(t)
	secretFile := securetest.SecretFile(t, "secret")
	tests := []struct {
		name    string
		env     map[string]string
		check   func(t *testing.T, c Conns)
		wantErr []string // every substring must appear: all errors are reported at once
	}{
		{
			name: "empty environment takes the local stack's defaults",
			env:  map[string]string{},
			check: func(t *testing.T, c Conns) {
				got := []string{c.Kafka.Endpoint(), c.Registry.Endpoint(), c.ClickHouse.Endpoint(), c.Redis.Endpoint(), c.Moderation.URL}
				want := []string{"127.0.0.1:19092", "http://127.0.0.1:18081/apis/ccompat/v7", "127.0.0.1:19000", "127.0.0.1:16379", "http://127.0.0.1:18090"}
				for i := range want {
					if got[i] != want[i] {
						t.Errorf("endpoint %d = %q, want %q", i, got[i], want[i])
					}
				}
			},
		},
		{
			name: "values are read",
			env: map[string]string{
				EnvKafkaBrokers: " k1:9092, k2:9092 ,", EnvRegistryURL: "https://sr.example:8081",
				EnvRegistryUsername: "u", EnvRegistryPassword: "p", EnvClickHouseAddr: "ch:9000",
				EnvClickHouseUser: "writer", EnvRedisAddr: "r:6379", EnvRedisDB: "3",
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
			env:     map[string]string{EnvKafkaBrokers: "nohost", EnvRegistryURL: "ftp://x", EnvClickHouseAddr: ":9000", EnvRedisDB: "x"},
			wantErr: []string{"BACKFLOW_REDIS_DB", `kafka: brokers: "nohost"`, "avro: registry url", "clickhouse: addr"},
		},
		{
			name:    "password without user",
			env:     map[string]string{EnvRegistryPassword: "secret"},
			wantErr: []string{"registry username"},
		},
		{
			name: "security settings are read for every system",
			env: map[string]string{
				EnvKafkaSASLMechanism: "scram-sha-512", EnvKafkaSASLUsername: "backflow", EnvKafkaSASLPasswordFile: secretFile,
				EnvKafkaTLSCAFile: pki.CAFile, EnvKafkaTLSServerName: "kafka.internal",
				EnvRegistryURL: "https://sr:8443", EnvRegistryUsername: "backflow", EnvRegistryPasswordFile: secretFile, EnvRegistryTLSCAFile: pki.CAFile,
				EnvClickHouseAddr: "ch:9440", EnvClickHouseUser: "backflow", EnvClickHousePasswordFile: secretFile, EnvClickHouseTLS: "true",
				EnvRedisAddr: "r:6380", EnvRedisUsername: "backflow", EnvRedisPasswordFile: secretFile, EnvRedisTLSCAFile: pki.CAFile,
				EnvRedisTLSCertFile: pki.CertFile, EnvRedisTLSKeyFile: pki.KeyFile,
				EnvSensitiveURL: "https://sw:8443", EnvSensitiveTokenFile: secretFile, EnvSensitiveTLSCAFile: pki.CAFile,
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
				if c.Moderation.TokenFile != secretFile || c.Moderation.TLS.CAFile != pki.CAFile {
					t.Errorf("moderation: %+v", c.Moderation)
				}
				if c.Kafka.SASL.Password != "" || c.Redis.Password != "" {
					t.Error("a *_FILE secret was copied inline")
				}
			},
		},
		{
			name: "every bad security setting is reported together",
			env: map[string]string{
				EnvKafkaSASLMechanism: "GSSAPI", EnvKafkaTLS: "maybe",
				EnvRegistryUsername: "u", EnvRegistryPassword: "secret", EnvRegistryPasswordFile: secretFile,
				EnvClickHousePasswordFile: "/nonexistent/ch-password",
				EnvRedisTLSCAFile:         "/nonexistent/ca.crt",
				EnvSensitiveTLSCAFile:     pki.CAFile, // with the default http:// URL
			},
			wantErr: []string{`kafka: sasl mechanism: "GSSAPI"`, `BACKFLOW_KAFKA_TLS: "maybe"`, "avro: registry password: set inline and as a file",
				"clickhouse: password file: open /nonexistent/ch-password", "redis: tls ca file", "moderation: tls: set, but the url"},
		},
		{
			name:    "sasl without password",
			env:     map[string]string{EnvKafkaSASLMechanism: "PLAIN", EnvKafkaSASLUsername: "u"},
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
				if strings.Contains(err.Error(), "secret") {
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

// TestEnvVarsDocumented: every BACKFLOW_* variable FromEnv reads is in EnvVars (what --help
// prints) and in the README's table for external services.
func TestEnvVarsDocumented(t *testing.T) {
	var read []string
	if _, err := FromEnv(func(k string) string { read = append(read, k); return "" }); err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, v := range EnvVars {
		for _, name := range strings.Split(v.Name, ", ") {
			listed[name] = true
		}
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(readme), "## Pointing backflow at external services")
	section, _, _ = strings.Cut(section, "\n## ")
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("`(BACKFLOW_[A-Z_]+)`").FindAllStringSubmatch(section, -1) {
		documented[m[1]] = true
	}
	for _, k := range read {
		if !listed[k] {
			t.Errorf("%s is read but not in EnvVars", k)
		}
		if !documented[k] {
			t.Errorf("%s is read but not in README's \"Pointing backflow at external services\" (each name in backquotes)", k)
		}
	}
	if len(read) < 40 {
		t.Fatalf("FromEnv read only %d variables", len(read))
	}
}
