package retry

import (
	"context"
	"errors"
	"testing"
	"time"
)

var (
	errOutage = errors.New("outage")
	errBad    = errors.New("bad input")
)

func isOutage(err error) bool { return errors.Is(err, errOutage) }

type retryCall struct {
	err     error
	attempt int
	wait    time.Duration
}

func TestDo(t *testing.T) {
	p := Policy{Min: time.Millisecond, Max: 4 * time.Millisecond}
	tests := []struct {
		name      string
		p         Policy
		results   []error // fn's results, in order; the last one repeats
		wantCalls int
		wantErr   error // matched with ==: Do hands fn's error back unwrapped
	}{
		{name: "succeeds at once", p: p, results: []error{nil}, wantCalls: 1},
		{name: "outage then success", p: p, results: []error{errOutage, errOutage, errOutage, nil}, wantCalls: 4},
		{name: "permanent error at once", p: p, results: []error{errBad}, wantCalls: 1, wantErr: errBad},
		{name: "permanent error after an outage", p: p, results: []error{errOutage, errBad}, wantCalls: 2, wantErr: errBad},
		{name: "attempts run out", p: Policy{Min: time.Millisecond, Max: 2 * time.Millisecond, Attempts: 3},
			results: []error{errOutage}, wantCalls: 3, wantErr: errOutage},
		{name: "attempts not needed", p: Policy{Min: time.Millisecond, Attempts: 3}, results: []error{errOutage, nil}, wantCalls: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			var retries []retryCall
			// Bounded, so that a Do that retries what it must not fails here rather than hangs.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			start := time.Now()
			err := Do(ctx, tt.p, isOutage, func(err error, attempt int, wait time.Duration) {
				retries = append(retries, retryCall{err, attempt, wait})
			}, func() error {
				r := tt.results[min(calls, len(tt.results)-1)]
				calls++
				return r
			})
			took := time.Since(start)
			if err != tt.wantErr {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			if calls != tt.wantCalls {
				t.Fatalf("%d calls, want %d", calls, tt.wantCalls)
			}
			// onRetry hears of every failed call but the last, numbered from 1, with a wait
			// of the policy's, and Do really waited that long.
			if len(retries) != calls-1 {
				t.Fatalf("%d retries reported for %d calls: %+v", len(retries), calls, retries)
			}
			pol := tt.p.WithDefaults()
			var waited time.Duration
			for i, r := range retries {
				if r.attempt != i+1 || !errors.Is(r.err, errOutage) {
					t.Fatalf("retry %d: %+v, want attempt %d of an outage", i, r, i+1)
				}
				if r.wait < pol.Min || r.wait > pol.Max {
					t.Fatalf("retry %d: wait %v outside [%v, %v]", i, r.wait, pol.Min, pol.Max)
				}
				waited += r.wait
			}
			if took < waited {
				t.Fatalf("Do took %v, less than the %v of waits it reported", took, waited)
			}
		})
	}
}

// TestDoNilRetryableRetriesEverything: without a retryable, any error is an outage.
func TestDoNilRetryableRetriesEverything(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	calls := 0
	err := Do(ctx, Policy{Min: time.Millisecond, Attempts: 4}, nil, nil, func() error {
		calls++
		return errBad
	})
	if err != errBad || calls != 4 {
		t.Fatalf("err %v after %d calls, want %v after 4", err, calls, errBad)
	}
}

// TestDoStopsWhenContextEnds: an outage is retried until ctx ends, however long the waits
// are; Do then returns at once with ctx's error wrapping the outage.
func TestDoStopsWhenContextEnds(t *testing.T) {
	t.Run("during a wait", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		calls := 0
		time.AfterFunc(50*time.Millisecond, cancel)
		start := time.Now()
		err := Do(ctx, Policy{Min: time.Hour}, isOutage, nil, func() error {
			calls++
			return errOutage
		})
		if took := time.Since(start); took > 10*time.Second {
			t.Fatalf("Do took %v after ctx ended", took)
		}
		if calls != 1 || !errors.Is(err, context.Canceled) || !errors.Is(err, errOutage) {
			t.Fatalf("err %v after %d calls, want context.Canceled wrapping %v after 1", err, calls, errOutage)
		}
	})
	t.Run("during a call", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		calls := 0
		err := Do(ctx, Policy{Min: time.Millisecond}, isOutage, nil, func() error {
			calls++
			if calls == 3 {
				cancel()
			}
			return errOutage
		})
		if calls != 3 || !errors.Is(err, context.Canceled) || !errors.Is(err, errOutage) {
			t.Fatalf("err %v after %d calls, want context.Canceled wrapping %v after 3", err, calls, errOutage)
		}
	})
	t.Run("a permanent error is returned as is", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		calls := 0
		err := Do(ctx, Policy{}, isOutage, nil, func() error {
			calls++
			return errBad
		})
		if err != errBad || calls != 1 {
			t.Fatalf("err %v after %d calls, want %v after 1", err, calls, errBad)
		}
	})
}

// TestBackoffWaits: the n-th wait (from 0) is Min·2ⁿ capped at Max, randomized by ±Jitter,
// and never outside [Min, Max].
func TestBackoffWaits(t *testing.T) {
	tests := []struct {
		name string
		p    Policy
	}{
		{name: "default jitter", p: Policy{Min: 10 * time.Millisecond, Max: 300 * time.Millisecond}},
		{name: "full jitter", p: Policy{Min: 10 * time.Millisecond, Max: 300 * time.Millisecond, Jitter: 1}},
		{name: "little jitter", p: Policy{Min: 100 * time.Millisecond, Max: 5 * time.Second, Jitter: 0.1}},
		{name: "jitter above 1 is 1", p: Policy{Min: time.Second, Max: 30 * time.Second, Jitter: 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.p.WithDefaults()
			const runs, steps = 300, 12
			atCap, belowCap := 0, 0
			distinct := map[time.Duration]bool{}
			for range runs {
				b := tt.p.Backoff()
				for n := range steps {
					w := b.Next()
					base := min(p.Min<<n, p.Max)
					lo := max(p.Min, time.Duration(float64(base)*(1-p.Jitter)))
					hi := min(p.Max, time.Duration(float64(base)*(1+p.Jitter))+1)
					if w < lo || w > hi {
						t.Fatalf("wait %d: %v outside [%v, %v] (base %v)", n, w, lo, hi, base)
					}
					if n == steps-1 {
						distinct[w] = true
						if w == p.Max {
							atCap++
						} else {
							belowCap++
						}
					}
				}
			}
			// Past the cap the waits stay at Max or, jittered, below it: not all the same.
			if atCap == 0 || belowCap == 0 || len(distinct) < 10 {
				t.Fatalf("last waits: %d at the cap, %d below, %d distinct; want jittered waits reaching the cap", atCap, belowCap, len(distinct))
			}
		})
	}
}

func TestBackoffConstantWhenMinIsMax(t *testing.T) {
	b := Policy{Min: 200 * time.Millisecond, Max: time.Millisecond}.Backoff() // Max below Min is Min
	for n := range 50 {
		if w := b.Next(); w != 200*time.Millisecond {
			t.Fatalf("wait %d: %v, want 200ms every time", n, w)
		}
	}
}

func TestBackoffReset(t *testing.T) {
	p := Policy{Min: 10 * time.Millisecond, Max: time.Second, Jitter: 0.1}
	b := p.Backoff()
	for range 10 {
		b.Next()
	}
	if w := b.Next(); w < 900*time.Millisecond {
		t.Fatalf("11th wait %v, want about the 1s cap", w)
	}
	b.Reset()
	if w := b.Next(); w < 10*time.Millisecond || w > 11*time.Millisecond {
		t.Fatalf("first wait after Reset %v, want about 10ms", w)
	}
}

func TestPolicyDefaults(t *testing.T) {
	got := Policy{}.WithDefaults()
	want := Policy{Min: 100 * time.Millisecond, Max: 30 * time.Second, Jitter: 0.5}
	if got != want {
		t.Fatalf("defaults %+v, want %+v", got, want)
	}
}

func TestBackoffWait(t *testing.T) {
	b := Policy{Min: 20 * time.Millisecond, Max: 20 * time.Millisecond}.Backoff()
	start := time.Now()
	if !b.Wait(context.Background()) {
		t.Fatal("Wait returned false with a live context")
	}
	if took := time.Since(start); took < 20*time.Millisecond {
		t.Fatalf("Wait took %v, want at least 20ms", took)
	}

	ctx, cancel := context.WithCancel(context.Background())
	b = Policy{Min: time.Hour}.Backoff()
	time.AfterFunc(20*time.Millisecond, cancel)
	if b.Wait(ctx) {
		t.Fatal("Wait returned true after its context ended")
	}
	if b.Wait(ctx) {
		t.Fatal("Wait returned true with an ended context")
	}
}

// TestDoFirstCallAllocatesNothing: a call that succeeds at once, or fails with an error the
// caller does not retry, costs Do no allocation (Do is on every record's path).
func TestDoFirstCallAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	ok := func() error { return nil }
	bad := func() error { return errBad }
	for name, fn := range map[string]func() error{"success": ok, "not retryable": bad} {
		allocs := testing.AllocsPerRun(100, func() {
			_ = Do(ctx, Policy{Min: time.Millisecond}, isOutage, nil, fn)
		})
		if allocs != 0 {
			t.Errorf("%s: %.1f allocations per call, want 0", name, allocs)
		}
	}
}
