package pipelines

import (
	"errors"
	"slices"
	"strings"

	"github.com/backflowhq/backflow/internal/conf"
)

// Load reads the configuration: Defaults, then the YAML file at path (none when path is ""),
// then every BACKFLOW_* variable getenv returns (os.Getenv when nil), then overrides. It checks
// everything and returns every problem at once as conf.Errors, each with its key path.
func Load(path string, getenv func(string) string, overrides ...Override) (Loaded, error) {
	var l Loaded
	src, err := schema.Load(&l.Config, path, getenv, overrides...)
	l.Sources = src
	return l, err
}

// LoadConns is Load for a command that is not a stage: the connection settings of the file
// and the variables, where an address not given is no error (the command Requires the
// systems it talks to).
func LoadConns(path string, getenv func(string) string) (Conns, error) {
	c, err := LoadCommand(path, getenv)
	return c.Conns, err
}

// LoadCommand is LoadConns with the rest of the configuration: for a command that reads more
// than the connections (migrate reads the declared streams, dashboard its auth), with the
// flags a command was given as overrides.
func LoadCommand(path string, getenv func(string) string, overrides ...Override) (Config, error) {
	l, err := Load(path, getenv, overrides...)
	var es conf.Errors
	if !errors.As(err, &es) {
		return l.Config, err
	}
	var kept conf.Errors
	for _, e := range es {
		if !errors.Is(e, conf.ErrNotSet) {
			kept = append(kept, e)
		}
	}
	if len(kept) == 0 {
		return l.Config, nil
	}
	return l.Config, kept
}

// LoadOffline checks the config file at path alone, as check-config --offline does: no
// variable of the environment is read and no secret file is opened
// (conf.Schema.LoadOffline). getenv, when not nil, gives the variables of where the file is
// deployed (check-config --env-file): those are read.
func LoadOffline(path string, getenv func(string) string) (Loaded, error) {
	var l Loaded
	src, err := schema.LoadOffline(&l.Config, path, getenv)
	l.Sources = src
	return l, err
}

// Loaded is a checked configuration.
type Loaded struct {
	// Config holds every key's value after the file, environment and overrides, secrets given
	// in variables included: its Conns are ready for the packages.
	Config Config
	// Sources says where each key's value came from: "default", "file", a variable or a flag.
	Sources conf.Sources
}

// ErrConfig is what every configuration error matches (errors.Is): the caller's to fix.
var ErrConfig = conf.ErrInvalid

// Override is a value given on the command line for a key.
type Override = conf.Override

// FromEnv is LoadConns with no file: the defaults, then the BACKFLOW_* variables getenv returns
// (os.Getenv in production). All problems are reported at once as conf.Errors, each naming its
// key and variable; no error shows a secret. An address not given is no error here: the caller
// Requires the systems it talks to.
func FromEnv(getenv func(string) string) (Conns, error) { return LoadConns("", getenv) }

// EnvVar documents one variable of a connection key; `backflow --help` lists them.
type EnvVar struct {
	Name    string
	Default string // what applies when unset
	Doc     string
	Secret  bool // never logged or printed; prefer the key naming its file
}

// EnvVars lists the variables of the connection keys (the sections of Conns), in key order,
// each secret's own variable before the key naming its file.
func EnvVars() []EnvVar {
	var out []EnvVar
	for _, k := range schema.Keys() {
		section, _, _ := strings.Cut(k.Path, ".")
		if !slices.Contains(connSections, section) {
			continue
		}
		if k.Secret != "" {
			out = append(out, EnvVar{Name: k.Secret, Default: "none", Doc: k.SecretDoc, Secret: true})
		}
		d := k.Default
		switch {
		case k.Example != "":
			d = "none; required where used, e.g. " + k.Example
		case d == "":
			d = "none"
		}
		out = append(out, EnvVar{Name: k.Env, Default: d, Doc: k.Doc})
	}
	return out
}

// connSections are the sections of Conns.
var connSections = func() []string {
	var out []string
	for _, k := range conf.New[Conns]("").Keys() {
		if s, _, _ := strings.Cut(k.Path, "."); !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}()

// Key describes one key for the command line: flags are made from keys.
type Key = conf.Key

// EnvName is the variable of a key path: sink_clickhouse.batch_rows is
// BACKFLOW_SINK_CLICKHOUSE_BATCH_ROWS.
func EnvName(path string) string { return schema.EnvName(path) }

// Keys lists every key path, in the order of the config reference.
func Keys() []string {
	var out []string
	for _, k := range schema.Keys() {
		out = append(out, k.Path)
	}
	return out
}

// KeysUnder lists the keys of a section (e.g. "ingest"), or every top-level key for "".
func KeysUnder(section string) []Key {
	var out []Key
	for _, k := range schema.Keys() {
		sec, _, nested := strings.Cut(k.Path, ".")
		if (section == "" && !nested) || (section != "" && sec == section && nested) {
			out = append(out, k)
		}
	}
	return out
}

// KeyInfo describes the key at path.
func KeyInfo(path string) (Key, bool) { return schema.Key(path) }

// LocalStackVariables are the variables of the local stack (deploy/local/stack, the demos, the
// Makefile) besides backflow's own: those its env files (.stack/env, .stack/secure/env,
// .stack/cluster/env) carry for its tools and tests, and the settings its usage documents
// (ports, folders, timeouts). backflow does not read them, and does not warn about them either;
// TestStackVariablesRaiseNoWarning keeps the list complete.
var LocalStackVariables = []string{
	// written into the env files
	"BACKFLOW_CLICKHOUSE_HTTP_ADDR", "BACKFLOW_KAFKA_TOOL", "BACKFLOW_KAFKA_TOOL_CONFIG",
	"BACKFLOW_CLICKHOUSE_CLUSTER_ADDRS", "BACKFLOW_ZOOKEEPER_ADDR", "BACKFLOW_CLUSTER_SHARED_ENV",
	// the stack's settings
	"BACKFLOW_STACK_DIR", "BACKFLOW_READY_TIMEOUT", "BACKFLOW_KAFKA_HEAP", "BACKFLOW_CHROMIUM",
	"BACKFLOW_KAFKA_PORT", "BACKFLOW_KAFKA_CONTROLLER_PORT", "BACKFLOW_REGISTRY_PORT", "BACKFLOW_CLICKHOUSE_PORT",
	"BACKFLOW_CLICKHOUSE_HTTP_PORT", "BACKFLOW_CLICKHOUSE_INTERSERVER_PORT", "BACKFLOW_REDIS_PORT",
	"BACKFLOW_SENSITIVE_WORDS_PORT", "BACKFLOW_PROMETHEUS_PORT", "BACKFLOW_PROMETHEUS_BACKFLOW_TARGETS", "BACKFLOW_TARGETS",
	"BACKFLOW_SECURE_KAFKA_PORT", "BACKFLOW_SECURE_KAFKA_CONTROLLER_PORT", "BACKFLOW_SECURE_REGISTRY_PORT",
	"BACKFLOW_SECURE_REGISTRY_BACKEND_PORT", "BACKFLOW_SECURE_CLICKHOUSE_PORT", "BACKFLOW_SECURE_REDIS_PORT",
	"BACKFLOW_SECURE_SENSITIVE_PORT", "BACKFLOW_SECURE_OAUTH_PORT", "BACKFLOW_OAUTH_TOKEN_URL",
	"BACKFLOW_CLUSTER_NAME", "BACKFLOW_CLUSTER_CONVERGE_TIMEOUT", "BACKFLOW_CLUSTER_ZOOKEEPER_PORT",
	"BACKFLOW_CLUSTER_CLICKHOUSE_PORT", "BACKFLOW_CLUSTER_CLICKHOUSE_HTTP_PORT", "BACKFLOW_CLUSTER_CLICKHOUSE_INTERSERVER_PORT",
	"BACKFLOW_CLUSTER_REDIS_PORT", "BACKFLOW_CLUSTER_METRICS_PORT",
	// the demos' settings
	"BACKFLOW_DASHBOARD_PORT", "BACKFLOW_METRICS_PORT", "BACKFLOW_FEAST_REPO_DIR",
}

// UnknownVariables returns the BACKFLOW_* variables of environ (os.Environ()) that no key
// reads, each with the nearest name that is read: a misspelled variable is otherwise ignored
// without a word.
func UnknownVariables(environ []string) []conf.UnknownVar {
	return schema.UnknownEnv(environ, LocalStackVariables...)
}
