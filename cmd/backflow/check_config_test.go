package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/backflowhq/backflow/pipelines"
)

// runCLIErr runs the command line and returns the exit code, stdout and stderr.
func runCLIErr(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRootCmd()
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	return classify(root.ExecuteContext(context.Background())), out.String(), errOut.String()
}

// addressVars give every system an address (they have no default).
var addressVars = map[string]string{"BACKFLOW_KAFKA_BROKERS": "kafka-1:9092", "BACKFLOW_REGISTRY_URL": "http://registry:8081",
	"BACKFLOW_CLICKHOUSE_ADDR": "clickhouse:9000", "BACKFLOW_REDIS_ADDR": "redis:6379", "BACKFLOW_SENSITIVE_WORDS_URL": "http://sensitive-words:8090"}

// TestCheckConfig is the check-config table: exit 0 on a valid file (listing where the
// non-default keys came from, never a secret), exit 2 with every problem on stderr, each with
// its key path.
func TestCheckConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pw := write("pw", "hunter2\n")
	tests := []struct {
		name     string
		args     []string
		env      map[string]string
		code     int
		stdout   []string
		stderr   []string
		problems int
		bare     bool // no address variables
	}{
		{name: "defaults, with the addresses", args: nil, code: exitOK, stdout: []string{"configuration is valid (no file); stages: ingest, sink-clickhouse, sink-features"}},
		{
			// Regression: with no address given anywhere, check-config said valid and the
			// stages then quietly used the local stack's loopback addresses.
			name: "no addresses", bare: true, code: exitUsage, problems: 5,
			stderr: []string{"kafka.brokers: not set: give BACKFLOW_KAFKA_BROKERS or kafka.brokers in --config (the local stack's addresses: --env-file .stack/env)",
				"registry.url: not set", "clickhouse.addr: not set", "redis.addr: not set", "sensitive_words.url: not set"},
		},
		{
			name: "only what its stages need", bare: true, args: []string{"--config", write("ch.yaml", "stages: [sink-clickhouse]\nkafka: {brokers: [k:9092]}\nregistry: {url: \"http://r:8081\"}\nclickhouse: {addr: \"ch:9000\"}\n")},
			code: exitOK, stdout: []string{"stages: sink-clickhouse", "clickhouse.addr", "from file"},
		},
		{name: "the example file", args: []string{"--config", "../../deploy/config.example.yaml"}, code: exitOK, stdout: []string{"configuration is valid", "sink_features.storage_dir", "from file"}},
		{
			name: "a valid file with a secret file and a variable",
			args: []string{"--config", write("ok.yaml", "stages: [ingest]\nclickhouse: {password_file: "+pw+"}\n")},
			env:  map[string]string{"BACKFLOW_INGEST_BATCH_SIZE": "50"},
			code: exitOK, stdout: []string{"stages: ingest", "ingest.batch_size", "from BACKFLOW_INGEST_BATCH_SIZE", "clickhouse.password_file"},
		},
		{
			name:     "unknown keys and an inline secret, all reported",
			args:     []string{"--config", write("bad.yaml", "kafka: {brokerz: [a:1]}\nclickhouse: {password: hunter2}\ningest: {batch_size: -3}\nnope: 1\n")},
			code:     exitUsage,
			stderr:   []string{"kafka.brokerz (line 1): unknown key", "clickhouse.password (line 2): secrets are never read from the config file", "ingest.batch_size (line 3): -3, want more than 0", "nope (line 4): unknown key"},
			problems: 4,
		},
		{
			// Regression: a tab on line 3 was reported at line 2 of "(file)", after five
			// "not set" problems that were only guesses about a file not read.
			name: "a YAML syntax error comes alone, at the file and line", bare: true,
			args: []string{"--config", write("tab.yaml", "log:\n  level: info\n\tformat: text\n")},
			code: exitUsage, problems: 1, stderr: []string{filepath.Join(dir, "tab.yaml") + " (line 3): not valid YAML: a tab in the indentation"},
		},
		{
			name: "an unclosed [ on line 6", bare: true,
			args: []string{"--config", write("bracket.yaml", "kafka:\n  brokers: [a:1]\nlog:\n  level: info\nmetrics:\n  lag_groups: [a, b\n")},
			code: exitUsage, problems: 1, stderr: []string{filepath.Join(dir, "bracket.yaml") + " (line 6): not valid YAML: "},
		},
		{
			// Regression: --offline ignored --env-file without a word, then suggested it for
			// the addresses it did not read.
			name: "--offline reads the variables of --env-file, and no others", bare: true,
			args: []string{"--offline", "--config", write("offline.yaml", "stages: [ingest]\n"), "--env-file", write("deployed.env",
				"BACKFLOW_KAFKA_BROKERS=k:9092\nBACKFLOW_REGISTRY_URL=http://r:8081\nBACKFLOW_SENSITIVE_WORDS_URL=http://s:8090\nBACKFLOW_INGEST_BATCH_SIZE=7\n")},
			env:  map[string]string{"BACKFLOW_INGEST_POLICY": "nonsense"}, // the shell's: not read
			code: exitOK, stdout: []string{"configuration is valid (" + filepath.Join(dir, "offline.yaml") + ", offline, with the variables of " + filepath.Join(dir, "deployed.env") + ")",
				"ingest.batch_size", "from BACKFLOW_INGEST_BATCH_SIZE"},
		},
		{
			name: "an unknown key gets the key meant; the DLQ topic clash names its key and line",
			args: []string{"--config", write("meant.yaml", "kafka:\n  broker: [a:1]\nsink_clickhouse:\n  topic: t\n  dlq_topic: t\n")},
			code: exitUsage, problems: 2, stderr: []string{"kafka.broker (line 2): unknown key; did you mean brokers?",
				`sink_clickhouse.dlq_topic (line 5): clickhouse sink: dlq topic: "t" is also its topic`},
		},
		{name: "a missing file", args: []string{"--config", filepath.Join(dir, "missing.yaml")}, code: exitUsage, stderr: []string{"--config: open"}, problems: 1},
		{name: "a bad variable", env: map[string]string{"BACKFLOW_METRICS_ADDR": "nowhere"}, code: exitUsage, stderr: []string{`metrics.addr (BACKFLOW_METRICS_ADDR): "nowhere" is not host:port`}, problems: 1},
		{name: "extra arguments", args: []string{"x"}, code: exitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range addressVars {
				if tt.bare {
					v = "" // empty is not set
				}
				t.Setenv(k, v)
			}
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			code, out, errOut := runCLIErr(t, append([]string{"check-config"}, tt.args...)...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, out, errOut)
			}
			for _, w := range tt.stdout {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tt.stderr {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
			if tt.problems > 0 && !strings.Contains(errOut, fmt.Sprintf("%d problem(s)", tt.problems)) {
				t.Errorf("stderr does not count %d problems:\n%s", tt.problems, errOut)
			}
			if strings.Contains(out+errOut, "hunter2") {
				t.Errorf("a secret was printed")
			}
		})
	}
}

func TestCheckConfigPrintsTheReference(t *testing.T) {
	code, out, _ := runCLIErr(t, "check-config", "--print-example")
	if code != exitOK || out != string(pipelines.ExampleYAML()) {
		t.Fatalf("--print-example: exit %d, output differs from ExampleYAML", code)
	}
	code, out, _ = runCLIErr(t, "check-config", "--print-reference")
	if code != exitOK || out != pipelines.ReferenceMarkdown() {
		t.Fatalf("--print-reference: exit %d", code)
	}
}

// TestRunHelpAndUsage: run --help explains stages, endpoints and exit codes; bad flags and
// bad stage names are usage errors (2) before anything starts; every stage command takes
// --metrics-addr and --config.
func TestRunHelpAndUsage(t *testing.T) {
	code, out := runCLI(t, "run", "--help")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"--stages", "--config", "--metrics-addr", "--shutdown-timeout", "--log-format", "/readyz", "/healthz", "/metrics",
		"Exit codes", "3 the stages did not stop within shutdown_timeout", "127.0.0.1:9464"} {
		if !strings.Contains(out, want) {
			t.Errorf("run --help does not mention %q", want)
		}
	}
	for _, c := range []string{"ingest", "sink-clickhouse", "sink-features"} {
		_, out := runCLI(t, c, "--help")
		for _, want := range []string{"--metrics-addr", "--config", "--log-format", "--shutdown-timeout"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s --help does not mention %q", c, want)
			}
		}
	}
	for _, args := range [][]string{
		{"run", "--stages", "ingest,bogus"},
		{"run", "--shutdown-timeout", "soon"},
		{"run", "--log-format", "xml"},
		{"run", "--metrics-addr", "nowhere"},
		{"run", "extra"},
		{"ingest", "--batch-size", "0"},
		{"ingest", "--policy", "maybe"},
		{"sink-features", "--request-ttl", "-1s"},
	} {
		if code, _, _ := runCLIErr(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}
}
