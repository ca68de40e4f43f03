package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/backflowhq/backflow/pipelines"
	"github.com/backflowhq/backflow/pipelines/replay"
)

func newGroupsCmd() *cobra.Command {
	var partitions bool
	var format string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "groups [GROUP...]",
		Short: "List consumer groups with their state, members and lag per topic",
		Long: `groups describes consumer groups (every group when none is named), as kafka-consumer-groups
--describe does: for each group its state (Stable, Empty, PreparingRebalance...), its live members,
and per topic the partitions, the sum of committed offsets, the sum of log ends and the lag.
--partitions prints one row per partition instead, with the client consuming it. Then the
members of each live group: consumer id, client id and host. -o json or -o yaml prints every
group with its members, topics and partitions, under the same names as the table's columns;
"members" is always the list of live members (empty when none), at group level only.`,
		Example: `  backflow groups
  backflow groups backflow-ingest --partitions
  backflow groups -o json backflow-ingest`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(format); err != nil {
				return err
			}
			if timeout <= 0 {
				return fmt.Errorf("%w: --timeout must be positive, got %v", errUsage, timeout)
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
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			sts, err := replay.Status(ctx, kadm.NewClient(cl), args...)
			if err != nil {
				return fmt.Errorf("groups: %w", err)
			}
			out := cmd.OutOrStdout()
			if format != formatTable {
				docs := []groupDoc{}
				for _, st := range sts {
					docs = append(docs, newGroupDoc(st))
				}
				return writeDoc(out, format, docs)
			}
			if len(sts) == 0 {
				fmt.Fprintln(out, "no consumer groups")
				return nil
			}
			if partitions {
				rows := []partitionRow{}
				for _, st := range sts {
					rows = append(rows, partitionRows(st)...)
					if len(st.Partitions) == 0 {
						rows = append(rows, partitionRow{Group: st.Group, State: st.State, Partition: -1, CurrentOffset: -1, LogEndOffset: -1, Lag: -1})
					}
				}
				if err := writeTable(out, rows); err != nil {
					return err
				}
			} else {
				rows := []topicRow{}
				for _, st := range sts {
					ts := topicRows(st)
					rows = append(rows, ts...)
					if len(ts) == 0 {
						rows = append(rows, topicRow{Group: st.Group, State: st.State, Members: len(st.Members), Partitions: -1, CurrentOffset: -1, LogEndOffset: -1, Lag: -1})
					}
				}
				if err := writeTable(out, rows); err != nil {
					return err
				}
			}
			var members []memberRow
			for _, st := range sts {
				members = append(members, memberRows(st)...)
			}
			if len(members) > 0 {
				fmt.Fprintln(out)
				return writeTable(out, members)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&partitions, "partitions", false, "one row per partition")
	durationVar(cmd.Flags(), &timeout, "timeout", 30*time.Second, "give up after this long")
	addOutputFlag(cmd, &format)
	return cmd
}
