package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/backflowhq/backflow/internal/conf"
	"github.com/backflowhq/backflow/internal/ops"
	"github.com/backflowhq/backflow/pipelines"
)

// keyFlag is a flag bound to a config key. Only flags given on the command line override the
// configuration; their defaults are shown for --help.
type keyFlag struct {
	key pipelines.Key
	val string
}

func (f *keyFlag) String() string { return f.val }
func (f *keyFlag) Type() string   { return f.key.Type }

// Set checks the value's form at once, so a bad flag fails like any other flag error.
func (f *keyFlag) Set(s string) error {
	var err error
	switch f.key.Type {
	case "duration":
		_, err = conf.ParseDuration(s)
	case "int":
		_, err = strconv.Atoi(s)
	case "bool":
		_, err = strconv.ParseBool(s)
	}
	if err != nil {
		return fmt.Errorf("want a %s", f.key.Type)
	}
	f.val = s
	return nil
}

// durationFlag is a duration flag in backflow's one duration form (conf.ParseDuration: 90s,
// 1h30m, 7d, P1DT6H), as the config's keys take it; pflag's own takes Go's form only, without
// days.
type durationFlag struct{ d *time.Duration }

// durationVar defines a duration flag in backflow's one form, with its default.
func durationVar(fs *pflag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var(durationFlag{p}, name, usage)
}

func (f durationFlag) String() string {
	if f.d == nil {
		return "0s"
	}
	return f.d.String()
}

func (f durationFlag) Type() string { return "duration" }

func (f durationFlag) Set(s string) error {
	d, err := conf.ParseDuration(s)
	if err != nil {
		return err
	}
	*f.d = d
	return nil
}

// runFlags are the flags of the commands that run stages, besides the shared --config: the
// process keys (--metrics-addr, --log-format, --log-level, --shutdown-timeout) and, for a stage
// command, its section's keys.
type runFlags struct {
	paths map[string]string // flag name → key path
	stage string            // the one stage a stage command runs; "" for run
}

// addRunFlags adds a flag per key in paths and in sections (named after the key,
// without the section: ingest.batch_size is --batch-size).
func addRunFlags(cmd *cobra.Command, stage string, paths []string, sections ...string) *runFlags {
	r := &runFlags{paths: map[string]string{}, stage: stage}
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[annotationLogs] = "true"
	fs := cmd.Flags()
	for _, p := range paths {
		k, ok := pipelines.KeyInfo(p)
		if !ok {
			panic("no config key " + p)
		}
		r.add(fs, strings.NewReplacer(".", "-", "_", "-").Replace(p), k)
	}
	for _, s := range sections {
		for _, k := range pipelines.KeysUnder(s) {
			_, key, _ := strings.Cut(k.Path, ".")
			r.add(fs, strings.ReplaceAll(key, "_", "-"), k)
		}
	}
	return r
}

func (r *runFlags) add(fs *pflag.FlagSet, name string, k pipelines.Key) {
	f := fs.VarPF(&keyFlag{key: k, val: k.Default}, name, "", k.Doc+" (config key "+k.Path+")")
	if k.Type == "bool" {
		f.NoOptDefVal = "true"
	}
	r.paths[name] = k.Path
}

// processKeys are the keys every stage-running command has as flags.
var processKeys = []string{"metrics.addr", "log.format", "log.level", "shutdown_timeout"}

// overrides are the key flags given on the command line.
func (r *runFlags) overrides(cmd *cobra.Command) []pipelines.Override {
	var overrides []pipelines.Override
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if p, ok := r.paths[f.Name]; ok {
			overrides = append(overrides, pipelines.Override{Path: p, Value: f.Value.String(), Source: "--" + f.Name})
		}
	})
	return overrides
}

// load reads the configuration with the flags given as overrides; a problem is a usage error.
func (r *runFlags) load(cmd *cobra.Command) (pipelines.Loaded, error) {
	overrides := r.overrides(cmd)
	if r.stage != "" {
		overrides = append(overrides, pipelines.Override{Path: "stages", Value: r.stage, Source: cmd.Name()})
	}
	l, err := pipelines.Load(configPath, nil, overrides...)
	if err != nil {
		var ce conf.Errors
		if errors.As(err, &ce) && len(ce) > 1 {
			return l, fmt.Errorf("%w: configuration has %d problems:\n  %s", errUsage, len(ce), strings.ReplaceAll(ce.Error(), "\n", "\n  "))
		}
		return l, fmt.Errorf("%w: configuration: %w", errUsage, err)
	}
	return l, nil
}

// run is the stage commands' RunE: it loads the configuration and runs its stages until the
// command's context ends.
func (r *runFlags) run(cmd *cobra.Command, _ []string) error {
	l, err := r.load(cmd)
	if err != nil {
		return err
	}
	log, err := ops.NewLogger(cmd.ErrOrStderr(), l.Config.Log.Format, l.Config.Log.Level)
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	for _, u := range pipelines.UnknownVariables(os.Environ()) {
		log.Warn(unknownVariable(u), "variable", u.Name, "did_you_mean", u.Nearest)
	}
	return pipelines.Run(cmd.Context(), l, pipelines.RunOptions{Logger: log})
}
