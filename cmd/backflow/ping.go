package main

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/backflowhq/backflow/pipelines"
)

func newPingCmd() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "ping",
		Short: "Ask Kafka, the registry, ClickHouse, Redis and the sensitive-word service for a real answer",
		Long: `ping makes one real request to each system backflow depends on (Kafka metadata, the
registry's subject list, ClickHouse's server version, Redis INFO, one text checked by the
sensitive-word service) and prints a table of what answered. It exits 1 if any system did not answer within --timeout.`,
		Example: `  backflow ping --env-file .stack/env
  BACKFLOW_KAFKA_BROKERS=kafka-1:9092 backflow ping --timeout 5s`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if timeout <= 0 {
				return fmt.Errorf("%w: --timeout must be positive, got %v", errUsage, timeout)
			}
			cfg, err := loadConfig()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			results := pipelines.Check(ctx, cfg)
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SYSTEM\tADDRESS\tSTATE\tDETAIL\tTOOK")
			failed := 0
			for _, r := range results {
				state, detail := "ok", r.Detail
				if r.Err != nil {
					state, detail = "DOWN", r.Err.Error()
					if errors.Is(r.Err, pipelines.ErrMisaddressed) { // answering, but not as itself
						state = "MISADDRESSED"
					}
					failed++
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.System, r.Address, state, detail, r.Took.Round(time.Millisecond))
			}
			tw.Flush()
			if failed > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "backflow: %d of %d systems did not answer\n", failed, len(results))
				return errFound
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Second, "how long to wait for all answers")
	return cmd
}
