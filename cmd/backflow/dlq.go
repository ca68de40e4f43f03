package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/internal/dlq"
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

Error classes (--class):
` + classHelp(),
		Example: `  backflow dlq list --env-file .stack/env
  backflow dlq tail --class unknown_schema
  backflow dlq redrive --class unknown_schema            # dry run: what would go where
  backflow dlq redrive --offsets 0:12,2:7 --execute`,
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

func checkTopicFlag(topic string) error {
	if err := (dlq.Config{Topic: topic, Stage: "cli"}).Validate(); err != nil {
		return fmt.Errorf("%w: --topic: %q is not a valid topic name", errUsage, topic)
	}
	return nil
}

func newDLQListCmd() *cobra.Command {
	var f dlqFilter
	var timeout time.Duration
	var all bool
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
		Example: `  backflow dlq list
  backflow dlq list --all                                  # every entry, repeats included
  backflow dlq list --class unknown_schema --origin-topic model-inference-result --limit 20
  backflow dlq list -o json | jq -r .message`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.check(); err != nil {
				return err
			}
			if timeout <= 0 {
				return fmt.Errorf("%w: --timeout must be positive, got %v", errUsage, timeout)
			}
			cfg, err := loadConfig(pipelines.SystemKafka)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			out, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
			p := newEntryPrinter(out, f.json)
			p.repeats = !all
			res, err := dlq.List(ctx, cfg.Kafka, f.topic, dlq.ListOptions{Class: f.class, OriginTopic: f.originTopic, Limit: f.limit, All: all,
				Undecodable: func(r *kgo.Record, err error) {
					fmt.Fprintf(stderr, "backflow: %s/%d/%d is not a DLQ entry: %v\n", r.Topic, r.Partition, r.Offset, err)
				}}, p.printListed)
			if ferr := p.flush(); err == nil {
				err = ferr
			}
			if err != nil {
				return err
			}
			counts, matched, shown, undecodable := res.Counts, res.Matched, res.Shown, res.Undecodable
			if f.json {
				return nil
			}
			if matched == 0 {
				fmt.Fprintf(out, "no entries in %s%s\n", f.topic, filterNote(f))
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "\nCLASS\tENTRIES")
			classes := make([]string, 0, len(counts))
			for c := range counts {
				classes = append(classes, c)
			}
			slices.Sort(classes)
			for _, c := range classes {
				fmt.Fprintf(tw, "%s\t%d\n", c, counts[c])
			}
			if undecodable > 0 {
				fmt.Fprintf(tw, "(undecodable)\t%d\n", undecodable)
			}
			total := strconv.Itoa(matched)
			if shown < matched {
				total += fmt.Sprintf(" (%d shown)", shown)
			}
			fmt.Fprintf(tw, "total\t%s\n", total)
			if res.Folded > 0 {
				fmt.Fprintf(tw, "folded\t%d repeated entr%s of these origin records (--all lists every entry)\n",
					res.Folded, map[bool]string{true: "y", false: "ies"}[res.Folded == 1])
			}
			return tw.Flush()
		},
	}
	f.addFlags(cmd)
	cmd.Flags().BoolVar(&all, "all", false, "list every entry, repeats of an origin record included (default: each origin record and stage once, with its repeats)")
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "how long the whole read may take")
	return cmd
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

func newDLQTailCmd() *cobra.Command {
	var f dlqFilter
	cmd := &cobra.Command{
		Use:   "tail",
		Short: "Print new dead-letter entries as they arrive, until Ctrl-C",
		Long: `tail starts at the current end of every partition of the dead-letter topic and prints each
entry written after that, in the same columns as list (or as JSON lines with -o json), until
Ctrl-C (or SIGTERM) or, with --limit N, until it has printed N entries. Partitions added while it runs are not
followed. A topic that does not exist is an error (exit 1).`,
		Example: `  backflow dlq tail
  backflow dlq tail --class corrupt -o json`,
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

// entryPrinter writes entries as aligned text columns or as JSON lines.
type entryPrinter struct {
	json    bool
	eager   bool // write every line at once (tail)
	repeats bool // a REPEATS column: list, folding repeated origin records
	w       io.Writer
	enc     *json.Encoder
	tw      *tabwriter.Writer
	lines   int
}

// flushEvery bounds what the tabwriter buffers; columns realign per block of lines.
const flushEvery = 256

func newEntryPrinter(w io.Writer, asJSON bool) *entryPrinter {
	p := &entryPrinter{json: asJSON, w: w}
	if asJSON {
		p.enc = json.NewEncoder(w)
		p.enc.SetEscapeHTML(false)
	} else {
		p.tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	}
	return p
}

// entryJSON is one line of -o json output.
type entryJSON struct {
	DLQTopic        string `json:"dlq_topic"`
	DLQPartition    int32  `json:"dlq_partition"`
	DLQOffset       int64  `json:"dlq_offset"`
	OriginTopic     string `json:"origin_topic"`
	OriginPartition int32  `json:"origin_partition"`
	OriginOffset    int64  `json:"origin_offset"`
	OriginTimestamp string `json:"origin_timestamp,omitempty"` // RFC 3339 ms; absent when unknown
	Stage           string `json:"stage"`
	Class           string `json:"class"`
	Message         string `json:"message"`
	Time            string `json:"time"`
	Key             []byte `json:"key"` // base64; null for a null key
	ValueBytes      int    `json:"value_bytes"`
	TruncatedFrom   int    `json:"truncated_from,omitempty"`
	Repeats         *int   `json:"repeats,omitempty"` // list without --all: later entries folded into this one
}

// printListed prints an entry of list: with its repeats unless every entry is listed.
func (p *entryPrinter) printListed(l dlq.Listed) error {
	if p.json {
		j := toJSON(l.Entry)
		j.ValueBytes = l.ValueBytes
		if p.repeats {
			j.Repeats = &l.Repeats
		}
		return p.enc.Encode(j)
	}
	return p.printColumns(l.Entry, strconv.Itoa(l.Repeats))
}

func toJSON(e dlq.Entry) entryJSON {
	j := entryJSON{
		DLQTopic: e.DLQTopic, DLQPartition: e.DLQPartition, DLQOffset: e.DLQOffset,
		OriginTopic: e.Origin.Topic, OriginPartition: e.Origin.Partition, OriginOffset: e.Origin.Offset,
		Stage: e.Stage, Class: e.Class, Message: e.Message, Time: e.Time.UTC().Format(dlq.TimeLayout),
		Key: e.Origin.Key, ValueBytes: len(e.Origin.Value), TruncatedFrom: e.TruncatedFrom,
	}
	if !e.Origin.Timestamp.IsZero() {
		j.OriginTimestamp = e.Origin.Timestamp.UTC().Format(dlq.TimeLayout)
	}
	return j
}

func (p *entryPrinter) print(e dlq.Entry) error {
	if p.json {
		return p.enc.Encode(toJSON(e))
	}
	return p.printColumns(e, "")
}

// printColumns prints e as a text line, with repeats in its column when p has one.
func (p *entryPrinter) printColumns(e dlq.Entry, repeats string) error {
	cols := []string{fmt.Sprintf("%d/%d", e.DLQPartition, e.DLQOffset),
		fmt.Sprintf("%s/%d/%d", e.Origin.Topic, e.Origin.Partition, e.Origin.Offset),
		oneLine(e.Class), oneLine(e.Stage), e.Time.UTC().Format(dlq.TimeLayout), oneLine(e.Message)}
	if p.eager {
		// One line at a time: fixed widths instead of alignment over lines not yet seen.
		if p.lines == 0 {
			fmt.Fprintf(p.w, tailFormat, "DLQ", "ORIGIN", "CLASS", "STAGE", "TIME", "MESSAGE")
		}
		p.lines++
		_, err := fmt.Fprintf(p.w, tailFormat, cols[0], cols[1], cols[2], cols[3], cols[4], cols[5])
		return err
	}
	if p.lines%flushEvery == 0 {
		head := "DLQ\tORIGIN\tCLASS\tSTAGE\tTIME\tMESSAGE"
		if p.repeats {
			head = "DLQ\tORIGIN\tCLASS\tSTAGE\tTIME\tREPEATS\tMESSAGE"
		}
		fmt.Fprintln(p.tw, head)
	}
	p.lines++
	if p.repeats {
		cols = slices.Insert(cols, 5, repeats)
	}
	fmt.Fprintln(p.tw, strings.Join(cols, "\t"))
	if p.lines%flushEvery == 0 {
		return p.tw.Flush()
	}
	return nil
}

// tailFormat lays out tail's text lines; a longer value pushes the rest of its line right.
const tailFormat = "%-8s  %-32s  %-16s  %-15s  %-24s  %s\n"

func (p *entryPrinter) flush() error {
	if p.tw != nil {
		return p.tw.Flush()
	}
	return nil
}

// oneLine replaces control characters (newlines, tabs) so an entry stays on one line.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

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
		Example: `  backflow dlq redrive --class unknown_schema                   # dry run
  backflow dlq redrive --class unknown_schema --execute
  backflow dlq redrive --offsets 0:12,2:7 --execute
  backflow dlq redrive --all --origin-topic gateway-log --execute`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	addTopicFlag(cmd, &o.topic)
	cmd.Flags().StringVar(&o.offsets, "offsets", "", "comma-separated DLQ partition:offset positions to re-drive")
	cmd.Flags().StringVar(&o.class, "class", "", "re-drive every entry of this error class")
	cmd.Flags().BoolVar(&o.all, "all", false, "re-drive every entry")
	cmd.Flags().StringVar(&o.originTopic, "origin-topic", "", "only entries that came from this topic")
	cmd.Flags().BoolVar(&o.execute, "execute", false, "produce the records (default: dry run)")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 2*time.Minute, "how long reading and producing may take")
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

func (o *redriveOptions) run(cmd *cobra.Command) error {
	selectors := 0
	for _, set := range []bool{o.offsets != "", o.class != "", o.all} {
		if set {
			selectors++
		}
	}
	if selectors != 1 {
		return fmt.Errorf("%w: give exactly one of --offsets, --class or --all (got %d)", errUsage, selectors)
	}
	if err := checkClassFlag(o.class); err != nil {
		return err
	}
	if err := checkTopicFlag(o.topic); err != nil {
		return err
	}
	if o.timeout <= 0 {
		return fmt.Errorf("%w: --timeout must be positive, got %v", errUsage, o.timeout)
	}
	var wanted map[dlq.Pos]bool
	if o.offsets != "" {
		var err error
		if wanted, err = parseOffsets(o.offsets); err != nil {
			return err
		}
	}
	cfg, err := loadConfig(pipelines.SystemKafka)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
	defer cancel()
	out, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()

	plan, err := dlq.PlanRedrive(ctx, cfg.Kafka, o.topic, dlq.Selection{Positions: wanted, Class: o.class, All: o.all, OriginTopic: o.originTopic}, time.Now())
	if err != nil {
		return err
	}
	recs, from, problems := plan.Records, plan.From, plan.Problems
	for _, p := range problems {
		fmt.Fprintln(stderr, "backflow: skipped", p)
	}
	if len(recs) == 0 {
		if len(problems) == 0 {
			fmt.Fprintf(stderr, "backflow: nothing selected in %s\n", o.topic)
		}
		return errFound
	}

	if !o.execute {
		for i, r := range recs {
			fmt.Fprintf(out, "would re-drive %s/%d/%d -> %s/%d (class %s, stage %s, redrive count %s)\n",
				from[i].DLQTopic, from[i].DLQPartition, from[i].DLQOffset, r.Topic, r.Partition,
				from[i].Class, from[i].Stage, headerValue(r, dlq.HeaderRedriveCount))
		}
		fmt.Fprintf(out, "dry run: would re-drive %d record(s); nothing was produced, add --execute to re-drive\n", len(recs))
		printCollapsed(out, plan)
		if len(problems) > 0 {
			return errFound
		}
		return nil
	}

	results, err := plan.Execute(ctx, cfg.Kafka)
	if err != nil {
		return err
	}
	done := 0
	for i, res := range results {
		if res.Err != nil {
			fmt.Fprintf(stderr, "backflow: re-drive of %s/%d/%d failed: %v\n", from[i].DLQTopic, from[i].DLQPartition, from[i].DLQOffset, res.Err)
			continue
		}
		done++
		fmt.Fprintf(out, "re-drove %s/%d/%d -> %s/%d/%d\n", from[i].DLQTopic, from[i].DLQPartition, from[i].DLQOffset,
			res.Record.Topic, res.Record.Partition, res.Record.Offset)
	}
	if done < len(recs) {
		fmt.Fprintf(out, "re-drove %d record(s); %d failed\n", done, len(recs)-done)
		return errFound
	}
	fmt.Fprintf(out, "re-drove %d record(s)\n", done)
	printCollapsed(out, plan)
	if len(problems) > 0 {
		return errFound
	}
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
