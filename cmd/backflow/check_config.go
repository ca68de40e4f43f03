package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/backflowhq/backflow/internal/conf"
	"github.com/backflowhq/backflow/internal/envfile"
	"github.com/backflowhq/backflow/pipelines"
)

func newCheckConfigCmd() *cobra.Command {
	var example, reference, offline bool
	cmd := &cobra.Command{
		Use:   "check-config",
		Short: "Check a config file (and the BACKFLOW_* variables) without starting anything",
		Long: `check-config reads the configuration backflow run would use: the defaults, --config, then the
BACKFLOW_* variables. It reports every problem at once, each once, with its key path (and the
variable it came from, or its line in the file): unknown keys (with the key meant), values of the
wrong form, values a stage refuses, secrets written inline, secret files it cannot read. A file
that is not YAML is one problem, at its path and the line of the fault.

It contacts one service, the schema registry, and only when streams are declared: each stream
is checked against its subject's current schema, and a field path that is missing (with the
path meant) or does not fit (a dedupe key that is nullable, an event time that is no timestamp)
is reported with its key and line. backflow ping asks every service.

--offline checks the file alone, as it would be checked where it is deployed: no BACKFLOW_*
variable of the environment is read and the secret files it names are not opened (they exist in
the pod, not on the machine that checks a ConfigMap), and the streams are not checked against
the registry. With --env-file, the variables of that file are read (the deployment's).
Everything else is checked.

Exit codes: 0 the configuration is valid; 2 it is not (or bad usage); 1 the registry did not
answer, so the streams were not checked (--offline skips that check).

--print-example prints every key with its default and meaning as a YAML file (what
deploy/config.example.yaml holds); --print-reference prints the same as a Markdown table.`,
		Example: `  backflow check-config --config /etc/backflow/backflow.yaml
  backflow check-config --offline --config <(kubectl get cm backflow-config -o jsonpath='{.data.backflow\.yaml}')
  backflow check-config --print-example > backflow.yaml`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			if example {
				_, err := out.Write(pipelines.ExampleYAML())
				return err
			}
			if reference {
				_, err := fmt.Fprint(out, pipelines.ReferenceMarkdown())
				return err
			}
			envFile := cmd.Flag("env-file").Value.String()
			l, found, err := loadToCheck(offline, envFile)
			if err != nil {
				return err
			}
			var unreachable error
			if !offline && !slices.ContainsFunc(found, func(e *conf.Error) bool { return errors.Is(e, conf.ErrSyntax) }) {
				ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
				defer cancel()
				var more conf.Errors
				more, unreachable = pipelines.CheckStreams(ctx, l, configPath, found)
				found = append(found, more...)
			}
			stderr := cmd.ErrOrStderr()
			for _, e := range found {
				fmt.Fprintln(stderr, e.Error())
			}
			if len(found) > 0 {
				fmt.Fprintf(stderr, "%d problem(s) in the configuration\n", len(found))
			}
			if unreachable != nil {
				fmt.Fprintf(stderr, "backflow: %v\nbackflow: the streams are checked against their subjects' schemas when the registry answers; check-config --offline checks the file without it\n", unreachable)
			}
			switch {
			case len(found) > 0:
				return fmt.Errorf("%w: %w", errUsage, errFound)
			case unreachable != nil:
				return errFound // exit 1: a service did not answer; the file may be valid
			}
			src := configPath
			if src == "" {
				src = "no file"
			}
			if offline {
				src += ", offline"
				if envFile != "" {
					src += ", with the variables of " + envFile
				}
			}
			fmt.Fprintf(out, "configuration is valid (%s); stages: %s\n", src, strings.Join(l.Config.Stages, ", "))
			// What differs from the defaults, and where it came from. Secret values are never
			// shown: only the files that hold them.
			for _, k := range pipelines.Keys() {
				if s := l.Sources[k]; s != "default" {
					fmt.Fprintf(out, "  %-34s from %s\n", k, s)
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&offline, "offline", false, "check the file alone, as where it is deployed: no BACKFLOW_* variable is read and no secret file opened (e.g. a Kubernetes ConfigMap checked off-cluster)")
	cmd.Flags().BoolVar(&example, "print-example", false, "print every key with its default as YAML, and exit")
	cmd.Flags().BoolVar(&reference, "print-reference", false, "print every key with its default as a Markdown table, and exit")
	return cmd
}

// loadToCheck loads the configuration as check-config checks it: with the environment, or
// --offline the file alone (and the variables of --env-file, when given: where it is deployed,
// those are the environment). The problems found are returned as conf.Errors; err is for what
// stops the check (a usage error, an env file that cannot be read).
func loadToCheck(offline bool, envFile string) (pipelines.Loaded, conf.Errors, error) {
	var (
		l   pipelines.Loaded
		err error
	)
	switch {
	case !offline:
		l, err = pipelines.Load(configPath, nil)
	case configPath == "":
		return l, nil, fmt.Errorf("%w: --offline checks a file: give --config", errUsage)
	case envFile != "":
		vars, rerr := envfile.Load(envFile)
		if rerr != nil {
			return l, nil, fmt.Errorf("%w: --env-file: %w", errUsage, rerr)
		}
		l, err = pipelines.LoadOffline(configPath, func(k string) string { return vars[k] })
	default:
		l, err = pipelines.LoadOffline(configPath, nil)
	}
	var found conf.Errors
	if err != nil && !errors.As(err, &found) {
		return l, nil, fmt.Errorf("%w: %w", errUsage, err)
	}
	return l, found, nil
}
