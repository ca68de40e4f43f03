package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at build time: -ldflags "-X main.version=v1.2.3".
var version = "dev"

func newVersionCmd() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print backflow's version and the Go toolchain it was built with",
		Example: `  backflow version
  backflow version -o json`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(format); err != nil {
				return err
			}
			v := versionDoc{Version: version}
			if bi, ok := debug.ReadBuildInfo(); ok {
				v.Go = bi.GoVersion
				for _, s := range bi.Settings {
					if s.Key == "vcs.revision" {
						v.Revision = s.Value
					}
				}
			}
			if format != formatTable {
				return writeDoc(cmd.OutOrStdout(), format, v)
			}
			line := "backflow " + v.Version
			if len(v.Revision) >= 12 {
				line += " (" + v.Revision[:12] + ")"
			}
			if v.Go != "" {
				line += " " + v.Go
			}
			_, err := fmt.Fprintln(cmd.OutOrStdout(), line)
			return err
		},
	}
	addOutputFlag(cmd, &format)
	return cmd
}

// versionDoc is what version -o json|yaml prints.
type versionDoc struct {
	Version  string `json:"version" yaml:"version"`
	Revision string `json:"revision,omitempty" yaml:"revision,omitempty"` // the commit, when built from a checkout
	Go       string `json:"go" yaml:"go"`
}
