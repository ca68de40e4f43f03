package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/backflowhq/backflow/internal/envfile"
	"github.com/backflowhq/backflow/pipelines"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1 // the command ran and found a problem (a service down, a check failed)
	exitUsage   = 2 // bad flags, arguments or configuration
)

// errUsage marks errors that are the caller's to fix; they exit with exitUsage.
var errUsage = errors.New("usage")

type rootOptions struct {
	envFile  string
	profiles profiles
}

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

Connection settings come from environment variables (secrets only from there, never flags):
  BACKFLOW_KAFKA_BROKERS        comma-separated host:port      (default 127.0.0.1:19092)
  BACKFLOW_REGISTRY_URL         Confluent-API registry base    (default http://127.0.0.1:18081/apis/ccompat/v7)
  BACKFLOW_REGISTRY_USERNAME, BACKFLOW_REGISTRY_PASSWORD       basic auth (optional)
  BACKFLOW_CLICKHOUSE_ADDR      native protocol host:port      (default 127.0.0.1:19000)
  BACKFLOW_CLICKHOUSE_DATABASE, BACKFLOW_CLICKHOUSE_USER, BACKFLOW_CLICKHOUSE_PASSWORD
  BACKFLOW_REDIS_ADDR           host:port                      (default 127.0.0.1:16379)
  BACKFLOW_REDIS_DB, BACKFLOW_REDIS_USERNAME, BACKFLOW_REDIS_PASSWORD
  BACKFLOW_SENSITIVE_URL        sensitive-word service         (default http://127.0.0.1:18090)
  BACKFLOW_SENSITIVE_TOKEN      its bearer token (optional)
The defaults are the local stack started by deploy/local/stack; --env-file .stack/env reads the
file that stack writes.

Exit codes: 0 success, 1 the command found a problem, 2 bad usage or configuration.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.applyEnvFile(); err != nil {
				return err
			}
			return opts.profiles.start()
		},
	}
	root.PersistentFlags().StringVar(&opts.envFile, "env-file", "",
		"read KEY=VALUE settings from this file (e.g. .stack/env); variables already set in the environment win")
	opts.profiles.flags(root.PersistentFlags())
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return fmt.Errorf("%w: %w", errUsage, err) })
	root.AddCommand(newVersionCmd(), newPingCmd(), newLoadgenCmd(), newDLQCmd(), newIngestCmd(), newMigrateCmd(), newSinkClickHouseCmd(), newSinkFeaturesCmd())
	return root, opts
}

// applyEnvFile copies the file's settings into the environment where not already set.
func (o *rootOptions) applyEnvFile() error {
	if o.envFile == "" {
		return nil
	}
	vals, err := envfile.Load(o.envFile)
	if err != nil {
		return fmt.Errorf("%w: --env-file: %w", errUsage, err)
	}
	for k, v := range vals {
		if _, set := os.LookupEnv(k); !set {
			os.Setenv(k, v)
		}
	}
	return nil
}

// loadConfig reads the connection settings; a bad setting is a usage error.
func loadConfig() (pipelines.Config, error) {
	cfg, err := pipelines.FromEnv(os.Getenv)
	if err != nil {
		return cfg, fmt.Errorf("%w: configuration: %w", errUsage, err)
	}
	return cfg, nil
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
	}
	return classify(err)
}

// classify maps a command's error to the process exit code.
func classify(err error) int {
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errUsage) || strings.HasPrefix(err.Error(), "unknown command"):
		return exitUsage
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
