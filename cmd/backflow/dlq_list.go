package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/internal/dlq"
)

// listOptions are list's flags.
type listOptions struct {
	dlqFilter
	timeout time.Duration
	all     bool
}

func newDLQListCmd() *cobra.Command {
	var o listOptions
	cmd := &cobra.Command{
		Use:   "list",
		Short: "Print the dead-letter entries present now, then the counts per error class",
		Long: `list reads the dead-letter topic from its start up to each partition's end at the time of
the call (a snapshot: it ends even while stages keep writing), partition by partition, and
prints one line per entry: its DLQ partition/offset, the origin topic/partition/offset, error
class, stage, time, message and repeats. Then it prints how many entries each class has, the
total, and how many repeats it folded.

The same bad record can be in the topic more than once (a stage killed after its DLQ write and
before its commit writes it again on restart; so does a replay). As the ClickHouse view
v_dlq_entries does, list shows each origin record (topic/partition/offset) and stage once: the
first entry in DLQ order (partition, then offset), with REPEATS, the number of later entries it
stands for. The entries are printed after the read; each one kept costs about 450 bytes plus
its message and key (--limit N keeps N), any other origin record about 100 bytes. --all lists
every entry as it is read, repeats included, without REPEATS and without holding entries.

--class and --origin-topic narrow the entries (and the counts); --limit caps the lines printed,
not the counts. With -o json (or --json) it prints one JSON object per entry and nothing else (the key
base64-encoded, null for a null key; the value as its length, value_bytes; repeats).

A record in the topic that does not follow the DLQ conventions is reported on stderr and counted
as undecodable. A topic that does not exist is an error (exit 1).`,
		Example: `  backflow dlq list --env-file .stack/env
  backflow dlq list --env-file .stack/env --all                                  # every entry, repeats included
  backflow dlq list --env-file .stack/env --class unknown_schema --origin-topic model-inference-result --limit 20
  backflow dlq list --env-file .stack/env -o json | jq -r .message`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	o.addFlags(cmd)
	cmd.Flags().BoolVar(&o.all, "all", false, "list every entry, repeats of an origin record included (default: each origin record and stage once, with its repeats)")
	durationVar(cmd.Flags(), &o.timeout, "timeout", 2*time.Minute, "how long the whole read may take")
	return cmd
}

// run reads the topic, printing each entry as it is listed, then the counts.
func (o *listOptions) run(cmd *cobra.Command) error {
	if err := o.check(); err != nil {
		return err
	}
	if o.timeout <= 0 {
		return fmt.Errorf("%w: --timeout must be positive, got %v", errUsage, o.timeout)
	}
	k, ctx, cancel, err := kafkaFor(cmd, o.timeout)
	if err != nil {
		return err
	}
	defer cancel()
	out, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	p := newEntryPrinter(out, o.json)
	p.repeats = !o.all
	res, err := dlq.List(ctx, k, o.topic, dlq.ListOptions{Class: o.class, OriginTopic: o.originTopic, Limit: o.limit, All: o.all,
		Undecodable: func(r *kgo.Record, err error) {
			fmt.Fprintf(stderr, "backflow: %s/%d/%d is not a DLQ entry: %v\n", r.Topic, r.Partition, r.Offset, err)
		}}, p.printListed)
	if ferr := p.flush(); err == nil {
		err = ferr
	}
	if err != nil || o.json {
		return err
	}
	return o.printCounts(out, res)
}

// printCounts prints what list found: a line when nothing matched, then the entries per
// class, the undecodable records, the total and the repeats folded.
func (o *listOptions) printCounts(out io.Writer, res dlq.ListResult) error {
	if res.Matched == 0 {
		fmt.Fprintf(out, "no entries in %s%s\n", o.topic, filterNote(o.dlqFilter))
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nCLASS\tENTRIES")
	for _, c := range slices.Sorted(maps.Keys(res.Counts)) {
		fmt.Fprintf(tw, "%s\t%d\n", c, res.Counts[c])
	}
	if res.Undecodable > 0 {
		fmt.Fprintf(tw, "(undecodable)\t%d\n", res.Undecodable)
	}
	total := strconv.Itoa(res.Matched)
	if res.Shown < res.Matched {
		total += fmt.Sprintf(" (%d shown)", res.Shown)
	}
	fmt.Fprintf(tw, "total\t%s\n", total)
	if res.Folded > 0 {
		fmt.Fprintf(tw, "folded\t%d repeated entr%s of these origin records (--all lists every entry)\n",
			res.Folded, map[bool]string{true: "y", false: "ies"}[res.Folded == 1])
	}
	return tw.Flush()
}

func filterNote(f dlqFilter) string {
	var parts []string
	if f.class != "" {
		parts = append(parts, "class "+f.class)
	}
	if f.originTopic != "" {
		parts = append(parts, "origin topic "+f.originTopic)
	}
	if len(parts) == 0 {
		return ""
	}
	return " matching " + strings.Join(parts, ", ")
}
