package kafka_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/test/testenv"
)

// TestLockHeldByOneAtATime: three processes (clients of their own) take one lock at once; each
// holds it while another joins the group, and no two hold it together. A fourth, waiting
// behind a holder, gives up when its context ends, and the lock goes on to the next.
func TestLockHeldByOneAtATime(t *testing.T) {
	cfg := testenv.Kafka(t, "backflow-lock")
	name := "backflow-lock-" + testenv.ID("lk")
	testenv.RemoveTopics(t, cfg, name)
	testenv.Groups(t, cfg, name)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	var inside, most, took atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := kafka.AcquireLock(ctx, cfg, name, 1, log)
			if err != nil {
				errs <- err
				return
			}
			n := inside.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			took.Add(1)
			// Held long enough for the others to have joined the group meanwhile: a rebalance
			// while it is held must leave it with its holder.
			time.Sleep(2 * time.Second)
			select {
			case <-l.Lost():
				errs <- errors.New("lock lost while held")
			default:
			}
			inside.Add(-1)
			l.Release()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if took.Load() != 3 || most.Load() != 1 {
		t.Fatalf("%d of 3 took the lock, at most %d at once; want 3, 1", took.Load(), most.Load())
	}

	held, err := kafka.AcquireLock(ctx, cfg, name, 1, log)
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 3*time.Second)
	defer wcancel()
	if l, err := kafka.AcquireLock(wctx, cfg, name, 1, log); err == nil {
		l.Release()
		t.Fatal("took a lock another process holds")
	} else if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting behind a holder: %v, want the context's deadline", err)
	}
	held.Release()
	next, err := kafka.AcquireLock(ctx, cfg, name, 1, log)
	if err != nil {
		t.Fatalf("after the holder released it: %v", err)
	}
	next.Release()
}
