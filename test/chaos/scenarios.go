package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"time"
)

// The scenarios' bodies are in files by family: scenarios_crash.go (backflow's processes and
// Kafka's brokers), scenarios_sinks.go (ClickHouse and Redis), scenarios_services.go (the
// sensitive-word service and the registry), scenarios_data.go (the records and the state kept
// about them), scenarios_secured.go, restarts.go (deploys and restores), scenarios_streams.go
// (a declared stream) and, here, the soak.

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
	{ID: 25, Name: "protobuf-stream-broker-restart", Records: 20_000, Brokers: 3, Fault: "a declared Protobuf stream (shop-order, its schema importing another subject) under traffic; SIGKILL the broker leading partition 0 of its topic, restarted after 20 s",
		Asserts: "the stream's stage rides through; every record once in v_shop_order, every poison record in the stream's DLQ with its class", Run: protobufStreamBrokerRestart},
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
