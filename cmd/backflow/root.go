package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/backflowhq/backflow/internal/conf"
	"github.com/backflowhq/backflow/internal/envfile"
	"github.com/backflowhq/backflow/pipelines"
)

// Exit codes.
const (
	exitOK              = 0
	exitFailure         = 1 // the command ran and found a problem (a service down, a check failed, a stage failed)
	exitUsage           = 2 // bad flags, arguments or configuration
	exitShutdownTimeout = 3 // run and the stage commands: the stages did not stop within shutdown_timeout
)

// errUsage marks errors that are the caller's to fix; they exit with exitUsage.
var errUsage = errors.New("usage")

type rootOptions struct {
	envFile  string
	profiles profiles
}

// configPath is the --config flag every command shares: the YAML config file.
var configPath string

func newRootCmd() *cobra.Command {
	root, _ := newRoot()
	return root
}

// newRoot returns the root command and the options its persistent flags fill in.
func newRoot() (*cobra.Command, *rootOptions) {
	opts := &rootOptions{}
	root := &cobra.Command{
		Use:   "backflow",
		Short: "Stream AI inference results and gateway logs from Kafka into ClickHouse and a feature store",
		Long: `backflow consumes the Kafka topics model-inference-result and gateway-log (Avro in the
Confluent wire format), dedupes by requestId, screens text with the sensitive-word service, and
sinks the results to ClickHouse and to Redis in Feast's online-store layout. Bad records go to a
dead-letter topic; outages of a dependency are retried, never dropped.

Where to start:
  backflow ping --env-file .stack/env          is every system answering? (the local stack's addresses)
  backflow migrate --env-file .stack/env       create or update the ClickHouse tables
  backflow run --env-file .stack/env           every stage in one process, until SIGTERM
  backflow groups --env-file .stack/env        consumer groups and their lag
  backflow dlq list --env-file .stack/env      what was dead-lettered, and why

The services' addresses have no default: give them as BACKFLOW_* variables, in --config, or
with --env-file (deploy/local/stack up writes .stack/env for the local stack). Secrets come only
from variables or the files they name. 'backflow help environment' lists every variable;
'backflow check-config --print-example' every config key.

Exit codes: 0 success, 1 the command found a problem, 2 bad usage or configuration, 3 a stage
command's stages did not stop within shutdown_timeout after SIGTERM/SIGINT.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.applyEnvFile(); err != nil {
				return err
			}
			if cmd.Annotations[annotationLogs] == "" { // the stage commands log it instead
				for _, u := range pipelines.UnknownVariables(os.Environ()) {
					fmt.Fprintln(cmd.ErrOrStderr(), "backflow: warning:", unknownVariable(u))
				}
			}
			return opts.profiles.start()
		},
	}
	root.PersistentFlags().StringVar(&opts.envFile, "env-file", "",
		"read KEY=VALUE settings from this file (e.g. .stack/env); variables already set in the environment win")
	root.PersistentFlags().StringVar(&configPath, "config", "",
		"YAML config file (every key: backflow check-config --print-example); BACKFLOW_* variables and flags given win over it")
	opts.profiles.flags(root.PersistentFlags())
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return fmt.Errorf("%w: %w", errUsage, err) })
	root.AddCommand(newVersionCmd(), newPingCmd(), newDLQCmd(), newIngestCmd(), newMigrateCmd(), newSinkClickHouseCmd(), newSinkFeaturesCmd(),
		newReplayCmd(), newOffsetsCmd(), newGroupsCmd(), newDashboardCmd(), newRunCmd(), newCheckConfigCmd(), newEnvironmentTopic())
	return root, opts
}

// annotationLogs marks the commands that run stages: they report through their structured
// logs, not with plain lines on stderr.
const annotationLogs = "backflow/structured-logs"

// unknownVariable says that u is not read, and what was probably meant.
func unknownVariable(u conf.UnknownVar) string {
	msg := u.Name + " is set but backflow reads no such variable"
	if u.Nearest != "" {
		msg += "; did you mean " + u.Nearest + "?"
	}
	return msg
}

// newEnvironmentTopic is `backflow help environment`: the connection variables.
func newEnvironmentTopic() *cobra.Command {
	return &cobra.Command{
		Use:   "environment",
		Short: "The BACKFLOW_* variables: each system's address, credentials and TLS",
		Long: `Connection settings come from environment variables (or --config, or --env-file FILE, whose
KEY=VALUE lines fill in the variables not already set). The services' addresses have no
default: 'deploy/local/stack up' writes the local stack's to .stack/env, so --env-file
.stack/env reaches it. Secrets (marked *) come only from variables or from the file the *_FILE
twin names, never from flags, so they do not show in ps.

` + envHelp() + `
Every other config key has a variable too (sink_clickhouse.batch_rows is
BACKFLOW_SINK_CLICKHOUSE_BATCH_ROWS): 'backflow check-config --print-example' lists them.

Every stage first asks each system it needs for one answer. If one refuses our credentials or
the TLS handshake fails, the stage exits 1 at once, naming the system and the variables to check;
a system that is only down is waited for. Once running, a refused request is retried like an
outage: credentials may be rotated, and records are never dead-lettered for it.`,
	}
}

// envHelp lists the connection variables with their defaults, from pipelines.EnvVars.
func envHelp() string {
	var b strings.Builder
	for _, v := range pipelines.EnvVars() {
		name := v.Name
		if v.Secret {
			name += " *"
		}
		fmt.Fprintf(&b, "  %s\n      %s (default: %s)\n", name, v.Doc, v.Default)
	}
	return b.String()
}

// applyEnvFile copies the file's settings into the environment where not already set.
func (o *rootOptions) applyEnvFile() error {
	if o.envFile == "" {
		return nil
	}
	if err := envfile.Apply(o.envFile); err != nil {
		return fmt.Errorf("%w: --env-file: %w", errUsage, err)
	}
	return nil
}

// loadConfig reads the connection settings from --config and the environment; a bad setting,
// or no address for one of the systems the command talks to, is a usage error.
func loadConfig(systems ...string) (pipelines.Conns, error) {
	c, err := pipelines.LoadConns(configPath, os.Getenv)
	if err == nil {
		err = c.Require(systems...)
	}
	if err != nil {
		return c, fmt.Errorf("%w: configuration: %w", errUsage, err)
	}
	return c, nil
}

func execute(ctx context.Context, args []string) int {
	root, opts := newRoot()
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if perr := opts.profiles.stop(); perr != nil && err == nil {
		err = perr
	}
	if err != nil && !errors.Is(err, errFound) {
		fmt.Fprintln(os.Stderr, "backflow:", err)
		if hint := hintFor(err); hint != "" {
			fmt.Fprintln(os.Stderr, "backflow:", hint)
		}
	}
	return classify(err)
}

// classify maps a command's error to the process exit code.
func classify(err error) int {
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errUsage) || errors.Is(err, pipelines.ErrConfig) || strings.HasPrefix(err.Error(), "unknown command"):
		return exitUsage
	case errors.Is(err, pipelines.ErrShutdownTimeout):
		return exitShutdownTimeout
	default:
		return exitFailure
	}
}

// errFound means the command already reported what it found; nothing more to print.
var errFound = errors.New("problems found")

// usageArgs marks a cobra argument validator's errors as usage errors.
func usageArgs(v cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := v(cmd, args); err != nil {
			return fmt.Errorf("%w: %w", errUsage, err)
		}
		return nil
	}
}

// hintFor says what to do about an error whose own words do not: a refused or unanswered
// connection names no setting.
func hintFor(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return "nothing answered at " + op.Addr.String() + ": is the service up, and its address variable right? 'backflow ping' checks every system"
	}
	return ""
}
