package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/internal/dlq"
	"github.com/backflowhq/backflow/internal/kafka"
)

type redriveOptions struct {
	topic       string
	offsets     string
	class       string
	all         bool
	originTopic string
	execute     bool
	timeout     time.Duration
}

func newDLQRedriveCmd() *cobra.Command {
	var o redriveOptions
	cmd := &cobra.Command{
		Use:   "redrive (--offsets P:O[,P:O...] | --class C | --all) [--execute]",
		Short: "Re-produce dead-letter entries to their origin topics (a dry run unless --execute)",
		Long: `redrive selects entries of the dead-letter topic, as present now, and re-produces each one's
raw key, value and original headers to its origin topic and partition, in origin order, with
the headers backflow.redrive.from (<dlq topic>/<partition>/<offset>), backflow.redrive.time and
backflow.redrive.count (previous count + 1). Fix the cause first (register the schema, deploy
the fix), then re-drive: a record that fails again returns to the DLQ with a higher count.

Select with exactly one of:
  --offsets P:O,...  the entries at these DLQ partition:offset positions (as list prints them)
  --class C          every entry of error class C
  --all              every entry
--origin-topic T narrows any of them to entries that came from T.

Without --execute nothing is produced: it prints what would be re-driven and to where. With
--execute it produces synchronously through an idempotent producer (acks=all) and prints
"re-drove N record(s)". Entries whose value was truncated in the DLQ, and entries whose origin
topic or partition no longer exists, are skipped and reported. redrive does not remember earlier
runs: re-driving an entry twice produces it twice (ingest drops the second copy by requestId).

Exit codes: 0 all selected entries were (or would be) re-driven; 1 nothing selected, an entry
skipped or a produce failed; 2 bad or conflicting flags.`,
		Example: `  backflow dlq redrive --env-file .stack/env --class unknown_schema                   # dry run
  backflow dlq redrive --env-file .stack/env --class unknown_schema --execute
  backflow dlq redrive --env-file .stack/env --offsets 0:12,2:7 --execute
  backflow dlq redrive --env-file .stack/env --all --origin-topic gateway-log --execute`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	addTopicFlag(cmd, &o.topic)
	cmd.Flags().StringVar(&o.offsets, "offsets", "", "comma-separated DLQ partition:offset positions to re-drive")
	cmd.Flags().StringVar(&o.class, "class", "", "re-drive every entry of this error class")
	cmd.Flags().BoolVar(&o.all, "all", false, "re-drive every entry")
	cmd.Flags().StringVar(&o.originTopic, "origin-topic", "", "only entries that came from this topic")
	cmd.Flags().BoolVar(&o.execute, "execute", false, "produce the records (default: dry run)")
	durationVar(cmd.Flags(), &o.timeout, "timeout", 2*time.Minute, "how long reading and producing may take")
	return cmd
}

// parseOffsets reads "P:O,P:O"; duplicates collapse.
func parseOffsets(s string) (map[dlq.Pos]bool, error) {
	out := map[dlq.Pos]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		ps, offs, ok := strings.Cut(part, ":")
		p, perr := strconv.ParseInt(ps, 10, 32)
		off, oerr := strconv.ParseInt(offs, 10, 64)
		if !ok || perr != nil || oerr != nil || p < 0 || off < 0 {
			return nil, fmt.Errorf("%w: --offsets: %q is not partition:offset", errUsage, part)
		}
		out[dlq.Pos{Partition: int32(p), Offset: off}] = true
	}
	return out, nil
}

// check refuses bad or conflicting flags (exit 2) and reads --offsets.
func (o *redriveOptions) check() (map[dlq.Pos]bool, error) {
	selectors := 0
	for _, set := range []bool{o.offsets != "", o.class != "", o.all} {
		if set {
			selectors++
		}
	}
	if selectors != 1 {
		return nil, fmt.Errorf("%w: give exactly one of --offsets, --class or --all (got %d)", errUsage, selectors)
	}
	if err := checkClassFlag(o.class); err != nil {
		return nil, err
	}
	if err := checkTopicFlag(o.topic); err != nil {
		return nil, err
	}
	if o.timeout <= 0 {
		return nil, fmt.Errorf("%w: --timeout must be positive, got %v", errUsage, o.timeout)
	}
	if o.offsets == "" {
		return nil, nil
	}
	return parseOffsets(o.offsets)
}

func (o *redriveOptions) run(cmd *cobra.Command) error {
	wanted, err := o.check()
	if err != nil {
		return err
	}
	k, ctx, cancel, err := kafkaFor(cmd, o.timeout)
	if err != nil {
		return err
	}
	defer cancel()
	out, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()

	plan, err := dlq.PlanRedrive(ctx, k, o.topic, dlq.Selection{Positions: wanted, Class: o.class, All: o.all, OriginTopic: o.originTopic}, time.Now())
	if err != nil {
		return err
	}
	for _, p := range plan.Problems {
		fmt.Fprintln(stderr, "backflow: skipped", p)
	}
	if len(plan.Records) == 0 {
		if len(plan.Problems) == 0 {
			fmt.Fprintf(stderr, "backflow: nothing selected in %s\n", o.topic)
		}
		return errFound
	}
	if !o.execute {
		printDryRun(out, plan)
	} else if err := redrive(ctx, out, stderr, k, plan); err != nil {
		return err
	}
	if len(plan.Problems) > 0 {
		return errFound
	}
	return nil
}

// printDryRun says what --execute would re-drive, and to where.
func printDryRun(out io.Writer, plan *dlq.RedrivePlan) {
	for i, r := range plan.Records {
		from := plan.From[i]
		fmt.Fprintf(out, "would re-drive %s/%d/%d -> %s/%d (class %s, stage %s, redrive count %s)\n",
			from.DLQTopic, from.DLQPartition, from.DLQOffset, r.Topic, r.Partition,
			from.Class, from.Stage, headerValue(r, dlq.HeaderRedriveCount))
	}
	fmt.Fprintf(out, "dry run: would re-drive %d record(s); nothing was produced, add --execute to re-drive\n", len(plan.Records))
	printCollapsed(out, plan)
}

// redrive re-drives the plan's records and prints each one's new position; a record that
// failed is reported on stderr, and makes it return errFound.
func redrive(ctx context.Context, out, stderr io.Writer, k kafka.Conn, plan *dlq.RedrivePlan) error {
	results, err := plan.Execute(ctx, k)
	if err != nil {
		return err
	}
	done := 0
	for i, res := range results {
		from := plan.From[i]
		if res.Err != nil {
			fmt.Fprintf(stderr, "backflow: re-drive of %s/%d/%d failed: %v\n", from.DLQTopic, from.DLQPartition, from.DLQOffset, res.Err)
			continue
		}
		done++
		fmt.Fprintf(out, "re-drove %s/%d/%d -> %s/%d/%d\n", from.DLQTopic, from.DLQPartition, from.DLQOffset,
			res.Record.Topic, res.Record.Partition, res.Record.Offset)
	}
	if done < len(plan.Records) {
		fmt.Fprintf(out, "re-drove %d record(s); %d failed\n", done, len(plan.Records)-done)
		return errFound
	}
	fmt.Fprintf(out, "re-drove %d record(s)\n", done)
	printCollapsed(out, plan)
	return nil
}

// printCollapsed says how many selected entries were left out because another entry holds the
// same origin record: list counts every entry, redrive each origin record once.
func printCollapsed(w io.Writer, plan *dlq.RedrivePlan) {
	if plan.Collapsed > 0 {
		fmt.Fprintf(w, "collapsed %d entr%s that repeat an origin record already selected (the same bad record dead-lettered twice): each origin record is re-driven once\n",
			plan.Collapsed, map[bool]string{true: "y", false: "ies"}[plan.Collapsed == 1])
	}
}

func headerValue(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}
