package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/internal/feast"
	"github.com/backflowhq/backflow/internal/ops"
	"github.com/backflowhq/backflow/processors/features"
	"github.com/backflowhq/backflow/processors/ingest"
	"github.com/backflowhq/backflow/sinks/clickhouse"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
	"github.com/backflowhq/backflow/test/faultproxy"
)

// Scenario is one row of reliability.md's table, as data: what it injects, and a body that
// starts the pipeline, sends the traffic and injects the fault. Execute then waits until every
// group caught up and measures lost, dup and misrouted against the manifests.
type Scenario struct {
	ID      int
	Name    string
	Fault   string // what is done, in a few words
	Asserts string // what the body checks beyond the three numbers, memory and catch-up
	Records int    // records to generate (reliability.md's size; Options.Records overrides)
	Fast    bool   // part of the subset make test runs
	Brokers int    // Kafka brokers it needs (0: any)
	Secure  bool   // runs on the secured stack
	// ExactlyOnceDLQ: a poison record dead-lettered twice fails the scenario (at-least-once
	// into the DLQ is otherwise allowed after a crash, and reported).
	ExactlyOnceDLQ bool
	Run            func(ctx context.Context, r *Run) error
}

// Scenarios are the rows of reliability.md's table.
var Scenarios = []*Scenario{
	{ID: 1, Name: "sigkill-processor", Records: 100_000, Fast: true, Fault: "SIGKILL the ingest process 10 times during the run (2 topics, 3 partitions)",
		Asserts: "restarted each time; exact at the end", Run: sigkillProcessor},
	{ID: 2, Name: "clickhouse-down", Records: 20_000, Fault: "ClickHouse server stopped for 30 s mid-run (stack script), then started",
		Asserts: "the sink's committed offsets do not move while it is down; lag recovers; RSS capped", Run: clickhouseDown},
	{ID: 3, Name: "clickhouse-reply-lost", Records: 10_000, Fast: true, Fault: "12 INSERT replies dropped after ClickHouse wrote the rows (fault proxy), then connections reset",
		Asserts: "retried: raw duplicates > 0, deduplicated dup 0", Run: clickhouseReplyLost},
	{ID: 4, Name: "clickhouse-permanent-vs-retryable", Records: 10_000, Fault: "a narrowed column rejects non-OK inference results (permanent); connections reset for 10 s (retryable)",
		Asserts: "rejected rows in the DLQ once each as clickhouse_rejected; resets retried, nothing else dead-lettered", Run: clickhousePermanent},
	{ID: 5, Name: "moderation-outage", Records: 10_000, Fault: "sensitive-word service killed for 60 s (an ingest instance joins halfway), then 5xx, 429 and 2 s latency (10 s each)",
		Asserts: "no row sunk UNAVAILABLE (policy block); the breaker opened and closed; RSS capped", Run: moderationOutage},
	{ID: 6, Name: "moderation-wrong-replies", Records: 10_000, Fault: "30 % of replies with an item missing, 30 % in reverse order",
		Asserts: "mismatches detected; no hit attached to a record without a planted word or missing from one that has one", Run: moderationWrongReplies},
	{ID: 7, Name: "poison-mix", Records: 10_000, Fast: true, ExactlyOnceDLQ: true, Fault: "5 % poison of all 8 kinds mixed into valid traffic",
		Asserts: "each poison record in the DLQ exactly once with its class; every valid record lands", Run: poisonMix},
	{ID: 8, Name: "registry-outage", Records: 10_000, Fast: true, Fault: "registry answers 401 for 20 s, then is unreachable for 20 s (fault proxy)",
		Asserts: "nothing emitted or dead-lettered while it is out; consumption resumes", Run: registryOutage},
	{ID: 9, Name: "rebalance-storm", Records: 20_000, Fault: "ingest and sink instances join and leave every 10 s",
		Asserts: "exact at the end, lag 0", Run: rebalanceStorm},
	{ID: 10, Name: "sigterm-buffered", Records: 10_000, Fault: "SIGTERM to the sinks holding every record in their buffer, and to ingest mid-run",
		Asserts: "exit 0 within shutdown_timeout; flushed and committed, or redelivered", Run: sigtermBuffered},
	{ID: 11, Name: "replay-earliest", Records: 10_000, Fault: "every group replayed from the earliest offset (ingest with --new-epoch)",
		Asserts: "deduplicated counts and every tenant's features unchanged; ingest re-emits every original", Run: replayEarliest},
	{ID: 12, Name: "same-request-id", Records: 10_000, Fault: "20 % duplicates, half to another partition; one requestId spans both topics",
		Asserts: "one row per (topic, requestId[, phase]); the first record to reach the key's home partition wins", Run: sameRequestID},
	{ID: 13, Name: "dedupe-store-rebuilt", Records: 10_000, Fault: "ingest's local table storage deleted between runs, then the same records sent again",
		Asserts: "ready again in bounded time; no re-sent record emitted (enriched topic unchanged)", Run: dedupeRebuilt},
	{ID: 14, Name: "changelog-not-compacted", Records: 5_000, Fault: "ingest's table changelog pre-created with cleanup.policy=delete; then its records deleted below the local store",
		Asserts: "the start-up check flags it (log and /metrics); no crash loop; exact", Run: changelogNotCompacted},
	{ID: 15, Name: "kafka-leader-killed", Records: 20_000, Brokers: 3, Fault: "SIGKILL the broker leading partition 0 of a source topic, restart it after 20 s",
		Asserts: "the pipeline rides through or restarts cleanly; exact", Run: leaderKilled},
	{ID: 16, Name: "redis-down", Records: 20_000, Fault: "Redis stopped for 30 s mid-run (stack script), then started",
		Asserts: "the feature sink's commits do not move while it is down; lag recovers; RSS capped", Run: redisDown},
	{ID: 17, Name: "slow-downstream", Records: 20_000, Fault: "ClickHouse and Redis delayed 100 ms per packet for 2 minutes (fault proxy)",
		Asserts: "buffers within their caps; no stage loses its partitions; lag drains", Run: slowDownstream},
	{ID: 18, Name: "dlq-unwritable", Records: 5_000, Fault: "the DLQ topic refuses every write (max.message.bytes 16) for 20 s",
		Asserts: "no source offset committed past a poison record; the failed writes counted in /metrics and logged", Run: dlqUnwritable},
	{ID: 19, Name: "secured", Records: 3_000, Secure: true, Fault: "SASL/SCRAM + TLS Kafka, ClickHouse and Redis passwords, registry basic auth; then a wrong secret per system",
		Asserts: "connects; a wrong secret fails fast naming the system; no secret in ps, logs or DLQ headers", Run: secured},
	{ID: 21, Name: "clickhouse-disk-full", Records: 10_000, Fault: "a private ClickHouse whose data lives on a tmpfs that fills up mid-run; grown again after 30 s",
		Asserts: "inserts refused for want of space are retried, never dead-lettered; exact once there is room", Run: clickhouseDiskFull},
	{ID: 22, Name: "rolling-restart", Records: 30_000, Fault: "three instances of every stage (static ids, kept disks) under steady traffic, the enriched topic replayed into ClickHouse from the earliest offset; each SIGTERMed and started again in turn",
		Asserts: "the replay: the replay tool creates a new ClickHouse sink group at the earliest offset (it refuses the pipeline's live groups) and a sink-clickhouse process re-reads it through the roll; each exits 0; the instances not restarted set up no new session of ingest's, the feature sink's or the ClickHouse sink's group in any restart window; freshness p99 of each window against steady reported", Run: rollingRestart},
	{ID: 23, Name: "failover-standby", Records: 20_000, Fault: "three instances with standby on and a 10 s session timeout; one SIGKILLed, not restarted",
		Asserts: "its partitions of every group committed further within the session timeout + 10 s (goka waits 5 s after a session before it rejoins; the figure above the timeout is reported against reliability.md's 5 s); the survivors' table recoveries since the kill are warm (goka's Recovering lines: none from an empty store, none reading over half the changelog partition)", Run: failoverStandby},
	{ID: 24, Name: "empty-disk-beside-full", Records: 20_000, Fault: "an instance started on an empty disk beside two with full state, under traffic",
		Asserts: "every partition the other two own after the join commits further after the new instance's start; its restore reported: a \"table restored\" line with records for ingest's and the feature sink's group, backflow_table_restore_records > 0 (the 10 s progress line and /readyz's reason are not asserted: this restore ends sooner)", Run: emptyDiskBesideFull},
	{ID: 20, Name: "soak", Records: 0, Brokers: 3, Fault: "1, 2, 5, 9 and 15 in turn, over and over, under steady traffic",
		Asserts: "exact at the end", Run: soak},
}

// ByID finds a scenario.
func ByID(id int) *Scenario {
	for _, s := range Scenarios {
		if s.ID == id {
			return s
		}
	}
	return nil
}

// 1
func sigkillProcessor(ctx context.Context, r *Run) error {
	pl, err := r.StartPipeline(ctx, nil, nil)
	if err != nil {
		return err
	}
	seconds := 60.0
	load := r.Load(ctx, r.Traffic(seconds), "")
	for i := 0; i < 10; i++ {
		if err := sleep(ctx, r.Dur(time.Duration(seconds/11*float64(time.Second)))); err != nil {
			return err
		}
		pl.Ingest.Kill()
		if err := pl.Ingest.Restart(); err != nil {
			return err
		}
	}
	if _, err := load.Wait(); err != nil {
		return err
	}
	r.Healed()
	r.Note("ingest killed 10 times with SIGKILL and restarted at once")
	return nil
}

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

// 7
func poisonMix(ctx context.Context, r *Run) error {
	if _, err := r.StartPipeline(ctx, nil, nil); err != nil {
		return err
	}
	cfg := r.Traffic(10)
	cfg.PoisonRate = 0.05
	_, err := r.Load(ctx, cfg, "").Wait()
	return err
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

// 9
func rebalanceStorm(ctx context.Context, r *Run) error {
	pl, err := r.StartPipeline(ctx, nil, nil)
	if err != nil {
		return err
	}
	_ = pl
	load := r.Load(ctx, r.Traffic(60), "")
	var extra []*Proc
	names := []string{"ingest-b", "sinks-b", "ingest-c", "sinks-c"}
	stages := map[string]string{"ingest-b": "ingest", "ingest-c": "ingest", "sinks-b": "sink-clickhouse, sink-features", "sinks-c": "sink-clickhouse, sink-features"}
	changes := 0
	for i := 0; !load.Done() || i < 4; i++ {
		if err := sleep(ctx, r.Dur(10*time.Second)); err != nil {
			return err
		}
		name := names[i%len(names)]
		var running *Proc
		for _, p := range extra {
			if p.Name == name && p.Running() {
				running = p
			}
		}
		if running != nil {
			if i%3 == 0 {
				running.Kill() // leaves without a goodbye: the group waits out the session
			} else {
				r.Term(running)
			}
		} else {
			p, err := r.StartRun(name, stages[name], nil)
			if err != nil {
				return err
			}
			extra = append(extra, p)
		}
		changes++
	}
	for _, p := range extra {
		r.Term(p)
	}
	r.Healed()
	r.Note("%d instance changes, one every %v", changes, r.Dur(10*time.Second))
	_, err = load.Wait()
	return err
}

// 10
func sigtermBuffered(ctx context.Context, r *Run) error {
	pl, err := r.StartPipeline(ctx, nil, map[string]string{"sink_clickhouse": "batch_interval: 1h, batch_rows: 100000", "shutdown_timeout": "30s"})
	if err != nil {
		return err
	}
	load := r.Load(ctx, r.Traffic(20), "")
	sleep(ctx, r.Dur(8*time.Second))
	// Should the stop hang, a goroutine dump (SIGQUIT) 25 s in shows where, in ingest.log.
	dump := time.AfterFunc(25*time.Second, pl.Ingest.Quit)
	code, took, err := pl.Ingest.Signal(syscall.SIGTERM, 2*time.Minute)
	dump.Stop()
	r.Note("ingest: SIGTERM mid-run: exit %d after %v", code, took.Round(time.Millisecond))
	if err != nil || code != 0 || took > 30*time.Second {
		r.Fail("ingest: SIGTERM mid-run: exit %d after %v (%v), want 0 within 30s", code, took, err)
	}
	if err := pl.Ingest.Restart(); err != nil {
		return err
	}
	if _, err := load.Wait(); err != nil {
		return err
	}
	// Wait until the sink read everything ingest emitted, and holds it.
	deadline := time.Now().Add(3 * time.Minute)
	var buffered float64
	for time.Now().Before(deadline) {
		m, err := pl.Sinks.Metrics(ctx)
		lag, lerr := r.Lag(ctx)
		if err == nil && lerr == nil && lag[r.IngestGroup] == 0 {
			buffered = m.Sum(clickhouse.MetricBuffered, nil)
			in := m.Sum(ops.MetricRecordsIn, map[string]string{"stage": clickhouse.Stage})
			if buffered > 0 && buffered == in {
				break
			}
		}
		sleep(ctx, 500*time.Millisecond)
	}
	if buffered <= 0 {
		r.Fail("the ClickHouse sink holds nothing in its buffer: the test did not exercise the final flush")
	}
	code, took, err = pl.Sinks.Signal(syscall.SIGTERM, 2*time.Minute)
	r.Note("sinks: SIGTERM with %v records buffered: exit %d after %v", buffered, code, took.Round(time.Millisecond))
	if err != nil || code != 0 || took > 30*time.Second {
		r.Fail("sinks: SIGTERM: exit %d after %v (%v), want 0 within the 30s shutdown_timeout", code, took, err)
	}
	off, err := r.Committed(ctx, r.SinkGroup)
	if err != nil {
		return err
	}
	ends, err := kadm.NewClient(r.Admin).ListEndOffsets(ctx, r.Enriched)
	if err != nil {
		return err
	}
	behind := 0
	ends.Each(func(lo kadm.ListedOffset) {
		if off[fmt.Sprintf("%s/%d", lo.Topic, lo.Partition)] != lo.Offset {
			behind++
		}
	})
	if behind > 0 {
		r.Fail("after the final flush %d enriched partitions are not committed to their end", behind)
	}
	if _, err := r.StartRun("sinks-2", "sink-clickhouse, sink-features", nil); err != nil {
		return err
	}
	r.Healed()
	return nil
}

// 11
func replayEarliest(ctx context.Context, r *Run) error {
	pl, err := r.StartPipeline(ctx, nil, nil)
	if err != nil {
		return err
	}
	if err := r.Load(ctx, r.Traffic(10), "").CaughtUp(ctx); err != nil {
		return err
	}
	before, err := r.snapshot(ctx)
	if err != nil {
		return err
	}
	m1, _ := pl.Ingest.Metrics(ctx)
	out1 := m1.Sum(ops.MetricRecordsOut, map[string]string{"stage": "ingest"})
	r.Term(pl.Ingest)
	r.Term(pl.Sinks)
	for _, g := range []struct {
		group string
		args  []string
	}{
		{r.IngestGroup, []string{"--new-epoch"}}, {r.SinkGroup, nil}, {r.MirrorGroup, nil}, {r.FeaturesGroup, nil},
	} {
		args := append([]string{"replay", "--group", g.group, "--all-topics", "--to-earliest", "--execute", "--reason", "chaos", "--control-topic", r.Control}, g.args...)
		p, err := r.Start("replay-"+g.group, nil, args...)
		if err != nil {
			return err
		}
		if code, err := p.Wait(2 * time.Minute); err != nil || code != 0 {
			return fmt.Errorf("replay %s: exit %d (%v):\n%s", g.group, code, err, tail(p.Log(), 2000))
		}
	}
	r.Note("all four groups replayed from the earliest offset")
	pl2, err := r.StartPipeline(ctx, nil, nil)
	if err != nil {
		return err
	}
	if _, err := r.WaitCaughtUp(ctx, 5*time.Minute); err != nil {
		return err
	}
	r.Healed()
	after, err := r.snapshot(ctx)
	if err != nil {
		return err
	}
	diff := 0
	for k, v := range before {
		if after[k] != v {
			diff++
			if diff <= 5 {
				r.Fail("after the replay %s is %q, before %q", k, after[k], v)
			}
		}
	}
	if len(after) != len(before) {
		r.Fail("after the replay %d values, before %d", len(after), len(before))
	}
	r.Note("%d deduplicated counts and tenant feature values compared: %d differ", len(before), diff)
	m2, err := pl2.Ingest.Metrics(ctx)
	if err != nil {
		return err
	}
	out2 := m2.Sum(ops.MetricRecordsOut, map[string]string{"stage": "ingest"})
	r.Note("ingest emitted %v records first, %v in the replay", out1, out2)
	if out2 != out1 {
		r.Fail("the replay emitted %v records, the first run %v: some were dropped as already seen", out2, out1)
	}
	return nil
}

// snapshot reads what a replay must not change: the deduplicated counts per topic and phase,
// and every feature of every tenant (the raw Redis hash).
func (r *Run) snapshot(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	for _, q := range []string{
		"SELECT concat(source_topic, '/', phase), toString(count()) FROM v_gateway_logs GROUP BY source_topic, phase",
		"SELECT source_topic, toString(count()) FROM v_inference_results GROUP BY source_topic",
		"SELECT 'hits', toString(count()) FROM v_moderation_hits",
		"SELECT tenant_id, '' FROM v_gateway_logs GROUP BY tenant_id",
	} {
		rows, err := r.CH.Query(ctx, q)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var k, v string
			if err := rows.Scan(&k, &v); err != nil {
				rows.Close()
				return nil, err
			}
			if v != "" {
				out["clickhouse "+k] = v
				continue
			}
			key := feast.RedisKey(r.Project, feast.StringEntity(features.TenantEntity, k))
			h, err := r.Redis.HGetAll(ctx, key).Result()
			if err != nil {
				rows.Close()
				return nil, err
			}
			for f, val := range h {
				out["tenant "+k+" "+fmt.Sprintf("%x", f)] = fmt.Sprintf("%x", val)
			}
		}
		rows.Close()
	}
	return out, nil
}

// 12
func sameRequestID(ctx context.Context, r *Run) error {
	if _, err := r.StartPipeline(ctx, nil, nil); err != nil {
		return err
	}
	cfg := r.Traffic(10)
	cfg.DuplicateRate, cfg.CrossPartitionShare = 0.2, 0.5
	m, err := r.Load(ctx, cfg, "").Wait()
	if err != nil {
		return err
	}
	cross := 0
	for _, e := range m.Entries {
		if e.CrossPartition {
			cross++
		}
	}
	r.Note("%d records re-sent to another partition", cross)
	return nil
}

// 13
func dedupeRebuilt(ctx context.Context, r *Run) error {
	pl, err := r.StartPipeline(ctx, nil, nil)
	if err != nil {
		return err
	}
	cfg := r.Traffic(10)
	if err := r.Load(ctx, cfg, "").CaughtUp(ctx); err != nil {
		return err
	}
	r.Term(pl.Ingest)
	endsBefore, err := r.ends(ctx, r.Enriched)
	if err != nil {
		return err
	}
	if err := removeAll(r.StorageDir("ingest", "ingest")); err != nil {
		return err
	}
	start := time.Now()
	if err := pl.Ingest.Restart(); err != nil {
		return err
	}
	if err := pl.Ingest.Ready(ctx, 3*time.Minute); err != nil {
		return err
	}
	r.Note("ingest ready %v after a start with an empty local store", time.Since(start).Round(100*time.Millisecond))
	// The same traffic again: same seed and run id, so the same bytes at new offsets.
	if err := r.Load(ctx, cfg, "").CaughtUp(ctx); err != nil {
		return err
	}
	r.Healed()
	endsAfter, err := r.ends(ctx, r.Enriched)
	if err != nil {
		return err
	}
	if endsAfter != endsBefore {
		r.Fail("the enriched topic grew from %d to %d records: already-seen records were emitted again", endsBefore, endsAfter)
	} else {
		r.Note("the enriched topic held %d records before and after the re-send", endsAfter)
	}
	return nil
}

// ends is the sum of topic's end offsets.
func (r *Run) ends(ctx context.Context, topic string) (int64, error) {
	ends, err := kadm.NewClient(r.Admin).ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, err
	}
	var n int64
	ends.Each(func(lo kadm.ListedOffset) { n += lo.Offset })
	return n, nil
}

// 14
func changelogNotCompacted(ctx context.Context, r *Run) error {
	icfg := ingest.Config{Group: r.IngestGroup}
	adm := kadm.NewClient(r.Admin)
	resp, err := adm.CreateTopic(ctx, 3, r.Replication, map[string]*string{"cleanup.policy": kadm.StringPtr("delete")}, icfg.TableTopic())
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("pre-create the changelog: %w", err)
	}
	pl, err := r.StartPipeline(ctx, nil, nil)
	if err != nil {
		return err
	}
	if err := r.Load(ctx, r.Traffic(5), "").CaughtUp(ctx); err != nil {
		return err
	}
	m, err := pl.Ingest.Metrics(ctx)
	if err != nil {
		return err
	}
	flag := m.Count(kafkaMetricTableMisconfigured, map[string]string{"topic": icfg.TableTopic()})
	logged := strings.Contains(pl.Ingest.Log(), "not compacted")
	r.Note("changelog check: gauge %v, logged %v", flag, logged)
	if flag != 1 || !logged {
		r.Fail("the start-up check did not flag the non-compacted changelog %s (gauge %v, logged %v)", icfg.TableTopic(), flag, logged)
	}
	// Offset out of range: the changelog loses its records below what the local store holds.
	r.Term(pl.Ingest)
	ends, err := adm.ListEndOffsets(ctx, icfg.TableTopic())
	if err != nil {
		return err
	}
	del := kadm.Offsets{}
	ends.Each(func(lo kadm.ListedOffset) {
		del.Add(kadm.Offset{Topic: lo.Topic, Partition: lo.Partition, At: lo.Offset})
	})
	if _, err := adm.DeleteRecords(ctx, del); err != nil {
		return fmt.Errorf("delete changelog records: %w", err)
	}
	if err := pl.Ingest.Restart(); err != nil {
		return err
	}
	if err := pl.Ingest.Ready(ctx, 2*time.Minute); err != nil {
		r.Fail("after the changelog lost its records ingest did not get ready: %v", err)
	}
	if _, err := r.Load(ctx, r.Traffic(5), "-2").Wait(); err != nil {
		return err
	}
	r.Healed()
	return nil
}

// kafkaMetricTableMisconfigured is the gauge the start-up check sets (see internal/kafka).
const kafkaMetricTableMisconfigured = "backflow_table_changelog_misconfigured"

// 15
func leaderKilled(ctx context.Context, r *Run) error {
	if _, err := r.StartPipeline(ctx, nil, nil); err != nil {
		return err
	}
	load := r.Load(ctx, r.Traffic(60), "")
	sleep(ctx, r.Dur(15*time.Second))
	if err := r.killLeader(ctx); err != nil {
		return err
	}
	_, err := load.Wait()
	return err
}

// killLeader kills the broker leading partition 0 of the inference topic, waits 20 s and
// starts it again.
func (r *Run) killLeader(ctx context.Context) error {
	leader, err := Leader(ctx, kadm.NewClient(r.Admin), r.Inf, 0)
	if err != nil {
		return err
	}
	name := fmt.Sprintf("kafka-%d", leader)
	if err := r.Script.Kill(name); err != nil {
		return err
	}
	r.Note("killed %s, the leader of %s/0", name, r.Inf)
	sleep(ctx, r.Dur(20*time.Second))
	r.Healed()
	if _, err := r.Script.Run(ctx, "up", "--brokers", fmt.Sprint(len(r.Kafka.Brokers)), "kafka"); err != nil {
		return err
	}
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

// 18
func dlqUnwritable(ctx context.Context, r *Run) error {
	pl, err := r.StartPipeline(ctx, nil, nil)
	if err != nil {
		return err
	}
	// The broker refuses every DLQ record as too large (a DLQ entry's headers alone are
	// larger). min.insync.replicas above the brokers would be the other way, but Kafka 4
	// caps the effective minimum at the replication factor (KIP-966), so it refuses nothing.
	adm := kadm.NewClient(r.Admin)
	set := func(v *string) error {
		op := kadm.SetConfig
		if v == nil {
			op = kadm.DeleteConfig
		}
		resp, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: op, Name: "max.message.bytes", Value: v}}, r.DLQ)
		if err == nil {
			var one kadm.AlterConfigsResponse
			if one, err = resp.On(r.DLQ, nil); err == nil {
				err = one.Err
			}
		}
		return err
	}
	if err := set(kadm.StringPtr("16")); err != nil {
		return fmt.Errorf("make the DLQ unwritable: %w", err)
	}
	cfg := r.Traffic(3)
	cfg.PoisonRate = 0.02
	m, err := r.Load(ctx, cfg, "").Wait()
	if err != nil {
		return err
	}
	sleep(ctx, r.Dur(20*time.Second))
	firstPoison := map[string]int64{}
	for _, e := range m.Entries {
		k := fmt.Sprintf("%s/%d", e.Topic, e.Partition)
		if !e.Valid() {
			if o, ok := firstPoison[k]; !ok || e.Offset < o {
				firstPoison[k] = e.Offset
			}
		}
	}
	off, err := r.Committed(ctx, r.IngestGroup)
	if err != nil {
		return err
	}
	held := 0
	for k, p := range firstPoison {
		if off[k] > p {
			r.Fail("ingest committed %s to %d past the poison record at %d while the DLQ refused writes", k, off[k], p)
		} else {
			held++
		}
	}
	if dl, err := r.ends(ctx, r.DLQ); err != nil || dl != 0 {
		r.Fail("the DLQ holds %d records (%v) although the broker refused them: the fault was not exercised", dl, err)
	}
	mi, err := pl.Ingest.Metrics(ctx)
	if err != nil {
		return err
	}
	failed := mi.Count(ops.MetricDLQWriteErrors, map[string]string{"stage": "ingest"})
	logged := strings.Count(pl.Ingest.Log(), "DLQ write failed")
	r.Note("while the DLQ refused writes: %d of %d partitions held before their first poison record; %v failed writes counted in /metrics, %d log lines",
		held, len(firstPoison), failed, logged)
	if failed <= 0 || logged == 0 {
		r.Fail("the refused DLQ writes are not visible: %v in /metrics, %d log lines", failed, logged)
	}
	r.Healed()
	return set(nil)
}

// 19
func secured(ctx context.Context, r *Run) error {
	pl, err := r.StartPipeline(ctx, nil, nil)
	if err != nil {
		return err
	}
	if err := r.Load(ctx, r.Traffic(5), "").CaughtUp(ctx); err != nil {
		return err
	}
	r.Healed()
	secrets := r.secrets()
	if len(secrets) < 4 {
		return fmt.Errorf("found %d secrets of the secured stack, want at least 4", len(secrets))
	}
	// A wrong secret per system: each stage must stop by itself, at once, naming the system.
	for _, w := range []struct {
		system, variable, stages string
	}{
		{"kafka", "BACKFLOW_KAFKA_SASL_PASSWORD_FILE", "ingest"},
		{"registry", "BACKFLOW_REGISTRY_PASSWORD_FILE", "ingest"},
		{"clickhouse", "BACKFLOW_CLICKHOUSE_PASSWORD_FILE", "sink-clickhouse"},
		{"redis", "BACKFLOW_REDIS_PASSWORD_FILE", "sink-features"},
	} {
		bad := r.Dir + "/wrong-secret-" + w.system
		if err := os.WriteFile(bad, []byte("wrong-"+r.ID+"\n"), 0o600); err != nil {
			return err
		}
		cfg, err := r.Config("wrong-"+w.system, w.stages, nil)
		if err != nil {
			return err
		}
		p, err := r.Start("wrong-"+w.system, map[string]string{w.variable: bad}, "run", "--config", cfg)
		if err != nil {
			return err
		}
		start := time.Now()
		code, err := p.Wait(90 * time.Second)
		if err != nil {
			p.Kill()
		}
		log := p.Log()
		if code != 1 || !strings.Contains(log, "refused at start-up: "+w.system) {
			r.Fail("wrong %s secret: exit %d after %v, want 1 with \"refused at start-up: %s\":\n%s", w.system, code, time.Since(start), w.system, tail(log, 1500))
		} else {
			r.Note("wrong %s secret: exit 1 after %v, naming %s", w.system, time.Since(start).Round(100*time.Millisecond), w.system)
		}
		if strings.Contains(log, "wrong-"+r.ID) {
			r.Fail("the wrong %s secret is in the stage's log", w.system)
		}
	}
	// No secret in ps, logs or DLQ headers.
	leaks := 0
	for _, p := range []*Proc{pl.Ingest, pl.Sinks} {
		cmdline, _ := readFile(fmt.Sprintf("/proc/%d/cmdline", p.Pid()))
		for name, s := range secrets {
			if strings.Contains(cmdline, s) || strings.Contains(p.Log(), s) {
				leaks++
				r.Fail("the %s secret is in %s's command line or log", name, p.Name)
			}
		}
	}
	headers, err := r.dlqHeaders(ctx)
	if err != nil {
		return err
	}
	for name, s := range secrets {
		if strings.Contains(headers, s) {
			leaks++
			r.Fail("the %s secret is in a DLQ header", name)
		}
	}
	r.Note("%d secrets checked against the stages' command lines, logs and %d bytes of DLQ headers: %d leaks", len(secrets), len(headers), leaks)
	return nil
}

// 20
func soak(ctx context.Context, r *Run) error {
	pl, err := r.StartPipeline(ctx, nil, nil)
	if err != nil {
		return err
	}
	d := r.Opts.SoakDuration
	cfg := r.Traffic(0)
	cfg.Requests, cfg.Duration, cfg.Rate = 0, d, 300
	load := r.Load(ctx, cfg, "")
	end := time.Now().Add(d)
	faults := []struct {
		name string
		do   func() error
	}{
		{"1 sigkill ingest", func() error { pl.Ingest.Kill(); return pl.Ingest.Restart() }},
		{"2 clickhouse down 30s", func() error {
			if err := r.Script.Down(ctx, "clickhouse"); err != nil {
				return err
			}
			sleep(ctx, 30*time.Second)
			return r.Script.Up(ctx, "clickhouse")
		}},
		{"5 moderation down 60s", func() error {
			r.Sensitive.Stop()
			sleep(ctx, 60*time.Second)
			return r.Sensitive.Start(ctx)
		}},
		{"9 instances join and leave", func() error {
			b, err := r.StartRun(fmt.Sprintf("ingest-soak-%d", rand.IntN(1e6)), "ingest", nil)
			if err != nil {
				return err
			}
			sleep(ctx, 10*time.Second)
			s, err := r.StartRun(fmt.Sprintf("sinks-soak-%d", rand.IntN(1e6)), "sink-clickhouse, sink-features", nil)
			if err != nil {
				return err
			}
			sleep(ctx, 10*time.Second)
			b.Kill()
			sleep(ctx, 10*time.Second)
			r.Term(s)
			return nil
		}},
		{"15 leader killed", func() error { return r.killLeader(ctx) }},
	}
	n := 0
	for ; time.Now().Before(end) && ctx.Err() == nil; n++ {
		f := faults[n%len(faults)]
		r.Logf("  soak: %s", f.name)
		if err := f.do(); err != nil {
			return fmt.Errorf("soak fault %s: %w", f.name, err)
		}
		sleep(ctx, 15*time.Second)
	}
	r.Note("%d faults over %v of traffic at 300 requests/s", n, d)
	if _, err := load.Wait(); err != nil {
		return err
	}
	r.Healed()
	return nil
}

// secrets reads the secured stack's secrets from the files its env names.
func (r *Run) secrets() map[string]string {
	out := map[string]string{}
	for k, v := range r.Stack {
		if strings.HasSuffix(k, "_PASSWORD_FILE") || strings.HasSuffix(k, "_TOKEN_FILE") {
			if b, err := readFile(v); err == nil && strings.TrimSpace(b) != "" {
				out[k] = strings.TrimSpace(b)
			}
		}
	}
	return out
}

// dlqHeaders reads every header of every DLQ entry, as one string.
func (r *Run) dlqHeaders(ctx context.Context) (string, error) {
	n, err := r.ends(ctx, r.DLQ)
	if err != nil || n == 0 {
		return "", err
	}
	cl, err := r.Kafka.NewClient(kgo.ConsumeTopics(r.DLQ), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return "", err
	}
	defer cl.Close()
	var b strings.Builder
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for read := int64(0); read < n; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return "", fmt.Errorf("read %d of %d DLQ entries", read, n)
		}
		fs.EachRecord(func(rec *kgo.Record) {
			read++
			for _, h := range rec.Headers {
				b.WriteString(h.Key + "=" + string(h.Value) + "\n")
			}
		})
	}
	return b.String(), nil
}

func readFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}

func removeAll(dir string) error {
	if dir == "" || dir == "/" {
		return fmt.Errorf("refusing to remove %q", dir)
	}
	return os.RemoveAll(dir)
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
