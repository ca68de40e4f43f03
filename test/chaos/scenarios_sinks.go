package chaos

// The scenarios of the systems the sinks write to: ClickHouse and Redis stopped (2, 16), ClickHouse's
// replies lost (3), rows it refuses for good (4), a slow downstream (17), a full disk (21).
// The table of every scenario is scenarios.go.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/backflowhq/backflow/internal/ops"
	"github.com/backflowhq/backflow/processors/ingest"
	"github.com/backflowhq/backflow/sinks/clickhouse"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
	"github.com/backflowhq/backflow/test/faultproxy"
)

// 2
func clickhouseDown(ctx context.Context, r *Run) error {
	return serviceDown(ctx, r, "clickhouse", func() string { return r.SinkGroup })
}

// 16
func redisDown(ctx context.Context, r *Run) error {
	return serviceDown(ctx, r, "redis", func() string { return r.FeaturesGroup })
}

// serviceDown stops a service of the stack for 30 s while traffic flows, and checks that
// group's commits on the enriched topic do not move while it is down.
func serviceDown(ctx context.Context, r *Run, service string, group func() string) error {
	pl, err := r.StartPipeline(ctx, nil, nil)
	if err != nil {
		return err
	}
	_ = pl
	load := r.Load(ctx, r.Traffic(50), "")
	if err := sleep(ctx, r.Dur(10*time.Second)); err != nil {
		return err
	}
	if err := r.Script.Down(ctx, service); err != nil {
		return err
	}
	r.Note("%s stopped", service)
	down := time.Now()
	sleep(ctx, 5*time.Second) // a flush that landed just before the stop may still commit
	before, err := r.Committed(ctx, group())
	if err != nil {
		return err
	}
	if err := sleep(ctx, r.Dur(30*time.Second)-time.Since(down)); err != nil {
		return err
	}
	after, err := r.Committed(ctx, group())
	if err != nil {
		return err
	}
	moved := 0
	for k, v := range after {
		if strings.HasPrefix(k, r.Enriched+"/") && v != before[k] {
			moved++
		}
	}
	if moved > 0 {
		r.Fail("%s committed %d enriched partitions further while %s was down", group(), moved, service)
	} else {
		r.Note("%s's commits on the enriched topic did not move while %s was down", group(), service)
	}
	r.Healed() // recovery counts from the restart, which waits until the service answers
	if err := r.Script.Up(ctx, service); err != nil {
		return err
	}
	r.Note("%s down for %v", service, time.Since(down).Round(time.Second))
	_, err = load.Wait()
	return err
}

// 3
func clickhouseReplyLost(ctx context.Context, r *Run) error {
	// The raw tables are ReplacingMergeTrees: a background merge collapses the rows a retry
	// wrote twice, and the raw count would then show no duplicate although the lost replies
	// hit INSERTs that landed. Merges stay off on this private database's tables (reads
	// through the views' FINAL still deduplicate).
	if _, err := chschema.Migrate(ctx, r.CH); err != nil {
		return err
	}
	for _, t := range []string{"inference_results", "gateway_logs", "moderation_hits", "dlq_entries"} {
		if err := r.CH.Exec(ctx, "SYSTEM STOP MERGES "+r.DB+"."+t); err != nil {
			return fmt.Errorf("stop merges on %s: %w", t, err)
		}
	}
	if _, err := r.StartPipeline(ctx, nil, map[string]string{"sink_clickhouse": "batch_rows: 1000"}); err != nil {
		return err
	}
	load := r.Load(ctx, r.Traffic(20), "")
	if err := sleep(ctx, r.Dur(5*time.Second)); err != nil {
		return err
	}
	const lose = 12
	r.CHProxy.SetLoseReplies(lose)
	deadline := time.Now().Add(2 * time.Minute)
	for r.CHProxy.Stats().LostReplies < lose && time.Now().Before(deadline) {
		sleep(ctx, 100*time.Millisecond)
	}
	r.CHProxy.Set(faultproxy.Forward)
	r.Healed()
	st := r.CHProxy.Stats()
	if st.LostReplies < lose {
		r.Fail("only %d of %d replies were lost: the fault was not exercised", st.LostReplies, lose)
	}
	if _, err := load.Wait(); err != nil {
		return err
	}
	r.Note("%d replies lost after the server acted on the request", st.LostReplies)
	r.after(func(c *Counts) {
		if c.DupRaw == 0 {
			r.Fail("no raw duplicate: no lost reply hit an INSERT that landed")
		}
	})
	return nil
}

// 4
func clickhousePermanent(ctx context.Context, r *Run) error {
	if _, err := chschema.Migrate(ctx, r.CH); err != nil {
		return err
	}
	if err := r.CH.Exec(ctx, `ALTER TABLE inference_results MODIFY COLUMN status Enum8('OK' = 1)`); err != nil {
		return err
	}
	r.Measure.SinkRejects = true
	pl, err := r.StartPipeline(ctx, nil, nil)
	if err != nil {
		return err
	}
	load := r.Load(ctx, r.Traffic(30), "")
	if err := sleep(ctx, r.Dur(8*time.Second)); err != nil {
		return err
	}
	r.CHProxy.Set(faultproxy.Reset)
	sleep(ctx, r.Dur(10*time.Second))
	r.CHProxy.Set(faultproxy.Forward)
	r.Healed()
	if _, err := load.Wait(); err != nil {
		return err
	}
	r.after(func(c *Counts) {
		m, err := pl.Sinks.Metrics(ctx)
		if err != nil {
			r.Fail("metrics: %v", err)
			return
		}
		rejected := m.Count(ops.MetricRecordsDLQ, map[string]string{"stage": clickhouse.Stage, "class": clickhouse.ClassRejected})
		retryable := m.Count(ops.MetricSinkErrors, map[string]string{"stage": clickhouse.Stage, "class": "retryable"})
		r.Note("%d records rejected by ClickHouse (dead-lettered), %v retryable failures retried", c.SinkRejected, retryable)
		if c.SinkRejected == 0 {
			r.Fail("nothing was rejected: the permanent error was not exercised")
		}
		if rejected != float64(c.SinkRejected) {
			r.Fail("/metrics counts %v rejected records, the DLQ holds %d", rejected, c.SinkRejected)
		}
		if retryable <= 0 {
			r.Fail("no retryable failure counted during the resets")
		}
	})
	return nil
}

// 17
func slowDownstream(ctx context.Context, r *Run) error {
	pl, err := r.StartPipeline(ctx, nil, map[string]string{"sink_clickhouse": "batch_rows: 2000"})
	if err != nil {
		return err
	}
	load := r.Load(ctx, r.Traffic(90), "")
	sleep(ctx, r.Dur(5*time.Second))
	for _, px := range []*faultproxy.Proxy{r.CHProxy, r.RedisProxy} {
		px.SetDelay(100 * time.Millisecond)
		px.Set(faultproxy.Delay)
	}
	var mu sync.Mutex
	maxBuf, maxInFlight, notReady := 0.0, 0.0, 0
	stop := Watch(500*time.Millisecond, func() {
		ms, err1 := pl.Sinks.Metrics(ctx)
		mi, err2 := pl.Ingest.Metrics(ctx)
		if err1 != nil || err2 != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if b := ms.Sum(clickhouse.MetricBuffered, nil); b > maxBuf {
			maxBuf = b
		}
		if f := mi.Sum(ingest.MetricInFlight, nil); f > maxInFlight {
			maxInFlight = f
		}
		if ms.Sum(ops.MetricStageReady, nil) < 3 {
			notReady++
		}
	})
	sleep(ctx, r.Dur(120*time.Second))
	stop()
	for _, px := range []*faultproxy.Proxy{r.CHProxy, r.RedisProxy} {
		px.Set(faultproxy.Forward)
	}
	r.Healed()
	r.Note("slow for %v: ClickHouse sink buffer peaked at %v (cap 2000), ingest in flight at %v (cap 3 × 2000)", r.Dur(120*time.Second), maxBuf, maxInFlight)
	if maxBuf > 2000 || maxInFlight > 6000 {
		r.Fail("a buffer went over its cap")
	}
	if notReady > 0 {
		r.Fail("a sink lost its partitions %d times during the slow period (evicted from the group?)", notReady)
	}
	m, err := pl.Sinks.Metrics(ctx)
	if err == nil {
		if d := m.Sum(clickhouse.MetricDropped, nil); d > 0 {
			r.Fail("the ClickHouse sink dropped %v buffered records on a revoke", d)
		}
	}
	_, err = load.Wait()
	return err
}

// 21
func clickhouseDiskFull(ctx context.Context, r *Run) error {
	disk, err := NewDisk(r.Dir+"/disk", 256<<20)
	if err != nil {
		return fmt.Errorf("a tmpfs for ClickHouse (mount -t tmpfs): %w", err)
	}
	r.onClose(disk.Close) // after the measure, which reads the private server
	ch, err := StartPrivateClickHouse(ctx, r.Script.Repo, disk.Dir)
	if err != nil {
		return err
	}
	r.onClose(ch.Stop)
	conn, err := ch.Open(ctx, r.DB)
	if err != nil {
		return err
	}
	shared := r.CH
	r.CH = conn // the measure reads the private server
	r.onClose(func() { conn.Close(); r.CH = shared })
	r.CHProxy.SetTarget(ch.Addr)
	used, err := disk.Used()
	if err != nil {
		return err
	}
	// Room for about 4 MB more: the first flushes land, then the disk is full.
	if err := disk.Resize(used + 4<<20); err != nil {
		return err
	}
	r.Note("ClickHouse on a %.1f MiB tmpfs, %.1f MiB used at start", float64(disk.Size())/(1<<20), float64(used)/(1<<20))
	pl, err := r.StartPipeline(ctx, nil, nil)
	if err != nil {
		return err
	}
	load := r.Load(ctx, r.Traffic(30), "")
	deadline := time.Now().Add(3 * time.Minute)
	full := false
	for time.Now().Before(deadline) && !full {
		sleep(ctx, 500*time.Millisecond)
		if u, err := disk.Used(); err == nil && u >= disk.Size()-256<<10 {
			full = true
		}
		if m, err := pl.Sinks.Metrics(ctx); err == nil && m.Count(ops.MetricSinkErrors, map[string]string{"stage": clickhouse.Stage}) > 0 {
			full = true
		}
	}
	if !full {
		r.Fail("the disk never filled up: the fault was not exercised")
	}
	r.Note("disk full: %s", lastLine(pl.Sinks.Log(), "No space left"))
	sleep(ctx, r.Dur(30*time.Second))
	m, err := pl.Sinks.Metrics(ctx)
	if err != nil {
		return err
	}
	errs := m.Count(ops.MetricSinkErrors, map[string]string{"stage": clickhouse.Stage})
	rejected := m.Count(ops.MetricRecordsDLQ, map[string]string{"stage": clickhouse.Stage})
	r.Note("while the disk was full: %v failed attempts, %v records dead-lettered", errs, rejected)
	if !pl.Sinks.Running() {
		r.Fail("the sinks stopped on a full disk:\n%s", tail(pl.Sinks.Log(), 1500))
	}
	r.Healed()
	if err := disk.Resize(2 << 30); err != nil {
		return err
	}
	if !pl.Sinks.Running() {
		if err := pl.Sinks.Restart(); err != nil {
			return err
		}
	}
	_, err = load.Wait()
	return err
}

// lastLine is the last line of log that contains s, cut to 300 bytes.
func lastLine(log, s string) string {
	lines := strings.Split(log, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], s) {
			if len(lines[i]) > 300 {
				return lines[i][:300] + "…"
			}
			return lines[i]
		}
	}
	return "(no such line)"
}
