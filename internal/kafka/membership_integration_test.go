package kafka_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/codec"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/test/testenv"
)

// counter is one instance of a goka group that counts the records of each key in its table,
// on LevelDB storage in dir kept through kafka.Tables, as ingest and sink-features keep theirs.
type counter struct {
	t      *testing.T
	proc   *goka.Processor
	tables *kafka.Tables
	stop   context.CancelFunc
	done   chan error

	mu          sync.Mutex
	assignments []goka.Assignment // one per generation this instance took part in
}

func startCounter(t *testing.T, ctx context.Context, cfg kafka.Conn, topic string, group goka.Group, dir string, standby bool) *counter {
	t.Helper()
	c := &counter{t: t, done: make(chan error, 1)}
	c.tables = kafka.NewTables(kafka.GokaStorage(dir), standby)
	g := goka.DefineGroup(group,
		goka.Input(goka.Stream(topic), new(codec.String), func(ctx goka.Context, _ any) {
			var n int64
			if v := ctx.Value(); v != nil {
				n = v.(int64)
			}
			ctx.SetValue(n + 1)
		}),
		goka.Persist(new(codec.Int64)),
	)
	opts := append(cfg.ProcessorOptions(context.Background()), c.tables.Options(nil)...)
	opts = append(opts, goka.WithRebalanceCallback(func(a goka.Assignment) {
		c.mu.Lock()
		c.assignments = append(c.assignments, maps.Clone(a))
		c.mu.Unlock()
	}), goka.WithHasher(kafka.Murmur2Hasher)) // keys where franz-go's default partitioner puts them
	proc, err := kafka.NewGokaProcessor(ctx, cfg.Brokers, g, opts...)
	if err != nil {
		t.Fatalf("processor %s: %v", cfg.InstanceID, err)
	}
	c.proc = proc
	runCtx, stop := context.WithCancel(ctx)
	c.stop = stop
	go func() {
		err := proc.Run(runCtx)
		c.done <- err
	}()
	return c
}

// generations is how many generations the instance took part in, and its last assignment.
func (c *counter) generations() (int, []int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.assignments) == 0 {
		return 0, nil
	}
	return len(c.assignments), slices.Sorted(maps.Keys(c.assignments[len(c.assignments)-1]))
}

// held is how many distinct partitions the instance was ever assigned, and how many
// assignments of a partition its generations made in all.
func (c *counter) held() (distinct, given int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := map[int32]bool{}
	for _, a := range c.assignments {
		for p := range a {
			seen[p] = true
			given++
		}
	}
	return len(seen), given
}

// close stops the instance (a static member does not leave its group) and closes its tables.
func (c *counter) close() {
	c.t.Helper()
	c.stop()
	if err := <-c.done; err != nil {
		c.t.Logf("instance stopped: %v", err)
	}
	if err := c.tables.Close(); err != nil {
		c.t.Fatalf("close tables: %v", err)
	}
}

// createTable creates the group's table topic and waits until every partition has a leader,
// as the stages do before goka starts (ingest's prepare): goka asks each partition's leader
// for offsets right after creating the topic itself, and with recovery ahead of joining a
// leader not known yet stops the processor (NOT_LEADER_FOR_PARTITION).
func createTable(t *testing.T, ctx context.Context, cfg kafka.Conn, group goka.Group, partitions int32) {
	t.Helper()
	cl, err := cfg.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := kafka.EnsureTopics(ctx, cl, kafka.TopicSpec{Name: string(goka.GroupTable(group)), Partitions: partitions,
		Configs: map[string]string{"cleanup.policy": "compact"}}); err != nil {
		t.Fatal(err)
	}
}

// requestKeys is n keys req-0 … req-(n-1).
func requestKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("req-%d", i)
	}
	return keys
}

// waitSplit waits until each of the two instances owns two partitions.
func waitSplit(t *testing.T, ctx context.Context, a, b *counter) {
	t.Helper()
	waitFor(t, ctx, "two partitions each", func() bool {
		_, pa := a.generations()
		_, pb := b.generations()
		return len(pa) == 2 && len(pb) == 2
	})
}

// waitFor polls cond until it holds or ctx ends.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// emitAll emits one record for each of keys and waits until the instances' tables count
// want for each.
func emitAll(t *testing.T, ctx context.Context, cfg kafka.Conn, topic string, keys []string, want int64, insts ...*counter) {
	t.Helper()
	cl, err := cfg.NewClient(kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for _, k := range keys {
		recs = append(recs, &kgo.Record{Key: []byte(k), Value: []byte("x")})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	waitFor(t, ctx, fmt.Sprintf("every key counted %d times", want), func() bool {
		// goka's Get reads a partition's table unguarded while a generation's setup writes
		// it (the race detector catches it): read only from instances that are running.
		for _, c := range insts {
			if !c.proc.Recovered() {
				return false
			}
		}
		for _, k := range keys {
			var got int64
			for _, c := range insts {
				if v, err := c.proc.Get(k); err == nil && v != nil {
					got = max(got, v.(int64))
				}
			}
			if got != want {
				return false
			}
		}
		return true
	})
}

// TestStaticMembershipRestartMovesNothing: with an instance id, one instance of two stopped
// and started again on its kept disk gets its own partitions back, and the other instance
// takes part in no new generation (no rebalance, no table re-opened); its state is whole.
// Without one (the contrast that shows the check can fail), the same restart makes the other
// instance go through new generations; there it opens no partition from disk twice.
func TestStaticMembershipRestartMovesNothing(t *testing.T) {
	for _, static := range []bool{true, false} {
		t.Run(fmt.Sprintf("static=%v", static), func(t *testing.T) {
			base := testenv.Kafka(t, "backflow-static")
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			topic := testenv.CreateTopic(t, ctx, base, "static", 4)
			group := goka.Group(topic + "-counter")
			testenv.Groups(t, base, string(group))
			testenv.RemoveTopics(t, base, string(goka.GroupTable(group)))
			createTable(t, ctx, base, group, 4)
			conn := func(id string) kafka.Conn {
				c := base
				if static {
					c.InstanceID, c.SessionTimeout = id, 30*time.Second
				}
				return c
			}
			dirA, dirB := t.TempDir(), t.TempDir()
			a := startCounter(t, ctx, conn("slot-a"), topic, group, dirA, false)
			defer a.close()
			b := startCounter(t, ctx, conn("slot-b"), topic, group, dirB, false)
			// Both own two partitions.
			waitSplit(t, ctx, a, b)
			keys := requestKeys(40)
			emitAll(t, ctx, base, topic, keys, 1, a, b)
			genA, partsA := a.generations()
			_, partsB := b.generations()
			opened := a.tables.Opened()

			b.close()
			b2 := startCounter(t, ctx, conn("slot-b"), topic, group, dirB, false)
			defer b2.close()
			waitFor(t, ctx, "the restarted instance assigned", func() bool {
				n, p := b2.generations()
				if n == 0 || len(p) == 0 {
					return false
				}
				_, pa := a.generations()
				return len(p)+len(pa) == 4
			})
			// Records for every partition are counted: the restarted instance works, on its
			// kept state.
			emitAll(t, ctx, base, topic, keys, 2, a, b2)
			gen2A, parts2A := a.generations()
			_, partsB2 := b2.generations()
			if static {
				if gen2A != genA || !slices.Equal(parts2A, partsA) || !slices.Equal(partsB2, partsB) {
					t.Fatalf("static restart: the other instance went from %d to %d generations (partitions %v → %v), the restarted one had %v, now %v; want no new generation and the same partitions",
						genA, gen2A, partsA, parts2A, partsB, partsB2)
				}
				if a.tables.Opened() != opened {
					t.Fatalf("the other instance opened %d table partitions during the restart, want 0", a.tables.Opened()-opened)
				}
				t.Logf("static restart: other instance stayed in its generation with %v; restarted instance got %v back", parts2A, partsB2)
				return
			}
			if gen2A == genA {
				t.Fatalf("dynamic restart: the other instance saw no new generation (%d)", genA)
			}
			// Which partitions the other instance gets in each new generation depends on the
			// random member ids, so they may stay or move. Whatever they do, a partition it held
			// once is never opened from disk again within the keep time (kafka.Tables): without
			// that, every generation re-opens every partition it is given.
			distinct, given := a.held()
			if a.tables.Opened() > int64(distinct) {
				t.Fatalf("dynamic restart: the other instance opened %d table partitions from disk, more than the %d distinct ones it ever held (given %d times over %d generations)",
					a.tables.Opened(), distinct, given, gen2A)
			}
			t.Logf("dynamic restart: the other instance went through %d new generations, was given %d partitions %d times; opened %d from disk, took back %d open",
				gen2A-genA, distinct, given, a.tables.Opened(), a.tables.Reused())
		})
	}
}

// TestStandbyFailoverFindsWarmState: with standby, each instance keeps the partitions it does
// not own caught up. When one instance dies (a static member that never comes back), the
// other takes its partitions once the session timeout passes, and processes them on the state
// it already holds: no table partition is opened from disk, and counts go on from where the
// dead instance left them.
func TestStandbyFailoverFindsWarmState(t *testing.T) {
	base := testenv.Kafka(t, "backflow-standby")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	topic := testenv.CreateTopic(t, ctx, base, "standby", 4)
	group := goka.Group(topic + "-counter")
	testenv.Groups(t, base, string(group))
	testenv.RemoveTopics(t, base, string(goka.GroupTable(group)))
	createTable(t, ctx, base, group, 4)
	conn := func(id string) kafka.Conn {
		c := base
		c.InstanceID, c.SessionTimeout = id, kafka.MinSessionTimeout
		return c
	}
	a := startCounter(t, ctx, conn("slot-a"), topic, group, t.TempDir(), true)
	defer a.close()
	b := startCounter(t, ctx, conn("slot-b"), topic, group, t.TempDir(), true)
	waitSplit(t, ctx, a, b)
	keys := requestKeys(40)
	emitAll(t, ctx, base, topic, keys, 1, a, b)
	emitAll(t, ctx, base, topic, keys, 2, a, b)
	// Every partition, owned or standby, is open on a.
	if got := a.tables.Opened(); got != 4 {
		t.Fatalf("instance a opened %d table partitions, want 4 (2 owned, 2 standby)", got)
	}
	_, partsB := b.generations()

	died := time.Now()
	b.close() // a static member's stop: it does not leave; to the group it is gone once its session times out
	waitFor(t, ctx, "the dead instance's partitions on the survivor", func() bool {
		_, pa := a.generations()
		return len(pa) == 4
	})
	took := time.Since(died)
	// The survivor counts on from the state its standby kept: 3 for every key, also those of
	// the dead instance's partitions, with none opened from disk.
	emitAll(t, ctx, base, topic, keys, 3, a)
	if got := a.tables.Opened(); got != 4 {
		t.Fatalf("after the failover instance a has opened %d table partitions, want still 4 (the standbys taken over open)", got)
	}
	if a.tables.Reused() < int64(len(partsB)) {
		t.Fatalf("instance a took %d table partitions back open, want at least the %d it took over", a.tables.Reused(), len(partsB))
	}
	t.Logf("failover: partitions %v taken over %.1fs after the instance stopped (session timeout %v); opened 4, taken back open %d", partsB, took.Seconds(), kafka.MinSessionTimeout, a.tables.Reused())
}

// member is one franz-go group member: the partitions it owns and how often the group
// assigned it or took partitions from it (cooperative rebalancing: increments).
type member struct {
	cl       *kgo.Client
	mu       sync.Mutex
	owned    []int32
	assigned int // OnPartitionsAssigned calls
	revoked  int // OnPartitionsRevoked and OnPartitionsLost calls
}

func (m *member) drop(ps []int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.revoked++
	m.owned = slices.DeleteFunc(m.owned, func(p int32) bool { return slices.Contains(ps, p) })
}

// TestStaticMembershipFranzGroup: the franz-go stages (the ClickHouse sink, its DLQ mirror and
// rollups, declared streams) join with Conn.GroupOpts. One member of two closed and started
// again with the same instance id gets its partitions back, and the other member is neither
// revoked nor assigned anything.
func TestStaticMembershipFranzGroup(t *testing.T) {
	base := testenv.Kafka(t, "backflow-static-franz")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := testenv.CreateTopic(t, ctx, base, "static-franz", 4)
	group := topic + "-sink"
	testenv.Groups(t, base, group)

	join := func(id string) *member {
		m := &member{}
		c := base
		c.InstanceID, c.SessionTimeout = id, 30*time.Second
		cl, err := c.NewClient(append(c.GroupOpts(), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
				m.mu.Lock()
				m.assigned++
				m.owned = append(m.owned, a[topic]...)
				slices.Sort(m.owned)
				m.mu.Unlock()
			}),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, r map[string][]int32) { m.drop(r[topic]) }),
			kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, r map[string][]int32) { m.drop(r[topic]) }),
		)...)
		if err != nil {
			t.Fatal(err)
		}
		m.cl = cl
		go func() {
			for ctx.Err() == nil && !cl.PollFetches(ctx).IsClientClosed() {
			}
		}()
		return m
	}
	state := func(m *member) (int, int, []int32) {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.assigned, m.revoked, slices.Clone(m.owned)
	}
	a, b := join("slot-a"), join("slot-b")
	defer a.cl.Close()
	waitFor(t, ctx, "two partitions each", func() bool {
		_, _, pa := state(a)
		_, _, pb := state(b)
		return len(pa) == 2 && len(pb) == 2
	})
	assignedA, revokedA, partsA := state(a)
	_, _, partsB := state(b)
	b.cl.Close()
	b2 := join("slot-b")
	defer b2.cl.Close()
	waitFor(t, ctx, "the restarted member assigned", func() bool {
		_, _, p := state(b2)
		return len(p) == 2
	})
	_, _, partsB2 := state(b2)
	assigned2A, revoked2A, parts2A := state(a)
	if assigned2A != assignedA || revoked2A != revokedA || !slices.Equal(parts2A, partsA) || !slices.Equal(partsB2, partsB) {
		t.Fatalf("the other member: assigned %d→%d times, revoked %d→%d, partitions %v→%v; restarted member %v→%v; want no change and the same partitions",
			assignedA, assigned2A, revokedA, revoked2A, partsA, parts2A, partsB, partsB2)
	}
}
