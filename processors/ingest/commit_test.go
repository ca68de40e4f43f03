package ingest

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// recorder stands in for goka's deferred-commit functions: it logs which offsets were
// committed, in order, and which were released with an error.
type recorder struct {
	mu        sync.Mutex
	committed []int
	failed    []int
}

func (r *recorder) fn(off int) func(error) {
	var once sync.Once
	return func(err error) {
		once.Do(func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			if err != nil {
				r.failed = append(r.failed, off)
				return
			}
			r.committed = append(r.committed, off)
		})
	}
}

func TestCommitQueueReleasesInOrder(t *testing.T) {
	var rec recorder
	q := newCommitQueue(100)
	var ps []*pendingCommit
	for i := 0; i < 6; i++ {
		p, err := q.Add(context.Background(), rec.fn(i))
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	// 3 and 1 finish first: nothing may be committed while 0 is in flight.
	ps[3].Done()
	ps[1].Done()
	if len(rec.committed) != 0 {
		t.Fatalf("committed %v while offset 0 is in flight", rec.committed)
	}
	ps[0].Done() // releases 0 and 1, not 3 (2 is in flight)
	if want := []int{0, 1}; !equal(rec.committed, want) {
		t.Fatalf("committed %v, want %v", rec.committed, want)
	}
	ps[2].Done()
	ps[5].Done()
	if want := []int{0, 1, 2, 3}; !equal(rec.committed, want) {
		t.Fatalf("committed %v, want %v", rec.committed, want)
	}
	ps[4].Done()
	if want := []int{0, 1, 2, 3, 4, 5}; !equal(rec.committed, want) || q.Len() != 0 {
		t.Fatalf("committed %v (len %d), want %v", rec.committed, q.Len(), want)
	}
}

// TestCommitQueueConcurrentRandomOrder finishes 5000 records from 8 goroutines in random
// order; commits must come out exactly 0..4999.
func TestCommitQueueConcurrentRandomOrder(t *testing.T) {
	var rec recorder
	q := newCommitQueue(10000)
	const n = 5000
	ps := make([]*pendingCommit, n)
	for i := range ps {
		ps[i], _ = q.Add(context.Background(), rec.fn(i))
	}
	order := rand.Perm(n)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				ps[order[i]].Done()
			}
		}()
	}
	wg.Wait()
	if len(rec.committed) != n {
		t.Fatalf("%d commits, want %d", len(rec.committed), n)
	}
	for i, off := range rec.committed {
		if off != i {
			t.Fatalf("commit %d is offset %d", i, off)
		}
	}
}

// TestCommitQueueBoundsInFlight: Add blocks at max pending and resumes when the head finishes.
func TestCommitQueueBoundsInFlight(t *testing.T) {
	var rec recorder
	q := newCommitQueue(2)
	p0, _ := q.Add(context.Background(), rec.fn(0))
	q.Add(context.Background(), rec.fn(1))
	added := make(chan struct{})
	go func() {
		q.Add(context.Background(), rec.fn(2))
		close(added)
	}()
	select {
	case <-added:
		t.Fatal("third Add did not block at max 2 in flight")
	case <-time.After(50 * time.Millisecond):
	}
	p0.Done()
	select {
	case <-added:
	case <-time.After(2 * time.Second):
		t.Fatal("Add still blocked after the head finished")
	}
}

// TestCommitQueueShutdown: a closed queue commits nothing that was in flight, ignores late
// finishers, and refuses new records; a blocked Add gives up when its context ends. Every
// record's commit function is called exactly once, including offset 1, which finished before
// the close but waited behind offset 0: goka's partition shutdown waits for each one, and a
// stop hung past shutdown_timeout when one was never called.
func TestCommitQueueShutdown(t *testing.T) {
	var rec recorder
	q := newCommitQueue(2)
	p0, _ := q.Add(context.Background(), rec.fn(0))
	p1, _ := q.Add(context.Background(), rec.fn(1))
	p1.Done()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := q.Add(ctx, rec.fn(2))
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	cancel()
	if err := <-errc; !errors.Is(err, errShutdown) {
		t.Fatalf("blocked Add returned %v, want errShutdown", err)
	}
	q.Close()
	p0.Done() // finishing after the close must not commit
	if _, err := q.Add(context.Background(), rec.fn(3)); !errors.Is(err, errShutdown) {
		t.Fatalf("Add after Close: %v", err)
	}
	if len(rec.committed) != 0 || !equal(rec.failed, []int{2, 0, 1, 3}) {
		t.Fatalf("committed %v failed %v", rec.committed, rec.failed)
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
