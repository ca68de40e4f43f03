package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at build time: -ldflags "-X main.version=v1.2.3".
var version = "dev"

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print backflow's version and the Go toolchain it was built with",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			rev := ""
			if bi, ok := debug.ReadBuildInfo(); ok {
				for _, s := range bi.Settings {
					if s.Key == "vcs.revision" && len(s.Value) >= 12 {
						rev = " (" + s.Value[:12] + ")"
					}
				}
				fmt.Fprintf(cmd.OutOrStdout(), "backflow %s%s %s\n", version, rev, bi.GoVersion)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "backflow %s\n", version)
			return nil
		},
	}
}
