package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/backflowhq/backflow/pipelines"
)

func newPingCmd() *cobra.Command {
	var timeout time.Duration
	var format string
	cmd := &cobra.Command{
		Use:   "ping",
		Short: "Ask Kafka, the registry, ClickHouse, Redis and the sensitive-word service for a real answer",
		Long: `ping makes one real request to each system backflow depends on (Kafka metadata, the
registry's subject list, ClickHouse's server version, Redis INFO, one text checked by the
sensitive-word service) and prints a table of what answered (-o json or -o yaml: the same rows
for scripts). A system whose address is given nowhere shows as NOT-SET and is not asked. One
that answers as another kind of service shows as MISADDRESSED, naming the variable to fix: a
registry URL without its API path, ClickHouse at its HTTP port, Kafka or Redis at another
service's port (a check that has not answered within 750 ms asks the address what it is).

Exit codes: 0 every system answered; 1 one did not answer within --timeout; 2 an address is not
set (for the local stack: --env-file .stack/env).`,
		Example: `  backflow ping --env-file .stack/env
  backflow ping --env-file .stack/env -o json
  BACKFLOW_KAFKA_BROKERS=kafka-1:9092 backflow ping --timeout 5s`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(format); err != nil {
				return err
			}
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
			rows := make([]pingRow, len(results))
			failed, unset := 0, 0
			for i, r := range results {
				rows[i] = pingRow{System: r.System, Address: r.Address, State: "ok", Detail: r.Detail, TookMS: r.Took.Milliseconds()}
				switch {
				case r.Err == nil:
					continue
				case errors.Is(r.Err, pipelines.ErrConfig): // no address given
					rows[i].State, unset = "NOT-SET", unset+1
				case errors.Is(r.Err, pipelines.ErrMisaddressed): // answering, but not as itself
					rows[i].State = "MISADDRESSED"
				default:
					rows[i].State = "DOWN"
				}
				rows[i].Detail = r.Err.Error()
				failed++
			}
			out := cmd.OutOrStdout()
			if format == formatTable {
				err = writeTable(out, rows)
			} else {
				err = writeDoc(out, format, rows)
			}
			if err != nil {
				return err
			}
			if down := failed - unset; down > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "backflow: %d of %d systems did not answer\n", down, len(results)-unset)
			}
			if unset > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "backflow: %d of %d systems have no address (%s)\n", unset, len(results), pipelines.LocalStackHint)
				return fmt.Errorf("%w: %w", errUsage, errFound)
			}
			if failed > 0 {
				return errFound
			}
			return nil
		},
	}
	durationVar(cmd.Flags(), &timeout, "timeout", 10*time.Second, "how long to wait for all answers")
	addOutputFlag(cmd, &format)
	return cmd
}

// pingRow is one system's answer.
type pingRow struct {
	System  string `json:"system" yaml:"system"`
	Address string `json:"address" yaml:"address"`
	State   string `json:"state" yaml:"state"` // ok, DOWN, MISADDRESSED or NOT-SET
	Detail  string `json:"detail" yaml:"detail"`
	TookMS  int64  `json:"took_ms" yaml:"took_ms"`
}
