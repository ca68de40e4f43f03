package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/backflowhq/backflow/internal/conf"
	"github.com/backflowhq/backflow/pipelines"
)

func newCheckConfigCmd() *cobra.Command {
	var example, reference, offline bool
	cmd := &cobra.Command{
		Use:   "check-config",
		Short: "Check a config file (and the BACKFLOW_* variables) without starting anything",
		Long: `check-config reads the configuration backflow run would use: the defaults, --config, then the
BACKFLOW_* variables. It reports every problem at once, each with its key path (and the variable
it came from, or its line in the file): unknown keys, values of the wrong form, values a stage
refuses, secrets written inline, secret files it cannot read. It contacts no service (backflow ping
does that) but the schema registry, when streams are declared: each stream is checked against its
subject's current schema, and a field path that is missing or does not fit (a dedupe key that is
nullable, an event time that is no timestamp) is reported with its key and line.

--offline checks the file alone, as it would be checked where it is deployed: no BACKFLOW_*
variable is read and the secret files it names are not opened (they exist in the pod, not on
the machine that checks a ConfigMap), and the streams are not checked against the registry.
Everything else is checked.

Exit codes: 0 the configuration is valid; 2 it is not (or bad usage).

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
			load := func() (pipelines.Loaded, error) { return pipelines.Load(configPath, nil) }
			if offline {
				if configPath == "" {
					return fmt.Errorf("%w: --offline checks a file: give --config", errUsage)
				}
				load = func() (pipelines.Loaded, error) { return pipelines.LoadOffline(configPath) }
			}
			l, err := load()
			if err != nil {
				var ce conf.Errors
				if errors.As(err, &ce) {
					for _, e := range ce {
						fmt.Fprintln(cmd.ErrOrStderr(), e.Error())
					}
					fmt.Fprintf(cmd.ErrOrStderr(), "%d problem(s) in the configuration\n", len(ce))
					return fmt.Errorf("%w: %w", errUsage, errFound)
				}
				return fmt.Errorf("%w: %w", errUsage, err)
			}
			if !offline && len(l.Config.Streams) > 0 {
				ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
				defer cancel()
				if ce := pipelines.CheckStreams(ctx, l, configPath); len(ce) > 0 {
					for _, e := range ce {
						fmt.Fprintln(cmd.ErrOrStderr(), e.Error())
					}
					fmt.Fprintf(cmd.ErrOrStderr(), "%d problem(s) in the streams, checked against the registry\n", len(ce))
					return fmt.Errorf("%w: %w", errUsage, errFound)
				}
			}
			src := configPath
			if src == "" {
				src = "no file"
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
