package pipelines

import (
	"strings"
	"testing"
)

func TestFromEnv(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		check   func(t *testing.T, c Config)
		wantErr []string // every substring must appear: all errors are reported at once
	}{
		{
			name: "empty environment takes the local stack's defaults",
			env:  map[string]string{},
			check: func(t *testing.T, c Config) {
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
			check: func(t *testing.T, c Config) {
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
