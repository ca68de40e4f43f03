package chaos

// The scenarios of the services ingest calls: the sensitive-word service out or answering wrong
// (5, 6), the schema registry out (8).
// The table of every scenario is scenarios.go.

import (
	"context"
	"sync"
	"time"

	"github.com/backflowhq/backflow/internal/ops"
	"github.com/backflowhq/backflow/processors/ingest"
	"github.com/backflowhq/backflow/test/faultproxy"
)

// 5
func moderationOutage(ctx context.Context, r *Run) error {
	pl, err := r.StartPipeline(ctx, nil, nil)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	maxBreaker, lastBreaker := 0.0, -1.0
	stop := Watch(500*time.Millisecond, func() {
		if m, err := pl.Ingest.Metrics(ctx); err == nil {
			b := m.Sum(ingest.MetricBreakerState, nil)
			mu.Lock()
			if b > maxBreaker {
				maxBreaker = b
			}
			lastBreaker = b
			mu.Unlock()
		}
	})
	defer stop()
	load := r.Load(ctx, r.Traffic(120), "")
	sleep(ctx, r.Dur(5*time.Second))
	r.Sensitive.Stop()
	// A rebalance while records wait on moderation (--policy block): a second instance joins
	// halfway through the outage.
	sleep(ctx, r.Dur(30*time.Second))
	joiner, err := r.StartRun("ingest-b", "ingest", nil)
	if err != nil {
		return err
	}
	sleep(ctx, r.Dur(30*time.Second))
	if err := r.Sensitive.Start(ctx); err != nil {
		return err
	}
	for _, f := range []string{`{"errorRate":1}`, `{"rate429":1}`, `{"latency":"2s"}`, `{}`} {
		if err := r.Sensitive.Faults(f); err != nil {
			return err
		}
		if f != `{}` {
			sleep(ctx, r.Dur(10*time.Second))
		}
	}
	r.Healed()
	if _, err := load.Wait(); err != nil {
		return err
	}
	if !joiner.Running() {
		r.Fail("the ingest instance that joined during the outage exited:\n%s", tail(joiner.Log(), 1500))
	}
	if !pl.Ingest.Running() {
		r.Fail("the first ingest instance exited during the outage:\n%s", tail(pl.Ingest.Log(), 1500))
	}
	r.after(func(c *Counts) {
		sleep(ctx, 3*time.Second)
		mu.Lock()
		defer mu.Unlock()
		r.Note("breaker: highest state %v, last %v", maxBreaker, lastBreaker)
		if maxBreaker != ingest.BreakerOpen {
			r.Fail("the breaker never opened (highest state %v)", maxBreaker)
		}
		if lastBreaker != ingest.BreakerClosed {
			r.Fail("the breaker did not close again (state %v)", lastBreaker)
		}
	})
	return nil
}

// 6
func moderationWrongReplies(ctx context.Context, r *Run) error {
	pl, err := r.StartPipeline(ctx, nil, nil)
	if err != nil {
		return err
	}
	if err := r.Sensitive.Faults(`{"wrongCountRate":0.3,"wrongOrderRate":0.3}`); err != nil {
		return err
	}
	r.Measure.AllowDLQClasses = []string{"moderation_mismatch"}
	cfg := r.Traffic(20)
	cfg.SensitiveShare = 0.3
	load := r.Load(ctx, cfg, "")
	if err := load.CaughtUp(ctx); err != nil {
		return err
	}
	r.Sensitive.Faults(`{}`)
	r.Healed()
	m, err := pl.Ingest.Metrics(ctx)
	if err != nil {
		return err
	}
	mism := m.Count(ingest.MetricModerationErrors, map[string]string{"class": "mismatch"})
	r.Note("%v mismatched replies detected and retried", mism)
	if mism <= 0 {
		r.Fail("no mismatch detected: the fault was not exercised")
	}
	return nil
}

// 8
func registryOutage(ctx context.Context, r *Run) error {
	pl, err := r.StartPipeline(ctx, nil, nil)
	if err != nil {
		return err
	}
	r.RegistryProxy.SetResponse(faultproxy.HTTPResponse(401, `{"error_code":40101,"message":"Unauthorized"}`))
	r.RegistryProxy.Set(faultproxy.Respond)
	if _, err := r.Load(ctx, r.Traffic(5), "").Wait(); err != nil {
		return err
	}
	check := func(phase string) {
		m, err := pl.Ingest.Metrics(ctx)
		if err != nil {
			r.Fail("metrics: %v", err)
			return
		}
		out, dlq := m.Count(ops.MetricRecordsOut, map[string]string{"stage": "ingest"}), m.Count(ops.MetricRecordsDLQ, map[string]string{"stage": "ingest"})
		if out != 0 || dlq != 0 {
			r.Fail("while the registry %s: ingest emitted %v and dead-lettered %v records, want 0 and 0", phase, out, dlq)
		} else {
			r.Note("while the registry %s: nothing emitted, nothing dead-lettered", phase)
		}
	}
	sleep(ctx, r.Dur(20*time.Second))
	check("answered 401")
	r.RegistryProxy.Set(faultproxy.Blackhole)
	sleep(ctx, r.Dur(20*time.Second))
	check("was unreachable")
	r.RegistryProxy.Set(faultproxy.Forward)
	r.Healed()
	if !pl.Ingest.Running() || !pl.Sinks.Running() {
		r.Fail("a stage stopped during the registry outage")
	}
	return nil
}
