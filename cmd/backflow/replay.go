package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/backflowhq/backflow/pipelines"
	"github.com/backflowhq/backflow/pipelines/replay"
)

const replayLong = `replay moves a consumer group's committed offsets so that the group reads retained records
again (or skips ahead), and keeps each stage's state right while it does. It is a dry run unless
--execute is given: it prints the plan, one row per partition, and changes nothing.

Scope (one of; optional with --from-file):
  --topic T          every partition of T; repeat for more topics
  --topic T:0,2      partitions 0 and 2 of T
  --all-topics       every partition the group has committed (but its goka loopback <group>-loop)
Spec (one of), computed as Kafka's kafka-consumer-groups --reset-offsets does:
  --to-earliest      the log start          --to-latest       the log end
  --to-current       the committed offset, kept as it is (not clamped, even out of retention);
                     the log end on a partition in scope where the group has no commit
  --to-datetime TS   the first record at or after TS; the log end if none. TS as Kafka's tool
                     takes it, YYYY-MM-DDTHH:mm:SS.sss (no zone: UTC) with an optional zone
                     (Z, +02:00, +0200, +02), or RFC 3339
  --by-duration D    --to-datetime now-D; D like 6h, 7d, 1d12h or ISO-8601 P1DT6H
  --shift-by N       the committed offset + N (negative: back)
  --to-offset N      offset N
  --from-file F      the offsets in F, CSV topic,partition,offset (what --export writes). The
                     file's partitions move. A scope given with it only has to exist, as in
                     Kafka's tool: partitions in the scope but not in F stay, those in F but
                     not in the scope move all the same (both named in a warning)
A point outside the retained log is clamped to its start or end, with a warning (not with
--to-current).

The plan shows CURRENT-OFFSET (committed) and NEW-OFFSET, RE-READ (records read again; "skip N"
when moving forward), LAG-AFTER, and the timestamps of the last record consumed (CURRENT-TIME)
and of the first record to be read (NEW-TIME). --export prints the plan as Kafka's CSV instead,
byte for byte as kafka-consumer-groups --export prints it; -o json or -o yaml as one document,
under the same names (current_offset, new_offset, ...), with what follows the plan on stderr.

--execute refuses while the group has live members (it names them): stop the stage first. A
group that does not exist is an error unless --create. Every executed replay is recorded (who,
when, group, spec, offsets from -> to) in the control topic and in ClickHouse's replay_log table
(run backflow migrate first); a replay that cannot be recorded is not executed.

Stage state:
  ingest          --new-epoch bumps the group's replay epoch in the control topic, so records
                  claimed before count as unseen, and the replayed rows win in ClickHouse.
  sink-features   a plain replay is a no-op for the aggregates (each request counts once, by
                  its enriched position); --reset-state rebuilds them from the replayed records:
                  table changelog re-created, local table storage (--storage-dir) and Redis
                  aggregate rows deleted, loopback moved to its end.
  sink-clickhouse nothing to do: re-written rows carry the same version and collapse.
Afterwards, start the stage and follow it with: backflow replay status --group G --watch`

func newReplayCmd() *cobra.Command {
	o := &replayOptions{}
	cmd := &cobra.Command{
		Use:   "replay",
		Short: "Move a consumer group's offsets to re-read retained records, safely for each stage (dry run by default)",
		Long:  replayLong,
		Example: `  backflow replay --group backflow-sink-clickhouse --all-topics --by-duration 6h
  backflow replay --group backflow-ingest --topic model-inference-result --topic gateway-log \
      --to-datetime 2026-11-02T10:00:00Z --new-epoch --execute --reason "new dictionary"
  backflow replay --group backflow-features --all-topics --to-earliest --reset-state --execute
  backflow replay --group g --topic t:0,2 --shift-by -1000 --export > plan.csv
  backflow replay --group g --from-file plan.csv --execute
  backflow replay --group g --topic t:0,2 --to-current --export > current.csv   # the committed offsets, as a plan
  backflow replay status --group backflow-ingest --watch`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	o.addFlags(cmd)
	cmd.AddCommand(newReplayStatusCmd())
	return cmd
}

// newOffsetsCmd is `backflow offsets reset`, the same command under Kafka's name for it.
func newOffsetsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "offsets",
		Short: "Consumer group offsets (offsets reset is backflow replay)",
		Args:  usageArgs(cobra.NoArgs),
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	o := &replayOptions{}
	reset := &cobra.Command{
		Use:   "reset",
		Short: "Same as backflow replay: move a group's offsets (dry run by default)",
		Long:  replayLong,
		Args:  usageArgs(cobra.NoArgs),
		RunE:  func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	o.addFlags(reset)
	cmd.AddCommand(reset)
	return cmd
}

type replayOptions struct {
	replay.Flags
	controlTopic, reason               string
	execute, dryRun, export            bool
	newEpoch, resetState               bool
	storageDir, project, enrichedTopic string
	timeout                            time.Duration
	format                             string
}

func (o *replayOptions) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	o.Flags.AddFlags(f)
	f.BoolVar(&o.execute, "execute", false, "apply the plan (default: dry run)")
	f.BoolVar(&o.dryRun, "dry-run", false, "only print the plan (the default; for symmetry with Kafka's tool)")
	f.BoolVar(&o.export, "export", false, "print the plan as CSV (topic,partition,offset), as Kafka's tool exports it")
	f.BoolVar(&o.newEpoch, "new-epoch", false, "ingest groups: bump the replay epoch in the control topic with the move")
	f.BoolVar(&o.resetState, "reset-state", false, "feature aggregator groups: rebuild the aggregates from the replayed records")
	f.StringVar(&o.controlTopic, "control-topic", replay.DefaultControlTopic, "the control topic (epochs and replay records)")
	f.StringVar(&o.storageDir, "storage-dir", "", "--reset-state: the sink's local table storage on this host (default: <tmp>/backflow-goka-features)")
	f.StringVar(&o.project, "project", "backflow", "--reset-state: the Feast project whose aggregate rows are deleted from Redis")
	f.StringVar(&o.enrichedTopic, "enriched-topic", "backflow.enriched", "--reset-state: the aggregator's input topic")
	f.StringVar(&o.reason, "reason", "", "why, kept with the record")
	durationVar(f, &o.timeout, "timeout", 2*time.Minute, "give up after this long")
	addOutputFlag(cmd, &o.format)
}

// request turns the flags into a replay request and its options; every problem is a usage
// error.
func (o *replayOptions) request(cmd *cobra.Command) (replay.Request, replay.Options, error) {
	opts := replay.Options{NewEpoch: o.newEpoch, ResetState: o.resetState, ControlTopic: o.controlTopic,
		EnrichedTopic: o.enrichedTopic, Project: o.project, StorageDir: o.storageDir, Reason: o.reason}
	req, err := o.Flags.Request(cmd.Flags())
	if err != nil {
		return req, opts, fmt.Errorf("%w: %w", errUsage, err)
	}
	if err := checkOutput(o.format); err != nil {
		return req, opts, err
	}
	if o.export && o.format != formatTable {
		return req, opts, fmt.Errorf("%w: --export and -o %s: choose one", errUsage, o.format)
	}
	if o.execute && o.dryRun {
		return req, opts, fmt.Errorf("%w: --execute and --dry-run contradict each other", errUsage)
	}
	if _, _, err := replay.Complete(req, opts); err != nil {
		return req, opts, fmt.Errorf("%w: %w", errUsage, err)
	}
	if o.timeout <= 0 {
		return req, opts, fmt.Errorf("%w: --timeout must be positive, got %v", errUsage, o.timeout)
	}
	return req, opts, nil
}

func (o *replayOptions) run(cmd *cobra.Command) error {
	req, opts, err := o.request(cmd)
	if err != nil {
		return err
	}
	systems := []string{pipelines.SystemKafka}
	if o.execute { // the executed replay is recorded in ClickHouse's replay_log
		systems = append(systems, pipelines.SystemClickHouse)
	}
	if o.resetState {
		systems = append(systems, pipelines.SystemRedis)
	}
	conn, err := loadConfig(systems...)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
	defer cancel()
	cl, err := conn.Kafka.NewClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	out, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	p, err := replay.Prepare(ctx, cl, req, opts)
	if errors.Is(err, replay.ErrBadRequest) { // e.g. a stage step on another stage's group
		return fmt.Errorf("%w: %w", errUsage, err)
	} else if err != nil {
		return err
	}
	for _, w := range p.Warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	plan := p.Plan
	if o.export {
		if err := replay.WriteCSV(out, plan); err != nil {
			return err
		}
		for _, w := range plan.Warnings {
			fmt.Fprintf(stderr, "warning: %s\n", w)
		}
	} else if o.format != formatTable {
		if err := writeDoc(out, o.format, newPlanDoc(p)); err != nil {
			return err
		}
	} else if err := writePlan(out, plan); err != nil {
		return err
	}
	info := out
	if o.export || o.format != formatTable { // stdout holds the CSV or the document alone
		info = stderr
	}
	for _, a := range p.Actions { // steps to take, not taken: "done:" lines follow an --execute
		if o.execute {
			fmt.Fprintf(info, "stage, to do: %s\n", a.Describe())
		} else {
			fmt.Fprintf(info, "stage, with --execute (not done): %s\n", a.Describe())
		}
	}
	if !o.execute {
		if plan.Live() {
			fmt.Fprintln(info, (&replay.LiveError{Group: plan.Group, State: plan.State, Members: plan.Members}).Error())
			fmt.Fprintln(info, "dry run: nothing changed; --execute would be refused while the group is live")
		} else {
			fmt.Fprintln(info, "dry run: nothing changed; add --execute to apply")
		}
		return nil
	}
	rec, err := p.Execute(ctx, cl, replay.Systems{ClickHouse: conn.ClickHouse, Redis: conn.Redis, Replication: int16(conn.Kafka.TableReplication)})
	printRecord(info, rec, err)
	return err
}

func printRecord(w io.Writer, rec replay.Record, err error) {
	var live *replay.LiveError
	if errors.As(err, &live) || err != nil && len(rec.Actions) == 0 && !errors.Is(err, replay.ErrNotRecorded) {
		return
	}
	for _, a := range rec.Actions {
		fmt.Fprintf(w, "done: %s\n", a)
	}
	if err == nil {
		fmt.Fprintf(w, "executed: replay %s by %s, %d partition(s) moved; recorded in the control topic and in ClickHouse replay_log\n", rec.ID, rec.By, len(rec.Partitions))
	}
}
