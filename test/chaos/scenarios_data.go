package chaos

// The scenarios of the records themselves and the state kept about them: poison (7), the same
// requestId twice (12), the dedupe store rebuilt (13), a changelog not compacted (14), a DLQ that
// refuses writes (18), a replay from the earliest offset (11).
// The table of every scenario is scenarios.go.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/backflowhq/backflow/internal/feast"
	"github.com/backflowhq/backflow/internal/ops"
	"github.com/backflowhq/backflow/processors/features"
	"github.com/backflowhq/backflow/processors/ingest"
)

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
