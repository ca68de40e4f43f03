// Package testenv gives integration tests the addresses of the real services they talk to.
//
// Values come from the process environment first, then from the env file that
// `deploy/local/stack up` writes (<repo>/.stack/env, or $BACKFLOW_STACK_DIR/env). A key found in
// neither returns "" (the services' addresses have no default). Integration tests call
// Integration first: under `go test -short` they skip; otherwise they copy the env file's
// values into the environment where not set (so that a backflow child process reaches the same
// stack, as with --env-file), and then fail when a service does not answer.
//
// A test leaves nothing on the shared stack: it names what it makes with ID, and registers its
// removal when the test ends (Topics, RemoveTopics, Groups, Subjects, RedisKeys, Database;
// pipelinetest.Env does it all for a private pipeline). `make test` ends with test/leftovers,
// which fails when anything with a test's ID is still there. Child processes run through
// Start and StartSensitive (test/proc), binaries from Build.
package testenv

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/backflowhq/backflow/internal/envfile"
)

// Keys of the env file written by deploy/local/stack.
const (
	KafkaBrokers   = "BACKFLOW_KAFKA_BROKERS"
	RegistryURL    = "BACKFLOW_REGISTRY_URL"
	ClickHouseAddr = "BACKFLOW_CLICKHOUSE_ADDR"
	RedisAddr      = "BACKFLOW_REDIS_ADDR"
	KafkaTool      = "BACKFLOW_KAFKA_TOOL"
	SensitiveURL   = "BACKFLOW_SENSITIVE_WORDS_URL"
)

// Integration skips t under `go test -short`.
func Integration(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs the local stack (deploy/local/stack up); skipped with -short")
	}
	vals := fileValues()
	if loadErr != nil {
		t.Fatalf("testenv: reading the stack's env file: %v", loadErr)
	}
	if len(vals) == 0 {
		t.Fatalf("testenv: no env file at %s: start the stack (deploy/local/stack up) or set BACKFLOW_STACK_DIR", envFilePath())
	}
	exportOnce.Do(func() {
		for k, v := range vals {
			if _, set := os.LookupEnv(k); !set {
				os.Setenv(k, v)
			}
		}
	})
}

var exportOnce sync.Once

// Get returns the value of key from the environment or the stack's env file, or "".
func Get(key string) string {
	if v, ok := os.LookupEnv(key); ok {
		return v
	}
	return fileValues()[key]
}

var (
	loadOnce sync.Once
	loaded   map[string]string
	loadErr  error
)

func fileValues() map[string]string {
	loadOnce.Do(func() {
		loaded = map[string]string{}
		path := envFilePath()
		if path == "" {
			return
		}
		if _, err := os.Stat(path); err != nil {
			return // no stack env file: the packages' loopback defaults apply
		}
		if vals, err := envfile.Load(path); err != nil {
			loadErr = err
		} else {
			loaded = vals
		}
	})
	return loaded
}

// EnvFile is the path of the stack's env file: $BACKFLOW_STACK_DIR/env, or <repo>/.stack/env.
func EnvFile() string { return envFilePath() }

func envFilePath() string {
	if dir := os.Getenv("BACKFLOW_STACK_DIR"); dir != "" {
		return filepath.Join(dir, "env")
	}
	if dir, ok := moduleRoot(); ok {
		return filepath.Join(dir, ".stack", "env")
	}
	return ""
}
