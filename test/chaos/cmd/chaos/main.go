// Command chaos runs the fault-injection suite (reliability.md's scenarios) on the local
// stack and prints lost, dup and misrouted per scenario; make chaos and make soak run it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/backflowhq/backflow/test/chaos"
)

func main() {
	os.Exit(run())
}

func run() int {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	only := fs.String("scenarios", "all", `scenario numbers to run, comma-separated ("1,3,7"), "fast" for make test's subset, or "all"`)
	records := fs.Int("records", 0, "records to generate per scenario (0: each scenario's own size, 100,000 for #1)")
	scale := fs.Float64("scale", 1, "multiply every fault's duration (1: reliability.md's durations)")
	soak := fs.Duration("soak", 0, "run only scenario 20, the soak, for this long")
	out := fs.String("json", ".chaos/results.json", "where to write the results as JSON")
	rssCap := fs.Int("rss-cap-mib", 768, "memory cap of each backflow process, MiB")
	markdown := fs.String("print-markdown", "", "print the results JSON file given as a markdown table, and run nothing")
	summary := fs.String("summary", "", "also write the summary the docs quote to this file (make chaos: test/chaos/latest.json)")
	summarize := fs.Bool("summarize", false, "print the summary of the results JSON files given as arguments (later runs replace a scenario's earlier result), and run nothing")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: go run ./test/chaos/cmd/chaos [flags]\n\nRuns the fault-injection suite on the stack of .stack/env (deploy/local/stack up;\nscenarios 15, 20 and 25 need --brokers 3, scenario 19 the secured stack). Each scenario gets a\nprivate pipeline; the table shows lost, dup and misrouted against loadgen's manifest.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		return 2
	}
	if *summarize {
		var reps []*chaos.Report
		for _, path := range fs.Args() {
			rep, err := chaos.ReadReport(path)
			if err != nil {
				fmt.Fprintln(os.Stderr, "chaos:", err)
				return 1
			}
			reps = append(reps, rep)
		}
		if len(reps) == 0 {
			fmt.Fprintln(os.Stderr, "chaos: --summarize needs one or more results files")
			return 2
		}
		if err := chaos.Summarize(reps...).WriteSummary("/dev/stdout"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	}
	if *markdown != "" {
		rep, err := chaos.ReadReport(*markdown)
		if err != nil {
			fmt.Fprintln(os.Stderr, "chaos:", err)
			return 1
		}
		rep.WriteMarkdown(os.Stdout)
		return 0
	}
	var list []*chaos.Scenario
	switch {
	case *soak > 0:
		list = []*chaos.Scenario{chaos.ByID(20)}
	case *only == "all":
		for _, s := range chaos.Scenarios {
			if s.ID != 20 {
				list = append(list, s)
			}
		}
	case *only == "fast":
		for _, s := range chaos.Scenarios {
			if s.Fast {
				list = append(list, s)
			}
		}
	default:
		for _, f := range strings.Split(*only, ",") {
			id, err := strconv.Atoi(strings.TrimSpace(f))
			s := chaos.ByID(id)
			if err != nil || s == nil {
				fmt.Fprintf(os.Stderr, "chaos: --scenarios: %q is not a scenario number (1..%d)\n", f, len(chaos.Scenarios))
				return 2
			}
			list = append(list, s)
		}
	}
	repo := chaos.RepoRoot()
	stackDir := filepath.Join(repo, ".stack")
	if d := os.Getenv("BACKFLOW_STACK_DIR"); d != "" {
		stackDir = d
	}
	stack, err := chaos.LoadStack(filepath.Join(stackDir, "env"), true)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	secureStack, _ := chaos.LoadStack(filepath.Join(stackDir, "secure", "env"), false)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
	scratch := filepath.Join(repo, ".chaos", time.Now().Format("20060102-150405"))
	logf("building backflow and sensitive-words")
	bins, err := chaos.Build(ctx, repo, filepath.Join(scratch, "bin"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	opts := chaos.Options{Stack: stack, SecureStack: secureStack, Script: chaos.StackScript{Repo: repo}, Bins: bins, Dir: scratch,
		Scale: *scale, Records: *records, SoakDuration: *soak, RSSCap: int64(*rssCap) << 20, Logf: logf}
	host, _ := os.Hostname()
	rep := &chaos.Report{Started: time.Now().UTC().Format(time.RFC3339), Host: host, Scale: *scale,
		Brokers: len(strings.Split(stack.Get("BACKFLOW_KAFKA_BROKERS"), ","))}
	for _, s := range list {
		if ctx.Err() != nil {
			break
		}
		rep.Results = append(rep.Results, chaos.Execute(ctx, s, opts))
		rep.Tally()
		if err := rep.WriteJSON(*out); err != nil {
			logf("write %s: %v", *out, err)
		}
	}
	rep.Tally()
	fmt.Println()
	rep.WriteTable(os.Stdout)
	fmt.Printf("results: %s; scratch folders and logs: %s\n", *out, scratch)
	if *summary != "" {
		if err := chaos.Summarize(rep).WriteSummary(*summary); err != nil {
			logf("%v", err)
		} else {
			fmt.Printf("summary: %s\n", *summary)
		}
	}
	if rep.Failed > 0 || ctx.Err() != nil {
		return 1
	}
	return 0
}
