package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/sinks/redis"
	"github.com/backflowhq/backflow/test/stackclean"
)

// ID returns tag followed by the time in nanoseconds, unique in this process. Build every name a
// test makes on the shared stack from one (inf-<id>, it_<id>): test/leftovers tells a test's
// names from the stack's own by it.
func ID(tag string) string { return stackclean.ID(tag) }

// CleanupTimeout bounds each removal at the end of a test. Deleting a consumer group waits for
// the session of a member that was killed without leaving to time out (45 s at most); on a
// loaded machine ClickHouse 18.16 can take long to drop a database with many parts.
const CleanupTimeout = 2 * time.Minute

// AtEnd runs remove when the test ends, with a context of its own (the test's has ended by
// then), and fails the test if it returns an error: what it could not remove stays behind.
func AtEnd(t testing.TB, what string, remove func(ctx context.Context) error) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), CleanupTimeout)
		defer cancel()
		if err := remove(ctx); err != nil {
			t.Errorf("cleanup: %s: %v", what, err)
		}
	})
}

// withClient runs f with a new client on cfg: the removals at the end of a test use clients of
// their own, so a test that closed its clients (in a defer, which runs before t.Cleanup) still
// gets its topics and groups removed.
func withClient(ctx context.Context, cfg kafka.Conn, f func(*kgo.Client) error) error {
	cl, err := cfg.NewClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	return f(cl)
}

// Topics creates the topics (partitions each, replication 1) unless they exist, waits until
// every partition has a leader, and deletes them when the test ends.
func Topics(t testing.TB, ctx context.Context, cfg kafka.Conn, partitions int32, names ...string) {
	t.Helper()
	specs := make([]kafka.TopicSpec, len(names))
	for i, n := range names {
		specs[i] = kafka.TopicSpec{Name: n, Partitions: partitions}
	}
	TopicSpecs(t, ctx, cfg, specs...)
}

// TopicSpecs is Topics with each topic's own partitions and settings.
func TopicSpecs(t testing.TB, ctx context.Context, cfg kafka.Conn, specs ...kafka.TopicSpec) {
	t.Helper()
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	RemoveTopics(t, cfg, names...) // registered first: a topic half made is removed too
	if err := withClient(ctx, cfg, func(cl *kgo.Client) error { return kafka.EnsureTopics(ctx, cl, specs...) }); err != nil {
		t.Fatalf("create topics %v on %v: %v", names, cfg.Brokers, err)
	}
}

// RemoveTopics deletes topics when the test ends: those the code under test creates (a
// stage's DLQ, goka's loopback and table topics), or that the test creates itself.
func RemoveTopics(t testing.TB, cfg kafka.Conn, topics ...string) {
	t.Helper()
	AtEnd(t, fmt.Sprintf("delete topics %v", topics), func(ctx context.Context) error {
		return withClient(ctx, cfg, func(cl *kgo.Client) error { return stackclean.DeleteTopics(ctx, cl, topics...) })
	})
}

// Groups deletes consumer groups when the test ends, once their members have left. Register
// them before starting what joins them: cleanups run last registered first, so the stages
// (stopped by cleanups registered later) are gone by then.
func Groups(t testing.TB, cfg kafka.Conn, groups ...string) {
	t.Helper()
	AtEnd(t, fmt.Sprintf("delete groups %v", groups), func(ctx context.Context) error {
		return withClient(ctx, cfg, func(cl *kgo.Client) error { return stackclean.DeleteGroups(ctx, cl, groups...) })
	})
}

// Subjects deletes registry subjects for good when the test ends.
func Subjects(t testing.TB, reg *sr.Client, subjects ...string) {
	t.Helper()
	AtEnd(t, fmt.Sprintf("delete subjects %v", subjects), func(ctx context.Context) error {
		return stackclean.DeleteSubjects(ctx, reg, subjects...)
	})
}

// RedisKeys deletes the keys matching pattern (a SCAN pattern: "*p<id>" is a Feast project's)
// from the Redis of cfg when the test ends.
func RedisKeys(t testing.TB, cfg redis.Conn, pattern string) {
	t.Helper()
	AtEnd(t, "delete Redis keys "+pattern, func(ctx context.Context) error {
		rdb, err := redis.Open(ctx, cfg)
		if err != nil {
			return err
		}
		defer rdb.Close()
		_, err = stackclean.DeleteRedisKeys(ctx, rdb, pattern)
		return err
	})
}

// Database creates ClickHouse database name and drops it when the test ends. open connects to
// the server; it is called again for the drop, so the drop gets a connection of its own
// whatever the test did to the server or its connections.
func Database(t testing.TB, ctx context.Context, name string, open func(context.Context) (driver.Conn, error)) {
	t.Helper()
	drop := func(ctx context.Context) error {
		conn, err := open(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		return stackclean.DropDatabase(ctx, conn, name)
	}
	AtEnd(t, "drop database "+name, func(ctx context.Context) error {
		err := drop(ctx)
		if err != nil { // a server the test restarted can break the first connection: once more
			t.Logf("drop database %s: %v; trying again on a new connection", name, err)
			err = drop(ctx)
		}
		return err
	})
	conn, err := open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
}
