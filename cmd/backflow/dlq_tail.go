package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

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
Ctrl-C (or SIGTERM) or, with --limit N, until it has printed N entries. Once it has the ends,
it says on stderr what it waits for (the topic, its partitions and offsets, the filters), so an
idle tail is not mistaken for a hung one. Partitions added while it runs are not followed. A
topic that does not exist is an error (exit 1).`,
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
			waiting := func(ends map[int32]int64) { fmt.Fprintln(cmd.ErrOrStderr(), f.waiting(ends)) }
			return dlq.Follow(ctx, cfg.Kafka, f.topic, waiting, func(r *kgo.Record) error {
				// The rest of a fetch still arrives after the cancel: --limit is exact.
				if f.limit > 0 && shown >= f.limit {
					return nil
				}
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

// waiting is the line tail prints once it knows where it starts: what it waits for.
func (f *dlqFilter) waiting(ends map[int32]int64) string {
	parts := slices.Sorted(maps.Keys(ends))
	at := make([]string, len(parts))
	for i, p := range parts {
		at[i] = fmt.Sprintf("%d:%d", p, ends[p])
	}
	s := fmt.Sprintf("waiting for new entries in %s (%d partition(s), from offsets %s)", f.topic, len(parts), strings.Join(at, " "))
	if f.class != "" {
		s += ", of class " + f.class
	}
	if f.originTopic != "" {
		s += ", from origin topic " + f.originTopic
	}
	if f.limit > 0 {
		s += fmt.Sprintf("; stops after %d", f.limit)
	}
	return s + "; Ctrl-C stops"
}
