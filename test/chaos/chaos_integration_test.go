package chaos

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/backflowhq/backflow/test/testenv"
)

// suite builds the binaries once and returns the options of a run on the local stack.
func suite(t *testing.T) Options {
	t.Helper()
	testenv.Integration(t)
	repo := RepoRoot()
	stackDir := filepath.Join(repo, ".stack")
	if d := os.Getenv("BACKFLOW_STACK_DIR"); d != "" {
		stackDir = d
	}
	stack, err := LoadStack(filepath.Join(stackDir, "env"), true)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	bins, err := Build(ctx, repo, filepath.Join(dir, "bin"))
	if err != nil {
		t.Fatal(err)
	}
	return Options{Stack: stack, Script: StackScript{Repo: repo}, Bins: bins, Dir: dir, Logf: t.Logf}
}

// TestFastSubset is the part of the fault-injection suite that make test runs (make chaos runs
// all of it, at full size): a SIGKILLed processor, a ClickHouse reply lost after the insert
// landed, the poison mix and a registry outage, each on 5,000 records with its faults at 0.3×
// reliability.md's durations. Each must pass: lost 0, dup 0 through the deduplicating views,
// misrouted 0, memory under the cap, every group caught up, and the scenario's own checks. The
// faults come from the fault proxies and child processes, never from stopping a service other
// packages' tests share.
func TestFastSubset(t *testing.T) {
	o := suite(t)
	o.Scale, o.Records = 0.3, 5000
	rep := &Report{Scale: o.Scale}
	for _, s := range Scenarios {
		if !s.Fast {
			continue
		}
		t.Run(s.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			o := o
			o.Logf = t.Logf
			res := Execute(ctx, s, o)
			rep.Results = append(rep.Results, res)
			if res.Skipped != "" {
				t.Fatalf("skipped: %s", res.Skipped) // a fast scenario needs nothing the plain stack lacks
			}
			if !res.Pass {
				t.Errorf("scenario %d %s failed: lost %d, dup %d (raw %d), misrouted %d, caught up %v", s.ID, s.Name, res.Lost, res.DupDedup, res.DupRaw, res.Misrouted, res.CaughtUp)
				for _, f := range res.Failures {
					t.Errorf("  %s", f)
				}
				if res.Counts != nil {
					for _, e := range res.Counts.Examples {
						t.Errorf("  e.g. %s", e)
					}
				}
			}
			if res.Counts == nil || res.Counts.Valid == 0 || res.Records < o.Records/2 {
				t.Errorf("the scenario measured %d records (%+v): the oracle saw no traffic", res.Records, res.Counts)
			}
		})
	}
	rep.Tally()
	var b bytes.Buffer
	rep.WriteTable(&b)
	t.Logf("fast subset:\n%s", b.String())
}
