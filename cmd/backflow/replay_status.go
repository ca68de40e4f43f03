package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/backflowhq/backflow/pipelines"
	"github.com/backflowhq/backflow/pipelines/replay"
)

// replayStatusLong is backflow replay status --help.
const replayStatusLong = `status prints a group's lag per partition (committed offset against the log end), then how far
it has caught up since its last executed replay (read from the control topic; without one, since
this command started): records done of the total, records per second and the time left at that rate.

With --watch it polls every --interval until the lag is 0, drawing a progress bar on a terminal
and printing one plain line per poll otherwise (logs stay readable), then prints the table again.

-o json or -o yaml prints the same as one document (the group, its partitions under the table's
column names, and the progress); with --watch, the poll lines go to stderr and the document is
printed once the lag is 0.`

func newReplayStatusCmd() *cobra.Command {
	var (
		group, controlTopic string
		watch, noProgress   bool
		interval            time.Duration
		format              string
	)
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show how far a group has caught up since its last replay: lag per partition, records/s, ETA",
		Long:  replayStatusLong,
		Example: `  backflow replay status --group backflow-ingest
  backflow replay status --group backflow-ingest --watch --interval 1s
  backflow replay status --group backflow-ingest -o json`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(format); err != nil {
				return err
			}
			if group == "" {
				return fmt.Errorf("%w: --group is required", errUsage)
			}
			if interval <= 0 {
				return fmt.Errorf("%w: --interval must be positive, got %v", errUsage, interval)
			}
			conn, err := loadConfig(pipelines.SystemKafka)
			if err != nil {
				return err
			}
			cl, err := conn.Kafka.NewClient()
			if err != nil {
				return err
			}
			defer cl.Close()
			ctx := cmd.Context()
			adm := kadm.NewClient(cl)
			out, lines := cmd.OutOrStdout(), cmd.OutOrStdout()
			if format != formatTable {
				lines = cmd.ErrOrStderr() // stdout holds the document alone
			}
			snap := func() (replay.GroupStatus, error) {
				c, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				st, err := replay.Status(c, adm, group)
				if err != nil {
					return replay.GroupStatus{}, fmt.Errorf("replay status: %w", err)
				}
				if len(st) == 0 || len(st[0].Partitions) == 0 {
					return replay.GroupStatus{}, fmt.Errorf("group %s has no committed offsets and no members", group)
				}
				return st[0], nil
			}
			first, err := snap()
			if err != nil {
				return err
			}
			base, since := replay.BaseFromStatus(first), "since now"
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			recs, err := replay.ReadRecords(rctx, cl, controlTopic, group)
			cancel()
			if err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: replay records in %s: %v\n", controlTopic, err)
			} else if len(recs) > 0 {
				last := recs[len(recs)-1]
				base, since = replay.BaseFromRecord(last), fmt.Sprintf("since replay %s (%s, %s)", last.ID, last.Spec, last.Time.Format(time.RFC3339))
			}
			pr := replay.Measure(base, nil, first)
			if !watch || pr.Lag == 0 {
				return writeStatus(out, format, first, since, pr)
			}
			w := statusWatch{snap: snap, base: base, since: since, format: format, interval: interval, noProgress: noProgress,
				out: out, lines: lines, errOut: cmd.ErrOrStderr()}
			return w.run(ctx, first, pr)
		},
	}
	f := cmd.Flags()
	f.StringVar(&group, "group", "", "the consumer group (required)")
	f.BoolVar(&watch, "watch", false, "poll until the lag is 0")
	durationVar(f, &interval, "interval", 2*time.Second, "how often --watch polls")
	f.StringVar(&controlTopic, "control-topic", "backflow.control", "where replay records are kept")
	f.BoolVar(&noProgress, "no-progress", false, "plain lines even on a terminal")
	addOutputFlag(cmd, &format)
	return cmd
}

// statusWatch is replay status --watch once the first poll found a lag: it polls every
// interval until the lag is 0, drawing a bar on errOut or printing a line per poll on lines.
type statusWatch struct {
	snap       func() (replay.GroupStatus, error)
	base       replay.Base
	since      string
	format     string
	interval   time.Duration
	noProgress bool
	out, lines io.Writer
	errOut     io.Writer
}

func (w statusWatch) run(ctx context.Context, first replay.GroupStatus, pr replay.Progress) error {
	if w.format == formatTable {
		writeLagTable(w.out, first)
		fmt.Fprintf(w.out, "%s: %s\n", w.since, progressLine(pr))
	}
	bar := newCatchUpBar(w.errOut, pr.Total, w.noProgress)
	prev := first
	tick := time.NewTicker(w.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			if bar != nil { // nil: plain lines (not a terminal, or --no-progress)
				_ = bar.Exit()
			}
			return nil
		case <-tick.C:
		}
		cur, err := w.snap()
		if err != nil {
			return err
		}
		pr = replay.Measure(w.base, &prev, cur)
		prev = cur
		if bar != nil {
			bar.ChangeMax64(max(pr.Total, 1))
			bar.Describe(progressLine(pr))
			_ = bar.Set64(pr.Done)
		} else {
			fmt.Fprintf(w.lines, "%s %s\n", cur.Time.UTC().Format(time.RFC3339), progressLine(pr))
		}
		if pr.Lag == 0 {
			if bar != nil {
				_ = bar.Finish()
				fmt.Fprintln(w.errOut)
			}
			if w.format != formatTable {
				return writeStatus(w.out, w.format, cur, w.since, pr)
			}
			writeLagTable(w.out, cur)
			fmt.Fprintf(w.out, "caught up: %d record(s) consumed %s\n", pr.Done, w.since)
			return nil
		}
	}
}

func progressLine(pr replay.Progress) string {
	eta := "-"
	if pr.ETA > 0 {
		eta = pr.ETA.Round(time.Second).String()
	} else if pr.Lag == 0 {
		eta = "0s"
	}
	return fmt.Sprintf("%d/%d records (%.1f%%), lag %d, %.0f records/s, ETA %s", pr.Done, pr.Total, 100*pr.Fraction(), pr.Lag, pr.Rate, eta)
}

// newCatchUpBar returns a progress bar on w when w is a terminal, nil otherwise (or disabled).
func newCatchUpBar(w io.Writer, total int64, disabled bool) *progressbar.ProgressBar {
	f, ok := w.(*os.File)
	if disabled || !ok || !isTerminal(f) {
		return nil
	}
	return progressbar.NewOptions64(max(total, 1),
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionFullWidth(),
	)
}

func writeLagTable(w io.Writer, st replay.GroupStatus) {
	fmt.Fprintf(w, "group %s: %s, %d member(s)\n", st.Group, st.State, len(st.Members))
	_ = writeTable(w, partitionRows(st), "group", "state")
}

// statusDoc is what replay status -o json|yaml prints.
type statusDoc struct {
	groupDoc `yaml:",inline"`
	Since    string      `json:"since" yaml:"since"`
	Progress progressDoc `json:"progress" yaml:"progress"`
}

type progressDoc struct {
	Done       int64   `json:"done" yaml:"done"`
	Total      int64   `json:"total" yaml:"total"`
	Lag        int64   `json:"lag" yaml:"lag"`
	Rate       float64 `json:"records_per_second" yaml:"records_per_second"`
	ETASeconds float64 `json:"eta_seconds" yaml:"eta_seconds"`
}

// writeStatus prints the group's lag table and progress, or the document in format.
func writeStatus(w io.Writer, format string, st replay.GroupStatus, since string, pr replay.Progress) error {
	if format == formatTable {
		writeLagTable(w, st)
		_, err := fmt.Fprintf(w, "%s: %s\n", since, progressLine(pr))
		return err
	}
	return writeDoc(w, format, statusDoc{groupDoc: newGroupDoc(st), Since: since,
		Progress: progressDoc{Done: pr.Done, Total: pr.Total, Lag: pr.Lag, Rate: pr.Rate, ETASeconds: pr.ETA.Seconds()}})
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
