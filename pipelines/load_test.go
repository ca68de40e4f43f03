package pipelines

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/backflowhq/backflow/internal/conf"
	"github.com/backflowhq/backflow/internal/secure"
	"github.com/backflowhq/backflow/test/testenv"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// stackAddrs are addresses for every system, which have no default.
var stackAddrs = map[string]string{"BACKFLOW_KAFKA_BROKERS": "kafka-1:9092", "BACKFLOW_REGISTRY_URL": "http://registry:8081",
	"BACKFLOW_CLICKHOUSE_ADDR": "clickhouse:9000", "BACKFLOW_REDIS_ADDR": "redis:6379", "BACKFLOW_SENSITIVE_WORDS_URL": "http://sensitive-words:8090"}

// withAddrs is m with stackAddrs' variables added where neither m nor the file (yaml) gives
// the key.
func withAddrs(m map[string]string, file string) map[string]string {
	var doc map[string]any
	_ = yaml.Unmarshal([]byte(file), &doc) // a case with a broken file gets every address
	out := map[string]string{}
	for v, val := range stackAddrs {
		k, _ := schema.Key(map[string]string{"BACKFLOW_KAFKA_BROKERS": "kafka.brokers", "BACKFLOW_REGISTRY_URL": "registry.url",
			"BACKFLOW_CLICKHOUSE_ADDR": "clickhouse.addr", "BACKFLOW_REDIS_ADDR": "redis.addr", "BACKFLOW_SENSITIVE_WORDS_URL": "sensitive_words.url"}[v])
		section, key, _ := strings.Cut(k.Path, ".")
		if sec, ok := doc[section].(map[string]any); ok {
			if _, inFile := sec[key]; inFile {
				continue
			}
		}
		out[v] = val
	}
	maps.Copy(out, m)
	return out
}

// withStackAddrs is c with stackAddrs' addresses.
func withStackAddrs(c Config) Config {
	c.Kafka.Brokers, c.Registry.URL, c.ClickHouse.Addr = []string{"kafka-1:9092"}, "http://registry:8081", "clickhouse:9000"
	c.Redis.Addr, c.SensitiveWords.URL = "redis:6379", "http://sensitive-words:8090"
	return c
}

// TestLoad is the check-config table: each case is a file (and variables), and either the
// values it must produce or every error it must report, each with its key path.
func TestLoad(t *testing.T) {
	secret := testenv.WriteFile(t, "pw", "s3cret-from-file\n")
	empty := testenv.WriteFile(t, "empty", "\n")
	tests := []struct {
		name    string
		yaml    string
		env     map[string]string
		check   func(t *testing.T, l Loaded)
		wantErr []string // each must appear, prefixed by its key path
		nErr    int      // exact number of errors, when > 0
		bare    bool     // no stackAddrs added
	}{
		{
			name: "no file: the defaults, and the addresses given",
			check: func(t *testing.T, l Loaded) {
				if !reflect.DeepEqual(l.Config, withStackAddrs(Defaults())) {
					t.Errorf("config = %+v, want Defaults() with the addresses", l.Config)
				}
			},
		},
		{
			// Regression: with nothing given, every stage used the local stack's loopback
			// addresses, and check-config called that valid.
			name: "no addresses: each one the stages need is named, with where to give it",
			bare: true,
			wantErr: []string{"kafka.brokers: not set: give BACKFLOW_KAFKA_BROKERS or kafka.brokers in --config (the local stack's addresses: --env-file .stack/env)",
				"registry.url: not set", "clickhouse.addr: not set", "redis.addr: not set", "sensitive_words.url: not set"},
			nErr: 5,
		},
		{
			name:    "a sink-clickhouse process needs no Redis and no sensitive-word service",
			yaml:    "stages: [sink-clickhouse]\n",
			bare:    true,
			env:     map[string]string{"BACKFLOW_KAFKA_BROKERS": "k:9092", "BACKFLOW_REGISTRY_URL": "http://r:8081"},
			wantErr: []string{"clickhouse.addr: not set"},
			nErr:    1,
		},
		{
			// Regression: a SASL mechanism and its user are each invalid alone, and every
			// secured setup (variables, or file keys) was refused with both keys named.
			name: "a SASL mechanism with its user and password file, from variables and from the file",
			yaml: "kafka:\n  sasl_username: backflow\n",
			env: map[string]string{"BACKFLOW_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512", "BACKFLOW_KAFKA_SASL_PASSWORD_FILE": secret,
				"BACKFLOW_REDIS_USERNAME": "backflow", "BACKFLOW_REDIS_PASSWORD_FILE": secret},
			check: func(t *testing.T, l Loaded) {
				if k := l.Config.Kafka.SASL; k.Mechanism != "SCRAM-SHA-512" || k.Username != "backflow" {
					t.Errorf("kafka sasl %+v", k)
				}
			},
		},
		{
			name:    "a SASL mechanism without its user is still refused",
			env:     map[string]string{"BACKFLOW_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512"},
			wantErr: []string{"kafka.sasl_mechanism (BACKFLOW_KAFKA_SASL_MECHANISM): kafka: sasl username: empty"},
			nErr:    1,
		},
		{
			name: "values are read, in every section",
			yaml: `
stages: [sink-clickhouse]
shutdown_timeout: 1m
log: {format: json, level: debug}
metrics: {addr: "0.0.0.0:9464", lag_interval: 2s}
kafka:
  brokers: [k1:9092, k2:9092]
  table_replication: 3
clickhouse: {addr: "ch:9000", database: analytics, user: writer}
redis: {addr: "r:6379", db: 2}
sensitive_words: {url: "https://sw.example", timeout: 2s}
ingest: {batch_size: 250, policy: pass}
sink_clickhouse: {batch_rows: 20000, batch_interval: 2s, mirror_dlq: false}
sink_features: {project: prod, redis_batch: 1000}
`,
			check: func(t *testing.T, l Loaded) {
				f := l.Config
				if !reflect.DeepEqual(f.Stages, []string{"sink-clickhouse"}) || f.ShutdownTimeout != time.Minute || f.Log.Format != "json" ||
					f.Metrics.Addr != "0.0.0.0:9464" || f.Metrics.LagInterval != 2*time.Second {
					t.Errorf("process keys %+v", f)
				}
				c := l.Config.Conns
				if c.Kafka.Endpoint() != "k1:9092,k2:9092" || c.Kafka.TableReplication != 3 || c.ClickHouse.Database != "analytics" ||
					c.ClickHouse.User != "writer" || c.Redis.DB != 2 || c.SensitiveWords.URL != "https://sw.example" || c.SensitiveWords.Timeout != 2*time.Second {
					t.Errorf("connections %+v", c)
				}
				if ic := f.Ingest.Config; ic.BatchSize != 250 || ic.Policy != "pass" || ic.MaxInFlight != 2000 {
					t.Errorf("ingest %+v", ic)
				}
				if sc := f.SinkClickHouse; sc.BatchRows != 20000 || sc.BatchInterval != 2*time.Second || !sc.FromStart || f.SinkClickHouse.MirrorDLQ {
					t.Errorf("sink_clickhouse %+v", sc)
				}
				if fc, wc := f.SinkFeatures.Config, f.SinkFeatures.Redis; fc.Project != "prod" || wc.MaxBatch != 1000 {
					t.Errorf("sink_features %+v", fc)
				}
				if l.Sources["sink_clickhouse.batch_rows"] != "file" || l.Sources["ingest.group"] != "default" {
					t.Errorf("sources %v", l.Sources)
				}
			},
		},
		{
			name: "variables win over the file, for old and new keys alike",
			yaml: "clickhouse: {addr: \"file:9000\", database: fromfile}\nsink_clickhouse: {batch_rows: 5}\nkafka: {brokers: [file:9092]}\n",
			env: map[string]string{"BACKFLOW_CLICKHOUSE_ADDR": "env:9000", "BACKFLOW_SINK_CLICKHOUSE_BATCH_ROWS": "7",
				"BACKFLOW_KAFKA_BROKERS": "e1:9092,e2:9092", "BACKFLOW_STAGES": "ingest,sink-features"},
			check: func(t *testing.T, l Loaded) {
				if l.Config.ClickHouse.Addr != "env:9000" || l.Config.ClickHouse.Database != "fromfile" || l.Config.SinkClickHouse.BatchRows != 7 ||
					l.Config.Kafka.Endpoint() != "e1:9092,e2:9092" || strings.Join(l.Config.Stages, ",") != "ingest,sink-features" {
					t.Errorf("conn %+v, batch rows %d, stages %v", l.Config.ClickHouse, l.Config.SinkClickHouse.BatchRows, l.Config.Stages)
				}
				if l.Sources["clickhouse.addr"] != "BACKFLOW_CLICKHOUSE_ADDR" || l.Sources["clickhouse.database"] != "file" {
					t.Errorf("sources %v", l.Sources)
				}
			},
		},
		{
			name: "a secret comes from its file, and its variable wins",
			yaml: "clickhouse: {password_file: " + secret + "}\nregistry: {username: u, password_file: " + secret + "}\n",
			env:  map[string]string{"BACKFLOW_REGISTRY_PASSWORD": "from-env"},
			check: func(t *testing.T, l Loaded) {
				// A secret from a file reaches the package as the file, which reads it (and the
				// Kafka and Redis clients re-read it on each connection).
				if l.Config.ClickHouse.Password != "" || l.Config.ClickHouse.PasswordFile != secret || l.Config.Registry.Password != "from-env" || l.Config.Registry.PasswordFile != "" {
					t.Errorf("clickhouse password %q file %q, registry password %q file %q", l.Config.ClickHouse.Password, l.Config.ClickHouse.PasswordFile,
						l.Config.Registry.Password, l.Config.Registry.PasswordFile)
				}
				if pw, err := secure.ReadSecret("clickhouse", l.Config.ClickHouse.Password, l.Config.ClickHouse.PasswordFile); err != nil || pw != "s3cret-from-file" {
					t.Errorf("clickhouse password resolves to %q, %v", pw, err)
				}
			},
		},
		{
			name: "an empty file is the defaults",
			yaml: "# nothing here\n",
			check: func(t *testing.T, l Loaded) {
				if !reflect.DeepEqual(l.Config, withStackAddrs(Defaults())) {
					t.Errorf("config = %+v", l.Config)
				}
			},
		},
		{
			name:    "inline secrets are refused with where to put them",
			yaml:    "clickhouse:\n  password: hunter2\nsensitive_words:\n  token: abc\nkafka:\n  sasl_password: x\n",
			wantErr: []string{"clickhouse.password (line 2): secrets are never read from the config file; put it in a file and set clickhouse.password_file to its path, or set BACKFLOW_CLICKHOUSE_PASSWORD", "sensitive_words.token (line 4): secrets are never read", "sensitive_words.token_file", "BACKFLOW_SENSITIVE_WORDS_TOKEN", "kafka.sasl_password (line 6): secrets are never read"},
			nErr:    3,
		},
		{
			name: "every problem at once, each with its path",
			yaml: `
stages: [ingest, sink-bogus, ingest]
shutdown_timeout: 30
log: {format: xml, level: loud}
metrics: {addr: nowhere}
kafka: {brokers: [nohost], brokerz: x}
clickhouse: {addr: ":9000"}
redis: {db: -1, password_file: /nonexistent/secret}
sensitive_words: {url: "ftp://x", max_items: 0}
ingest: {batch_size: 0, policy: maybe, dedupe_window: forever}
sink_clickhouse: {batch_rows: 2000000, topic: t, dlq_topic: t}
sink_features: {request_ttl: -1s, redis_batch: lots}
extra: 1
`,
			wantErr: []string{
				`stages (line 2): unknown stage "sink-bogus"`, `stages (line 2): stage "ingest" given twice`,
				`shutdown_timeout (line 3): want a duration such as 500ms, 10s, 1h30m, 7d or P1DT6H, got "30"`,
				`log.format (line 4): "xml", want text or json`, `log.level (line 4): "loud"`,
				`metrics.addr (line 5): "nowhere" is not host:port`,
				`kafka.brokers (line 6): kafka: brokers: "nohost" is not host:port`, "kafka.brokerz (line 6): unknown key; did you mean brokers? (keys here: brokers, client_id",
				`clickhouse.addr (line 7): clickhouse: addr: ":9000" has no host; want host:port`,
				"redis.db (line 8): redis: db: -1 is negative", "redis.password_file (line 8): cannot read the secret",
				"sensitive_words.url (line 9): moderation: url", "sensitive_words.max_items (line 9): 0, want more than 0",
				"ingest.batch_size (line 10): 0, want more than 0", `ingest.policy (line 10): ingest: policy: "maybe"`,
				`ingest.dedupe_window (line 10): want a duration`,
				"sink_clickhouse.batch_rows (line 11): clickhouse sink: batch rows: 2000000", `sink_clickhouse.dlq_topic (line 11): clickhouse sink: dlq topic: "t" is also its topic, the one the sink reads`,
				"sink_features.request_ttl (line 12): -1s, want more than 0", `sink_features.redis_batch (line 12): want a whole number, got "lots"`,
				"extra (line 13): unknown key",
			},
			nErr: 21,
		},
		{
			// Regression: an empty brokers list, ClickHouse address or registry URL passed
			// check-config ("from file") and the stages then quietly used the local stack's
			// loopback defaults; a URL where host:port belongs passed and failed later with
			// "too many colons". Each must be refused with its key and line.
			name: "empty values and URLs for addresses are refused",
			yaml: "kafka: {brokers: []}\nclickhouse: {addr: \"\"}\nregistry: {url: \"\"}\nredis: {addr: \"http://127.0.0.1:16379\"}\n",
			env:  map[string]string{"BACKFLOW_SENSITIVE_WORDS_URL": "http://sw:8090"},
			wantErr: []string{
				"kafka.brokers (line 1): not set: give BACKFLOW_KAFKA_BROKERS or kafka.brokers in --config",
				"clickhouse.addr (line 2): not set",
				"registry.url (line 3): not set",
				`redis.addr (line 4): redis: addr: "http://127.0.0.1:16379" is a URL; want host:port (no scheme)`,
			},
			nErr: 4,
		},
		{
			// Regression: each of these keys fails alone (a mechanism without a user, a user
			// without a mechanism), and check-config reported both although together they are
			// right, so every secured stage refused to start.
			name: "keys that are only right together pass together",
			yaml: "kafka: {sasl_mechanism: SCRAM-SHA-512, sasl_username: backflow, sasl_password_file: " + secret + "}\n",
			check: func(t *testing.T, l Loaded) {
				if l.Config.Kafka.SASL.Mechanism != "SCRAM-SHA-512" || l.Config.Kafka.SASL.Username != "backflow" || l.Config.Kafka.SASL.PasswordFile != secret {
					t.Errorf("kafka sasl %+v", l.Config.Kafka.SASL)
				}
			},
		},
		{
			name:    "a key missing its partner is still reported",
			yaml:    "kafka: {sasl_mechanism: SCRAM-SHA-512}\n",
			wantErr: []string{"kafka.sasl_mechanism (line 1): kafka: sasl username: empty with mechanism SCRAM-SHA-512"},
			nErr:    1,
		},
		{
			name:    "bad variables name the variable",
			env:     map[string]string{"BACKFLOW_SINK_CLICKHOUSE_BATCH_ROWS": "x", "BACKFLOW_REDIS_DB": "two", "BACKFLOW_SHUTDOWN_TIMEOUT": "0s"},
			wantErr: []string{`sink_clickhouse.batch_rows (BACKFLOW_SINK_CLICKHOUSE_BATCH_ROWS): want a whole number, got "x"`, `redis.db (BACKFLOW_REDIS_DB): want a whole number`, "shutdown_timeout (BACKFLOW_SHUTDOWN_TIMEOUT): 0s, want more than 0"},
			nErr:    3,
		},
		{
			name:    "a password without a user names the section",
			env:     map[string]string{"BACKFLOW_REGISTRY_PASSWORD": "p"},
			wantErr: []string{"registry: avro: registry username: empty while a password is set"},
			nErr:    1,
		},
		{
			name:    "an empty secret file",
			yaml:    "clickhouse: {password_file: " + empty + "}\n",
			wantErr: []string{"clickhouse.password_file (line 1): " + empty + " is empty"},
			nErr:    1,
		},
		{
			name:    "not YAML",
			yaml:    "stages: [ingest\n",
			wantErr: []string{".yaml (line 1): not valid YAML: "},
			nErr:    1,
		},
		{
			name:    "a section that is not a mapping, a list where one value goes",
			yaml:    "kafka: yes\nclickhouse: {addr: [a, b]}\n",
			wantErr: []string{"kafka (line 1): want a mapping", "clickhouse.addr (line 2): want a single value"},
			nErr:    2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := ""
			if tt.yaml != "" {
				path = testenv.WriteFile(t, "backflow.yaml", tt.yaml)
			}
			vars := tt.env
			if !tt.bare {
				vars = withAddrs(tt.env, tt.yaml)
			}
			l, err := Load(path, env(vars))
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				tt.check(t, l)
				return
			}
			var ce conf.Errors
			if !errors.As(err, &ce) || !errors.Is(err, ErrConfig) {
				t.Fatalf("error %v (%T), want conf.Errors matching ErrConfig", err, err)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("errors do not say %q:\n%s", w, err)
				}
			}
			if tt.nErr > 0 && len(ce) != tt.nErr {
				t.Errorf("%d errors, want %d:\n%s", len(ce), tt.nErr, err)
			}
			for _, s := range []string{"hunter2", "s3cret", "abc\n"} {
				if strings.Contains(err.Error(), s) {
					t.Errorf("an error shows a secret (%q):\n%s", s, err)
				}
			}
		})
	}
}

// TestOverridesWinAndNameTheFlag: flag overrides beat variables and the file, and a bad one
// is reported under the flag's name.
func TestOverridesWinAndNameTheFlag(t *testing.T) {
	path := testenv.WriteFile(t, "c.yaml", "sink_clickhouse: {batch_rows: 5}\n")
	l, err := Load(path, env(withAddrs(map[string]string{"BACKFLOW_SINK_CLICKHOUSE_BATCH_ROWS": "6"}, "")),
		Override{Path: "sink_clickhouse.batch_rows", Value: "8", Source: "--batch-rows"})
	if err != nil || l.Config.SinkClickHouse.BatchRows != 8 || l.Sources["sink_clickhouse.batch_rows"] != "--batch-rows" {
		t.Fatalf("batch rows %d from %s, err %v; want 8 from --batch-rows", l.Config.SinkClickHouse.BatchRows, l.Sources["sink_clickhouse.batch_rows"], err)
	}
	_, err = Load("", nil, Override{Path: "sink_clickhouse.batch_interval", Value: "0s", Source: "--batch-interval"})
	if err == nil || !strings.Contains(err.Error(), "sink_clickhouse.batch_interval (--batch-interval): 0s, want more than 0") {
		t.Fatalf("error %v", err)
	}
}

// TestExampleFileInSync: deploy/config.example.yaml is exactly what ExampleYAML writes, and
// loading it gives the defaults (so every value it shows is the real default).
func TestExampleFileInSync(t *testing.T) {
	path := filepath.Join("..", "deploy", "config.example.yaml")
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(ExampleYAML()) {
		t.Fatalf("%s is stale: regenerate it with\n  go run ./cmd/backflow check-config --print-example > deploy/config.example.yaml", path)
	}
	l, err := Load(path, env(stackAddrs))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(l.Config, withStackAddrs(Defaults())) {
		t.Fatalf("loading the example gives %+v, want Defaults() with the addresses given", l.Config)
	}
	for _, k := range schema.Keys() {
		if k.Example != "" { // no default: shown commented out
			continue
		}
		if l.Sources[k.Path] != "file" {
			t.Errorf("key %s is not in the example file", k.Path)
		}
	}
}

// TestReadmeHasTheReference: docs/configuration.md holds the generated table.
func TestDocsHaveTheReference(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), ReferenceMarkdown()) {
		t.Fatal("docs/configuration.md does not hold the current config reference: paste the output of\n  go run ./cmd/backflow check-config --print-reference")
	}
}

// TestEveryConnectionVariableHasAKey: each variable FromEnv reads is the variable of a key (or
// of a secret), so the file can set everything the environment can.
func TestEveryConnectionVariableHasAKey(t *testing.T) {
	vars := map[string]bool{}
	for _, k := range schema.Keys() {
		vars[k.Env] = true
		if k.Secret != "" {
			vars[k.Secret] = true
		}
	}
	seen := map[string]bool{}
	FromEnv(func(k string) string { seen[k] = true; return "" })
	for k := range seen {
		if !vars[k] {
			t.Errorf("FromEnv reads %s, which no config key or secret maps to", k)
		}
	}
	if len(seen) < 10 {
		t.Fatalf("FromEnv read only %d variables", len(seen))
	}
}
