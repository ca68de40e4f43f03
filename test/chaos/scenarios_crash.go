package chaos

// The scenarios that crash, stop or reshuffle backflow's own processes and Kafka's brokers:
// SIGKILL (1), a rebalance storm (9), SIGTERM with full buffers (10), a partition leader killed (15).
// The table of every scenario is scenarios.go.

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/backflowhq/backflow/internal/ops"
	"github.com/backflowhq/backflow/sinks/clickhouse"
)

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
func (r *Run) killLeader(ctx context.Context) error { return r.killLeaderOf(ctx, r.Inf) }

// killLeaderOf kills the broker leading partition 0 of topic, waits 20 s and starts it again.
func (r *Run) killLeaderOf(ctx context.Context, topic string) error {
	leader, err := Leader(ctx, kadm.NewClient(r.Admin), topic, 0)
	if err != nil {
		return err
	}
	name := fmt.Sprintf("kafka-%d", leader)
	if err := r.Script.Kill(name); err != nil {
		return err
	}
	r.Note("killed %s, the leader of %s/0", name, topic)
	sleep(ctx, r.Dur(20*time.Second))
	r.Healed()
	if _, err := r.Script.Run(ctx, "up", "--brokers", fmt.Sprint(len(r.Kafka.Brokers)), "kafka"); err != nil {
		return err
	}
	return nil
}
