package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/internal/dlq"
	"github.com/backflowhq/backflow/pipelines"
)

func newDLQTailCmd() *cobra.Command {
	var f dlqFilter
	cmd := &cobra.Command{
		Use:   "tail",
		Short: "Print new dead-letter entries as they arrive, until Ctrl-C",
		Long: `tail starts at the current end of every partition of the dead-letter topic and prints each
entry written after that, in the same columns as list (or as JSON lines with -o json), until
Ctrl-C (or SIGTERM) or, with --limit N, until it has printed N entries. Partitions added while it runs are not
followed. A topic that does not exist is an error (exit 1).`,
		Example: `  backflow dlq tail --env-file .stack/env
  backflow dlq tail --env-file .stack/env --class corrupt -o json`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.check(); err != nil {
				return err
			}
			cfg, err := loadConfig(pipelines.SystemKafka)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			p := newEntryPrinter(cmd.OutOrStdout(), f.json)
			p.eager = true
			shown := 0
			return dlq.Follow(ctx, cfg.Kafka, f.topic, func(r *kgo.Record) error {
				e, err := dlq.Decode(r)
				if err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "backflow: %s/%d/%d is not a DLQ entry: %v\n", r.Topic, r.Partition, r.Offset, err)
					return nil
				}
				if !f.match(e) {
					return nil
				}
				if err := p.print(e); err != nil {
					return err
				}
				if shown++; f.limit > 0 && shown >= f.limit {
					cancel()
				}
				return nil
			})
		},
	}
	f.addFlags(cmd)
	return cmd
}
