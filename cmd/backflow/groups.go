package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/backflowhq/backflow/pipelines/replay"
)

func newGroupsCmd() *cobra.Command {
	var partitions bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "groups [GROUP...]",
		Short: "List consumer groups with their state, members and lag per topic",
		Long: `groups describes consumer groups (every group when none is named), as kafka-consumer-groups
--describe does: for each group its state (Stable, Empty, PreparingRebalance...), its live members,
and per topic the partitions, the sum of committed offsets, the sum of log ends and the lag.
--partitions prints one row per partition instead, with the client consuming it. Then the
members of each live group: client id, member id and host.`,
		Example: `  backflow groups
  backflow groups backflow-ingest --partitions`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if timeout <= 0 {
				return fmt.Errorf("%w: --timeout must be positive, got %v", errUsage, timeout)
			}
			conn, err := loadConfig()
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
				return err
			}
			out := cmd.OutOrStdout()
			if len(sts) == 0 {
				fmt.Fprintln(out, "no consumer groups")
				return nil
			}
			tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			if partitions {
				fmt.Fprintln(tw, "GROUP\tSTATE\tTOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tCONSUMER")
			} else {
				fmt.Fprintln(tw, "GROUP\tSTATE\tMEMBERS\tTOPIC\tPARTITIONS\tCOMMITTED\tLOG-END\tLAG")
			}
			for _, st := range sts {
				if partitions {
					for _, p := range st.Partitions {
						fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\t%d\t%s\n", st.Group, st.State, p.Topic, p.Partition, offsetOrDash(p.Committed), p.End, p.Lag, dash(p.Member))
					}
					if len(st.Partitions) == 0 {
						fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\t-\t-\t-\n", st.Group, st.State)
					}
					continue
				}
				topics := st.Topics()
				for _, t := range topics {
					fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%d\t%d\t%d\n", st.Group, st.State, len(st.Members), t.Topic, t.Partitions, t.Committed, t.End, t.Lag)
				}
				if len(topics) == 0 {
					fmt.Fprintf(tw, "%s\t%s\t%d\t-\t-\t-\t-\t-\n", st.Group, st.State, len(st.Members))
				}
			}
			tw.Flush()
			for _, st := range sts {
				for _, m := range st.Members {
					fmt.Fprintf(out, "member of %s: %s\n", st.Group, m)
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&partitions, "partitions", false, "one row per partition")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "give up after this long")
	return cmd
}
