package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/backflowhq/backflow/internal/dlq"
	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/pipelines"
)

func newDLQCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "List, follow and re-drive the dead-letter topic",
		Long: `dlq works with the dead-letter topic, where stages put records they cannot process (not
framed, unknown schema, corrupt, invalid, oversized) with the raw key, value and headers plus
where the record came from and why it failed. Outages are retried, never dead-lettered.

  list     print the entries present now (a snapshot), then the counts per error class
  tail     print new entries as they arrive, until Ctrl-C
  redrive  re-produce selected entries to their origin topics; a dry run unless --execute

Kafka's address comes from BACKFLOW_KAFKA_BROKERS, --config or --env-file; the examples read
the local stack's, .stack/env (where the variable is set already, as in a pod, leave it out).

Error classes (--class):
` + classHelp(),
		Example: `  backflow dlq list --env-file .stack/env
  backflow dlq tail --env-file .stack/env --class unknown_schema
  backflow dlq redrive --env-file .stack/env --class unknown_schema            # dry run: what would go where
  backflow dlq redrive --env-file .stack/env --offsets 0:12,2:7 --execute`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newDLQListCmd(), newDLQTailCmd(), newDLQRedriveCmd())
	return cmd
}

// dlqFilter holds the flags list and tail share.
type dlqFilter struct {
	topic       string
	class       string
	originTopic string
	limit       int
	json        bool
	format      string
}

func (f *dlqFilter) addFlags(cmd *cobra.Command) {
	addTopicFlag(cmd, &f.topic)
	cmd.Flags().StringVar(&f.class, "class", "", "only entries of this error class (backflow dlq --help lists them)")
	cmd.Flags().StringVar(&f.originTopic, "origin-topic", "", "only entries that came from this topic")
	cmd.Flags().IntVar(&f.limit, "limit", 0, "print at most this many entries (0: no limit)")
	cmd.Flags().BoolVar(&f.json, "json", false, "print one JSON object per entry and nothing else (the same as -o json)")
	cmd.Flags().StringVarP(&f.format, "output", "o", formatTable, "output format: table, or json (one JSON object per entry and nothing else)")
}

func (f *dlqFilter) check() error {
	if f.limit < 0 {
		return fmt.Errorf("%w: --limit must be 0 or more, got %d", errUsage, f.limit)
	}
	switch f.format {
	case formatTable:
	case formatJSON:
		f.json = true
	default:
		return fmt.Errorf("%w: -o %q: dlq prints a stream of entries: want table or json (one object per line)", errUsage, f.format)
	}
	if err := checkClassFlag(f.class); err != nil {
		return err
	}
	return checkTopicFlag(f.topic)
}

// checkClassFlag refuses a --class no stage writes: it would match nothing, and say so only
// as "total 0".
func checkClassFlag(class string) error {
	if class == "" || dlq.KnownClass(class) {
		return nil
	}
	names := make([]string, 0, len(dlq.Classes()))
	for _, c := range dlq.Classes() {
		names = append(names, c.Name)
	}
	return fmt.Errorf("%w: --class %q is not an error class backflow writes; the classes: %s", errUsage, class, strings.Join(names, ", "))
}

// classHelp lists every error class with what it means, for --help.
func classHelp() string {
	var b strings.Builder
	for _, c := range dlq.Classes() {
		fmt.Fprintf(&b, "  %-22s %s\n", c.Name, c.Doc)
	}
	return strings.TrimRight(b.String(), "\n")
}

func (f *dlqFilter) match(e dlq.Entry) bool {
	return (f.class == "" || e.Class == f.class) && (f.originTopic == "" || e.Origin.Topic == f.originTopic)
}

func addTopicFlag(cmd *cobra.Command, topic *string) {
	cmd.Flags().StringVar(topic, "topic", dlq.DefaultTopic, "the dead-letter topic")
}

// kafkaFor loads the Kafka settings a dlq subcommand needs and bounds the command by timeout;
// the caller defers cancel.
func kafkaFor(cmd *cobra.Command, timeout time.Duration) (_ kafka.Conn, _ context.Context, cancel context.CancelFunc, _ error) {
	cfg, err := loadConfig(pipelines.SystemKafka)
	if err != nil {
		return kafka.Conn{}, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
	return cfg.Kafka, ctx, cancel, nil
}

func checkTopicFlag(topic string) error {
	if err := (dlq.Config{Topic: topic, Stage: "cli"}).Validate(); err != nil {
		return fmt.Errorf("%w: --topic: %q is not a valid topic name", errUsage, topic)
	}
	return nil
}
