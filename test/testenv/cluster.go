package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	chgo "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/backflowhq/backflow/internal/envfile"
	"github.com/backflowhq/backflow/sinks/redis"
	"github.com/backflowhq/backflow/test/stackclean"
)

// Keys of the cluster stack's env file (deploy/local/stack --cluster up), besides the shared
// services' keys it copies from the plain stack's.
const (
	ClusterClickHouseName  = "BACKFLOW_CLICKHOUSE_CLUSTER"
	ClusterClickHouseAddrs = "BACKFLOW_CLICKHOUSE_CLUSTER_ADDRS"
	ClusterRedisAddrs      = "BACKFLOW_REDIS_ADDRS"
)

// ClusterStack is the running cluster stack: its env file's values.
type ClusterStack struct {
	Values map[string]string
	dir    string                                           // the cluster stack's folder
	run    func(context.Context, ...string) (string, error) // deploy/local/stack --cluster ARGS
}

// Kill ends the cluster stack's service name (clickhouse-s2r2, redis-1, ...) with SIGKILL, as a
// crash would; StartMissing brings it back.
func (c ClusterStack) Kill(t testing.TB, name string) {
	t.Helper()
	if err := c.Crash(name); err != nil {
		t.Fatal(err)
	}
}

// Crash is Kill for a goroutine other than the test's (a stage's callback): it returns the
// error instead of failing the test.
func (c ClusterStack) Crash(name string) error {
	b, err := os.ReadFile(filepath.Join(c.dir, "run", name+".pid"))
	if err != nil {
		return fmt.Errorf("testenv: kill %s: %w", name, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("testenv: kill %s: pid %q: %w", name, b, err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("testenv: kill %s (pid %d): %w", name, pid, err)
	}
	return nil
}

// StartMissing starts what of the cluster stack is not running (deploy/local/stack --cluster
// up) and waits until all of it is ready again.
func (c ClusterStack) StartMissing(ctx context.Context) error {
	out, err := c.run(ctx, "up")
	if err != nil {
		return fmt.Errorf("deploy/local/stack --cluster up: %w\n%s", err, out)
	}
	return nil
}

// Get returns the value of key in the cluster stack's env file, or "".
func (c ClusterStack) Get(key string) string { return c.Values[key] }

// List returns the comma-separated value of key as a list.
func (c ClusterStack) List(key string) []string {
	if c.Values[key] == "" {
		return nil
	}
	return strings.Split(c.Values[key], ",")
}

// Cluster gives t the cluster stack (ZooKeeper, ClickHouse 2 shards x 2 replicas, a Redis
// Cluster), which tests start only for themselves: if it is not running, Cluster starts it
// with deploy/local/stack --cluster up and stops it (--cluster down) when t ends; if it is
// running, it is reused and left running. It shares the plain stack's Kafka, registry and
// sensitive-word service (Integration's env file). Call Integration first.
//
// Cluster tests of different packages (go test ./... runs packages at once) take turns: each
// holds a lock on the stack folder from before it looks at the cluster until after it stopped
// it, so one never stops the cluster under another.
func Cluster(t testing.TB) ClusterStack {
	t.Helper()
	root, ok := moduleRoot()
	if !ok {
		t.Fatal("testenv: cluster: module root not found")
	}
	dir := os.Getenv("BACKFLOW_STACK_DIR")
	if dir == "" {
		dir = filepath.Join(root, ".stack")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "cluster-tests.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatalf("testenv: cluster lock: %v", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		lock.Close()
		t.Fatalf("testenv: cluster lock: %v", err)
	}
	// Registered first, so it runs last: after the stack's down and every other cleanup.
	t.Cleanup(func() {
		syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
		lock.Close()
	})
	stack := filepath.Join(root, "deploy", "local", "stack")
	run := func(ctx context.Context, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, stack, append([]string{"--cluster"}, args...)...)
		cmd.Env = append(os.Environ(), "BACKFLOW_CLUSTER_SHARED_ENV="+envFilePath())
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, statusErr := run(ctx, "status")
	if statusErr != nil {
		start := time.Now()
		if out, err := run(ctx, "up"); err != nil {
			t.Fatalf("testenv: deploy/local/stack --cluster up: %v\n%s", err, out)
		}
		t.Logf("cluster stack started in %v", time.Since(start).Round(time.Millisecond))
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if out, err := run(ctx, "down"); err != nil {
				t.Errorf("testenv: deploy/local/stack --cluster down: %v\n%s", err, out)
			}
		})
	}
	vals, err := envfile.Load(filepath.Join(dir, "cluster", "env"))
	if err != nil {
		t.Fatalf("testenv: the cluster stack's env file: %v", err)
	}
	cs := ClusterStack{Values: vals, dir: filepath.Join(dir, "cluster"), run: run}
	// What the test made on the cluster must be gone once its own cleanups ran (they run
	// before this one, which runs before the stack's down): test/leftovers looks at the plain
	// and secured stacks after make test, when the cluster stack is stopped again, so the
	// check is here. The lock makes everything stamped since it was taken this test's.
	since := time.Now()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), CleanupTimeout)
		defer cancel()
		items, err := cs.leftovers(ctx, stackclean.Match{Since: since})
		if err != nil {
			t.Errorf("testenv: cluster leftovers: %v", err)
		}
		for _, it := range items {
			t.Errorf("testenv: left behind on the cluster stack: %s", it)
		}
	})
	if statusErr == nil {
		// A reused stack is left as it was found: if the test crashed a node and did not bring
		// it back, or left the Redis Cluster unsettled, 'up' starts what is missing and waits
		// until it has converged. Registered last, so it runs first: the leftovers check needs
		// every slot served.
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			if _, err := run(ctx, "status"); err == nil {
				return
			}
			start := time.Now()
			if out, err := run(ctx, "up"); err != nil {
				t.Errorf("testenv: the cluster stack is not back after the test: deploy/local/stack --cluster up: %v\n%s", err, out)
				return
			}
			t.Logf("testenv: restarted what the test left down on the cluster stack, converged in %v", time.Since(start).Round(time.Millisecond))
		})
	}
	return cs
}

// leftovers lists what m selects on the cluster stack: databases and tables on every
// ClickHouse host (a table that is not replicated lives on one), and keys on the Redis Cluster.
func (c ClusterStack) leftovers(ctx context.Context, m stackclean.Match) ([]stackclean.Item, error) {
	var items []stackclean.Item
	var errs []error
	seen := map[stackclean.Item]bool{}
	for _, addr := range c.List(ClusterClickHouseAddrs) {
		// clickhouse-go itself: sinks/clickhouse's own tests import this package.
		conn, err := chgo.Open(&chgo.Options{Addr: []string{addr}, DialTimeout: 5 * time.Second})
		if err == nil {
			err = conn.Ping(ctx)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("clickhouse %s: %w", addr, err))
			continue
		}
		found, err := stackclean.Find(ctx, stackclean.Stack{CH: conn}, m)
		conn.Close()
		errs = append(errs, err)
		for _, it := range found {
			if !seen[it] {
				seen[it] = true
				items = append(items, it)
			}
		}
	}
	rdb, err := redis.Open(ctx, redis.Conn{Mode: redis.ModeCluster, Addrs: c.List(ClusterRedisAddrs)})
	if err != nil {
		return items, errors.Join(append(errs, err)...)
	}
	defer rdb.Close()
	found, err := stackclean.Find(ctx, stackclean.Stack{Redis: rdb}, m)
	return append(items, found...), errors.Join(append(errs, err)...)
}
