// Command bench-dashboard times every dashboard panel on tables of production size, in the old
// layout and the new one, with the same rows in the same run: `make bench-dashboard`.
//
// For each size it makes two scratch databases on the stack's ClickHouse, one after the other
// (a layout of 100M requests takes about 30 GB). The old one gets the migrations up to 0014
// (the tables as they were; the panels' SQL over the per-minute views, dashdata.ViewSQL); the
// new one every migration backflow has (the panels read the rollups: dashboard.Panels). Both
// get the same synthetic traffic over the last --days days (test/dashdata: inference results,
// gateway rows, moderation hits, dead letters, the ledger), and the new one its rollups by
// rollup.Backfill, the code an existing deployment runs.
//
// The old layout is timed, then dropped. It reads the whole table whatever the range, and
// takes minutes a query at 100M requests: it is timed at the shortest range (--old-ranges),
// and a query of more than a minute (--old-once) runs once; --old-sizes leaves it out at the
// sizes not named. The new layouts are kept, and
// timed last, side by side: every panel over the last 30 minutes, 6 hours, 7 and 30 days
// (--ranges), the sizes interleaved, --runs times each, the best and the worst kept. Then they
// are dropped.
//
// With --lock FILE it takes an flock on FILE, shared while it fills and exclusive while it
// times, so that on a shared machine the timings run alone.
//
//	go run ./bench/dashboard --sizes 1M --runs 1      # a quick look, about 3 minutes
//	make bench-dashboard                              # 10M and 100M; bench/dashboard.json
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/backflowhq/backflow/internal/envfile"
	"github.com/backflowhq/backflow/pipelines"
)

type options struct {
	envFile   string
	sizes     []uint64
	days      int
	ranges    []time.Duration
	oldRanges map[time.Duration]bool
	oldSizes  map[uint64]bool
	runs      int
	oldOnce   time.Duration
	lock      string
	summary   string
	keep      bool
	maxQuery  time.Duration
}

func main() {
	var o options
	sizes := flag.String("sizes", "10M,100M", "inference results per size, in order (suffixes k and M); each size gets two fresh databases")
	ranges := flag.String("ranges", "30m,6h,7d,30d", "the panels' ranges, each ending at the newest request (suffixes m, h, d)")
	oldRanges := flag.String("old-ranges", "30m", "the ranges at which the old layout is timed too: it reads the whole table whatever the range, so one shows it")
	oldSizes := flag.String("old-sizes", "", "the sizes at which the old layout is built and timed (empty: every size); at 100M its fill and timing take about 45 minutes")
	flag.StringVar(&o.envFile, "env-file", ".stack/env", "the stack's env file (deploy/local/stack up writes it); variables already set win")
	flag.IntVar(&o.days, "days", 30, "days of traffic, ending now")
	flag.IntVar(&o.runs, "runs", 3, "times each query runs (old and new interleaved); the best is the figure")
	flag.DurationVar(&o.oldOnce, "old-once", time.Minute, "an old-layout query that takes longer than this runs once: its figure is that run")
	flag.StringVar(&o.lock, "lock", "", "a file to flock: shared while filling, exclusive while timing (empty: none)")
	flag.StringVar(&o.summary, "summary", "bench/dashboard.json", "where to write the summary, the file to commit (empty: none)")
	flag.BoolVar(&o.keep, "keep", false, "keep the scratch databases (default: dropped at the end, also on an interrupt)")
	flag.DurationVar(&o.maxQuery, "query-timeout", 10*time.Minute, "longest one panel query may run")
	flag.Parse()
	var err error
	if o.sizes, err = parseSizes(*sizes); err != nil {
		fail(2, "--sizes: %v", err)
	}
	if o.ranges, err = parseRanges(*ranges); err != nil {
		fail(2, "--ranges: %v", err)
	}
	olds, err := parseRanges(*oldRanges)
	if err != nil {
		fail(2, "--old-ranges: %v", err)
	}
	o.oldRanges = map[time.Duration]bool{}
	for _, d := range olds {
		o.oldRanges[d] = true
	}
	o.oldSizes = map[uint64]bool{}
	if *oldSizes == "" {
		*oldSizes = *sizes
	}
	olders, err := parseSizes(*oldSizes)
	if err != nil {
		fail(2, "--old-sizes: %v", err)
	}
	for _, n := range olders {
		o.oldSizes[n] = true
	}
	if o.runs < 1 || o.days < 1 {
		fail(2, "--runs %d, --days %d: want 1 or more", o.runs, o.days)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fail(1, "%v", err)
	}
}

func fail(code int, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench-dashboard: "+format+"\n", args...)
	os.Exit(code)
}

func run(ctx context.Context, o options) error {
	if err := envfile.Apply(o.envFile); err != nil {
		return fmt.Errorf("--env-file: %w (start the stack: deploy/local/stack up)", err)
	}
	conns, err := pipelines.FromEnv(os.Getenv)
	if err != nil {
		return err
	}
	if conns.ClickHouse.Addr == "" || conns.ClickHouse.Cluster != "" {
		return fmt.Errorf("BACKFLOW_CLICKHOUSE_ADDR %q, cluster %q: the benchmark runs on one server", conns.ClickHouse.Addr, conns.ClickHouse.Cluster)
	}
	lk, err := openLock(o.lock)
	if err != nil {
		return err
	}
	defer lk.close()
	b := &bench{opt: o, base: conns.ClickHouse, lock: lk, started: time.Now().UTC()}
	b.sum = summary{Started: b.started.Format(time.RFC3339), Commit: gitCommit(), Days: o.days, Runs: o.runs}
	b.sum.Machine.Cores = runtime.NumCPU()
	b.sum.Machine.LoadAverageStart = loadAverage()
	for _, d := range o.ranges {
		b.sum.Ranges = append(b.sum.Ranges, rangeName(d))
	}
	b.to = b.started.Truncate(time.Minute).Add(-time.Minute).Add(23 * time.Second)
	b.from = b.to.Add(-time.Duration(o.days) * 24 * time.Hour)
	// Each size: the old layout built, timed and dropped (a layout of 100M requests takes
	// about 30 GB), then the new one built and kept; last, the new layouts of all sizes timed
	// side by side.
	var news []db
	defer func() { b.drop(news) }()
	for _, n := range o.sizes {
		res := sizeResult{Requests: n, Size: sizeName(n)}
		if o.oldSizes[n] {
			old, err := b.build(ctx, layoutOld, &res)
			if err == nil {
				err = b.timeOld(ctx, old, &res)
			}
			b.drop([]db{old})
			if err != nil {
				return err
			}
		}
		nd, err := b.build(ctx, layoutNew, &res)
		news = append(news, nd)
		if err != nil {
			return err
		}
		b.sum.Sizes = append(b.sum.Sizes, res)
	}
	if err := b.timeNew(ctx, news, b.sum.Sizes); err != nil {
		return err
	}
	for i := range b.sum.Sizes {
		b.sum.Sizes[i].sortPanels(b.sum.Ranges)
	}
	b.sum.Targets = targets(b.sum.Sizes)
	fmt.Print(markdown(b.sum))
	if o.summary == "" {
		return nil
	}
	out, err := json.MarshalIndent(b.sum, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(o.summary), 0o755); err != nil {
		return err
	}
	return os.WriteFile(o.summary, append(out, '\n'), 0o644)
}

// parseSizes reads "10M,100M" (suffixes k and M).
func parseSizes(s string) ([]uint64, error) {
	var out []uint64
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		mult := uint64(1)
		switch {
		case strings.HasSuffix(f, "M"):
			mult, f = 1_000_000, strings.TrimSuffix(f, "M")
		case strings.HasSuffix(f, "k"):
			mult, f = 1_000, strings.TrimSuffix(f, "k")
		}
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("%q is not a size such as 10M", f)
		}
		out = append(out, n*mult)
	}
	return out, nil
}

// parseRanges reads "30m,6h,7d" (suffixes m, h and d).
func parseRanges(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		unit := map[byte]time.Duration{'m': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour}
		if len(f) < 2 || unit[f[len(f)-1]] == 0 {
			return nil, fmt.Errorf("%q is not a range such as 30m, 6h or 7d", f)
		}
		n, err := strconv.Atoi(f[:len(f)-1])
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a range such as 30m, 6h or 7d", f)
		}
		out = append(out, time.Duration(n)*unit[f[len(f)-1]])
	}
	return out, nil
}

// rangeName writes a range as --ranges reads it.
func rangeName(d time.Duration) string {
	switch {
	case d%(24*time.Hour) == 0:
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	}
	return fmt.Sprintf("%dm", d/time.Minute)
}

// sizeName writes a size as --sizes reads it.
func sizeName(n uint64) string {
	switch {
	case n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n%1_000 == 0:
		return fmt.Sprintf("%dk", n/1_000)
	}
	return strconv.FormatUint(n, 10)
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}
