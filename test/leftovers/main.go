// Command leftovers lists what tests left behind on the local stacks: Kafka topics and consumer
// groups, registry subjects, ClickHouse databases (and tables in the default database) and
// Redis keys whose names carry a test ID (a 19-digit nanosecond stamp, see test/stackclean).
// The stacks' own names carry none, so they are never listed. It exits 1 when it finds any.
// What a benchmark made (names starting bench_) is listed apart and not counted: a benchmark
// may run beside the tests and drops its own; --delete removes it too.
//
//	go run ./test/leftovers                     # both stacks, everything stamped
//	go run ./test/leftovers --since 1767225600000000000   # only what was made after (unix ns or RFC 3339)
//	go run ./test/leftovers --delete --older-than 1h   # remove what crashed runs left (not a run under way)
//
// The plain stack's addresses come from the environment and .stack/env (as the tests read them,
// BACKFLOW_STACK_DIR moves it), the secured stack's from .stack/secure/env; a stack whose env
// file is missing is skipped with a note. `make test` runs it after the tests, with --since the
// moment they started; another test run on the same stack at the same time shows up too.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/envfile"
	"github.com/backflowhq/backflow/pipelines"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
	"github.com/backflowhq/backflow/sinks/redis"
	"github.com/backflowhq/backflow/test/stackclean"
	"github.com/backflowhq/backflow/test/testenv"
)

func main() {
	since := flag.String("since", "", "only what was made at or after this time: unix nanoseconds, unix seconds or RFC 3339")
	olderThan := flag.Duration("older-than", 0, "only what was made at least this long ago (what a test run under way now made is left alone)")
	del := flag.Bool("delete", false, "delete what is found")
	which := flag.String("stack", "both", "plain, secure or both")
	timeout := flag.Duration("timeout", 3*time.Minute, "give up after this long")
	flag.Parse()
	m := stackclean.Match{}
	if *since != "" {
		at, err := parseTime(*since)
		if err != nil {
			fail(2, "leftovers: --since: %v", err)
		}
		m.Since = at
	}
	if *olderThan > 0 {
		m.Until = time.Now().Add(-*olderThan)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	found, broken := 0, false
	for _, st := range stacks(*which) {
		if st.err != nil {
			fmt.Fprintf(os.Stderr, "leftovers: %s stack: %v\n", st.name, st.err)
			broken = true
			continue
		}
		if st.get == nil {
			fmt.Printf("%s stack: skipped (%s)\n", st.name, st.note)
			continue
		}
		items, err := check(ctx, st, m, *del)
		if err != nil {
			fmt.Fprintf(os.Stderr, "leftovers: %s stack: %v\n", st.name, err)
			broken = true
		}
		found += len(items)
	}
	switch {
	case broken:
		os.Exit(2)
	case found > 0:
		os.Exit(1)
	}
}

type stack struct {
	name, note string
	get        func(string) string // nil: skipped
	err        error
}

func stacks(which string) []stack {
	var out []stack
	if which == "plain" || which == "both" {
		out = append(out, stack{name: "plain", get: testenv.Get})
	}
	if which == "secure" || which == "both" {
		path := testenv.SecureEnvFile()
		st := stack{name: "secured"}
		if _, err := os.Stat(path); err != nil {
			st.note = "no env file " + path + "; deploy/local/stack --secure up writes it"
		} else if vals, err := envfile.Load(path); err != nil {
			st.err = err
		} else {
			st.get = func(k string) string { return vals[k] }
		}
		out = append(out, st)
	}
	if len(out) == 0 {
		fail(2, "leftovers: --stack %q: want plain, secure or both", which)
	}
	return out
}

// check lists (and with del removes) what on st m selects, and returns what is left.
func check(ctx context.Context, st stack, m stackclean.Match, del bool) ([]stackclean.Item, error) {
	conn, err := pipelines.FromEnv(st.get)
	if err != nil {
		return nil, err
	}
	s, closeAll, err := connect(ctx, conn)
	if err != nil {
		return nil, err
	}
	defer closeAll()
	items, err := stackclean.Find(ctx, s, m)
	if err != nil {
		return items, err
	}
	if !del {
		var bench []stackclean.Item
		items, bench = splitBenchmarks(items)
		if len(bench) > 0 {
			fmt.Printf("%s stack: %d made by a benchmark, not counted (it drops them when it ends; --delete --older-than 1h removes a crashed one's):\n", st.name, len(bench))
			show(bench)
		}
	}
	if len(items) > 0 && del {
		fmt.Printf("%s stack: deleting %d left behind by tests\n", st.name, len(items))
		show(items)
		rerr := stackclean.Remove(ctx, s, items)
		// Kafka deletes topics in the background: look again until they are gone (15 s).
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(500 * time.Millisecond) {
			items, err = stackclean.Find(ctx, s, m)
			if err != nil || len(items) == 0 || time.Now().After(deadline) {
				break
			}
		}
		if err == nil {
			err = rerr
		}
	}
	if len(items) == 0 {
		fmt.Printf("%s stack: nothing left behind by tests\n", st.name)
		return nil, err
	}
	fmt.Printf("%s stack: %d left behind by tests (go run ./test/leftovers --delete removes them):\n", st.name, len(items))
	show(items)
	return items, err
}

// splitBenchmarks separates what a benchmark made (stackclean.IsBenchmark) from the rest.
func splitBenchmarks(items []stackclean.Item) (tests, bench []stackclean.Item) {
	for _, it := range items {
		if stackclean.IsBenchmark(it.Name) {
			bench = append(bench, it)
		} else {
			tests = append(tests, it)
		}
	}
	return tests, bench
}

// show prints items a line each, but Redis keys (a test writes thousands) as a count per ID
// with an example.
func show(items []stackclean.Item) {
	type keys struct {
		n       int
		example string
	}
	byStamp := map[time.Time]*keys{}
	var stamps []time.Time
	for _, it := range items {
		if it.Kind != stackclean.KindRedisKey {
			fmt.Printf("  %s\n", it)
			continue
		}
		at := it.Created()
		if byStamp[at] == nil {
			byStamp[at] = &keys{example: it.Name}
			stamps = append(stamps, at)
		}
		byStamp[at].n++
	}
	slices.SortFunc(stamps, time.Time.Compare)
	for _, at := range stamps {
		k := byStamp[at]
		fmt.Printf("  %-9s %d made %s, e.g. %q\n", "redis keys", k.n, at.Format(time.RFC3339), k.example)
	}
}

// connect opens a connection to each service of conn (ClickHouse without a database: it lists
// them all).
func connect(ctx context.Context, conn pipelines.Conns) (stackclean.Stack, func(), error) {
	var s stackclean.Stack
	var closers []func()
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	var err error
	if s.Kafka, err = conn.Kafka.NewClient(); err != nil {
		return s, closeAll, fmt.Errorf("kafka: %w", err)
	}
	closers = append(closers, s.Kafka.Close)
	if s.Registry, err = avro.NewRegistryClient(conn.Registry); err != nil {
		return s, closeAll, fmt.Errorf("registry: %w", err)
	}
	ch := conn.ClickHouse
	ch.Database = ""
	if s.CH, err = chschema.Open(ctx, ch); err != nil {
		return s, closeAll, fmt.Errorf("clickhouse: %w", err)
	}
	closers = append(closers, func() { s.CH.Close() })
	if s.Redis, err = redis.Open(ctx, conn.Redis); err != nil {
		return s, closeAll, fmt.Errorf("redis: %w", err)
	}
	closers = append(closers, func() { s.Redis.Close() })
	return s, closeAll, nil
}

func parseTime(v string) (time.Time, error) {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 1e12 { // seconds
			return time.Unix(n, 0), nil
		}
		return time.Unix(0, n), nil
	}
	if at, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return at, nil
	}
	return time.Time{}, errors.New("want unix nanoseconds, unix seconds or an RFC 3339 time, got " + strconv.Quote(v))
}

func fail(code int, format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(code)
}
