package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A Lock is held by one process at a time among all that share the brokers: the member of a
// consumer group that is assigned the only partition of the group's topic. It guards work
// that two processes must not do at once on a shared system (schema migrations on one
// ClickHouse database), which offers no lock of its own.
//
// Lifecycle: AcquireLock joins the group and returns once this process holds the partition;
// the caller does its work under the context Lost reports on, then calls Release, which
// leaves the group so that the next waiting process is assigned the partition within a
// rebalance. A process that dies holding the lock holds it until its session times out
// (LockSessionTimeout). The group is a plain (dynamic) member's, never static: a process that
// restarts must not find the lock still held by its former self.
//
// The group balances with the cooperative-sticky balancer, so a process that joins while
// another holds the lock does not take the partition from it: the holder keeps it through
// the rebalance. If the holder's session expires anyway (a pause longer than the session
// timeout), the group moves the partition and Lost's channel closes, for the caller to stop.
type Lock struct {
	name string
	cl   *kgo.Client
	lost chan struct{}

	mu       sync.Mutex
	held     bool
	lostOnce sync.Once
}

// LockSessionTimeout is how long a lock outlives a holder that died without releasing it.
const LockSessionTimeout = 10 * time.Second

// lockWaitLog is how often a process waiting for a lock says so.
const lockWaitLog = 10 * time.Second

// AcquireLock waits until this process holds the lock name (a topic of one partition and a
// group, both called name, created when missing with replication replicas), logging every 10 s
// while another process holds it. It returns ctx's error if ctx ends first.
func AcquireLock(ctx context.Context, c Conn, name string, replication int16, log *slog.Logger) (*Lock, error) {
	admin, err := c.NewClient()
	if err != nil {
		return nil, err
	}
	err = EnsureTopics(ctx, admin, TopicSpec{Name: name, Partitions: 1, Replication: max(replication, 1),
		Configs: map[string]string{"retention.ms": "3600000"}})
	admin.Close()
	if err != nil {
		return nil, fmt.Errorf("kafka: lock %s: %w", name, err)
	}
	l := &Lock{name: name, lost: make(chan struct{})}
	acquired := make(chan struct{})
	var once sync.Once
	// The group's own options: Conn.GroupOpts would make it static.
	l.cl, err = c.NewClient(
		kgo.ConsumerGroup(name),
		kgo.ConsumeTopics(name),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.SessionTimeout(LockSessionTimeout),
		kgo.HeartbeatInterval(time.Second),
		kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			if len(a[name]) > 0 {
				l.mu.Lock()
				l.held = true
				l.mu.Unlock()
				once.Do(func() { close(acquired) })
			}
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, r map[string][]int32) { l.revoked(r) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, r map[string][]int32) { l.revoked(r) }),
	)
	if err != nil {
		return nil, fmt.Errorf("kafka: lock %s: %w", name, err)
	}
	// The group is joined and kept by the client's own goroutines; polling lets it see its
	// topic's metadata and start. The topic holds no records.
	pollCtx, stopPoll := context.WithCancel(context.Background())
	go func() {
		for pollCtx.Err() == nil {
			l.cl.PollFetches(pollCtx)
		}
	}()
	since := time.Now()
	tick := time.NewTicker(lockWaitLog)
	defer tick.Stop()
	for {
		select {
		case <-acquired:
			stopPoll()
			if waited := time.Since(since); waited > lockWaitLog {
				log.Info("lock acquired", "lock", name, "waited", waited.Round(time.Second).String())
			}
			return l, nil
		case <-tick.C:
			log.Info("waiting for another process to release a lock", "lock", name, "waited", time.Since(since).Round(time.Second).String())
		case <-ctx.Done():
			stopPoll()
			l.cl.Close()
			return nil, fmt.Errorf("kafka: waiting for lock %s: %w", name, ctx.Err())
		}
	}
}

// revoked closes Lost's channel when the lock's partition is taken from this process.
func (l *Lock) revoked(r map[string][]int32) {
	if len(r[l.name]) == 0 {
		return
	}
	l.mu.Lock()
	held := l.held
	l.held = false
	l.mu.Unlock()
	if held {
		l.lostOnce.Do(func() { close(l.lost) })
	}
}

// Lost is closed if the lock is taken from this process before Release (its session expired).
func (l *Lock) Lost() <-chan struct{} { return l.lost }

// Guard is ctx, cancelled with ErrLockLost as its cause when the lock is lost; stop releases
// what it holds (call it before Release).
func (l *Lock) Guard(ctx context.Context) (guarded context.Context, stop func()) {
	gctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		select {
		case <-l.lost:
			cancel(fmt.Errorf("%w: %s", ErrLockLost, l.name))
		case <-done:
		}
	}()
	return gctx, func() { close(done); cancel(nil) }
}

// ErrLockLost: a lock was taken from its holder before the holder released it (its session
// with the group expired); what it guarded was stopped part way.
var ErrLockLost = errors.New("kafka: lock lost")

// Release leaves the group, so that a waiting process gets the lock at once.
func (l *Lock) Release() {
	l.mu.Lock()
	l.held = false
	l.mu.Unlock()
	l.cl.Close() // leaves the group (a dynamic member)
}
