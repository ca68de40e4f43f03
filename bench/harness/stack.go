package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	goredis "github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/pipelines"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
	"github.com/backflowhq/backflow/sinks/redis"
)

// stack holds the harness's own connections to the local stack: Kafka (to create topics and
// read end and committed offsets), ClickHouse (databases and counts) and Redis.
type stack struct {
	conn pipelines.Conns
	cl   *kgo.Client
	adm  *kadm.Client
	ch   driver.Conn
	rdb  goredis.UniversalClient
}

func openStack(ctx context.Context, conn pipelines.Conns) (*stack, error) {
	s := &stack{conn: conn}
	var err error
	if s.cl, err = conn.Kafka.NewClient(); err != nil {
		return nil, err
	}
	s.adm = kadm.NewClient(s.cl)
	if s.ch, err = chschema.Open(ctx, conn.ClickHouse); err != nil {
		s.cl.Close()
		return nil, err
	}
	if s.rdb, err = redis.Open(ctx, conn.Redis); err != nil {
		s.cl.Close()
		s.ch.Close()
		return nil, err
	}
	return s, nil
}

func (s *stack) Close() {
	s.cl.Close()
	s.ch.Close()
	s.rdb.Close()
}

// createTopics creates topics with partitions partitions each.
func (s *stack) createTopics(ctx context.Context, partitions int32, topics ...string) error {
	specs := make([]kafka.TopicSpec, len(topics))
	for i, t := range topics {
		specs[i] = kafka.TopicSpec{Name: t, Partitions: partitions}
	}
	return kafka.EnsureTopics(ctx, s.cl, specs...)
}

// endOffsets sums the end offsets of topics (records written, as every topic here starts at 0).
func (s *stack) endOffsets(ctx context.Context, topics ...string) (int64, error) {
	ends, err := s.adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return 0, err
	}
	var n int64
	var ferr error
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil && ferr == nil {
			ferr = fmt.Errorf("end offset %s/%d: %w", o.Topic, o.Partition, o.Err)
		}
		n += o.Offset
	})
	return n, ferr
}

// committed sums the offsets group committed on topics (0 for a partition without a commit).
func (s *stack) committed(ctx context.Context, group string, topics ...string) (int64, error) {
	offs, err := s.adm.FetchOffsets(ctx, group)
	if err != nil {
		return 0, err
	}
	want := map[string]bool{}
	for _, t := range topics {
		want[t] = true
	}
	var n int64
	offs.Each(func(o kadm.OffsetResponse) {
		if want[o.Topic] && o.Err == nil && o.At > 0 {
			n += o.At
		}
	})
	return n, nil
}

// deleteTopics removes topics (best effort; the harness's topics are named per run).
func (s *stack) deleteTopics(ctx context.Context, topics ...string) {
	if len(topics) > 0 {
		_, _ = s.adm.DeleteTopics(ctx, topics...)
	}
}

// deleteGroups removes consumer groups (best effort).
func (s *stack) deleteGroups(ctx context.Context, groups ...string) {
	if len(groups) > 0 {
		_, _ = s.adm.DeleteGroups(ctx, groups...)
	}
}

// onCluster is the ON CLUSTER clause of the harness's DDL: empty on one server.
func (s *stack) onCluster() string {
	if c := s.conn.ClickHouse.Cluster; c != "" {
		return " ON CLUSTER " + c
	}
	return ""
}

// createDatabase creates db on ClickHouse and applies backflow's migrations to it, so every
// peer writes into the same table shape. In cluster mode, on every host of the cluster, with
// the replicated and Distributed tables backflow migrate makes.
func (s *stack) createDatabase(ctx context.Context, db string) error {
	if err := s.ch.Exec(ctx, "CREATE DATABASE IF NOT EXISTS "+db+s.onCluster()); err != nil {
		return fmt.Errorf("create database %s: %w", db, err)
	}
	cfg := s.conn.ClickHouse
	cfg.Database = db
	if cfg.Cluster != "" {
		if _, err := chschema.MigrateCluster(ctx, cfg, false); err != nil {
			return fmt.Errorf("migrate %s on cluster %s: %w", db, cfg.Cluster, err)
		}
		return nil
	}
	conn, err := chschema.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := chschema.Migrate(ctx, conn); err != nil {
		return fmt.Errorf("migrate %s: %w", db, err)
	}
	return nil
}

func (s *stack) dropDatabase(ctx context.Context, db string) {
	_ = s.ch.Exec(ctx, "DROP DATABASE IF EXISTS "+db+s.onCluster())
}

// rowCounts returns the raw rows of inference_results + gateway_logs in db, and the rows
// through FINAL (one per (topic, request id[, phase])).
func (s *stack) rowCounts(ctx context.Context, db string) (raw, final uint64, err error) {
	q := fmt.Sprintf(`SELECT (SELECT count() FROM %[1]s.inference_results) + (SELECT count() FROM %[1]s.gateway_logs),
		(SELECT count() FROM %[1]s.inference_results FINAL) + (SELECT count() FROM %[1]s.gateway_logs FINAL)`, db)
	err = s.ch.QueryRow(ctx, q).Scan(&raw, &final)
	return raw, final, err
}

// tableRows returns the rows of db.table, raw and through FINAL (one per dedupe key).
func (s *stack) tableRows(ctx context.Context, db, table string) (raw, final uint64, err error) {
	q := fmt.Sprintf(`SELECT (SELECT count() FROM %[1]s.%[2]s), (SELECT count() FROM %[1]s.%[2]s FINAL)`, db, table)
	err = s.ch.QueryRow(ctx, q).Scan(&raw, &final)
	return raw, final, err
}

// latency reads landed - event time, in ms, of the gateway REQUEST rows of db whose event time
// is at or after from: loadgen stamps a REQUEST with the moment it generates it, so for those
// rows the difference is the pipeline's latency (an inference result or RESPONSE is stamped with
// the simulated model latency added, later than it is sent).
func (s *stack) latency(ctx context.Context, db string, from time.Time) (latencyResult, error) {
	var r latencyResult
	var qs []float64
	q := fmt.Sprintf(`SELECT count(), quantilesExact(0.5, 0.95, 0.99)(toFloat64(landed_time_ms - event_time_ms)), max(landed_time_ms - event_time_ms)
		FROM %s.gateway_logs WHERE phase = 'REQUEST' AND landed_time_ms > 0 AND event_time_ms >= ?`, db)
	var maxMs int64
	if err := s.ch.QueryRow(ctx, q, from.UnixMilli()).Scan(&r.Samples, &qs, &maxMs); err != nil {
		return r, err
	}
	if len(qs) == 3 {
		r.P50, r.P95, r.P99 = qs[0], qs[1], qs[2]
	}
	r.Max = float64(maxMs)
	return r, nil
}

// redisKeys is the number of keys in the harness's Redis database (on a Redis Cluster, the sum
// over its masters).
func (s *stack) redisKeys(ctx context.Context) (int64, error) {
	cc, ok := s.rdb.(*goredis.ClusterClient)
	if !ok {
		return s.rdb.DBSize(ctx).Result()
	}
	var n atomic.Int64
	err := cc.ForEachMaster(ctx, func(ctx context.Context, m *goredis.Client) error {
		k, err := m.DBSize(ctx).Result()
		n.Add(k)
		return err
	})
	return n.Load(), err
}

// flushRedis empties the harness's Redis database (never database 0 of one Redis unless told
// so; on a Redis Cluster, which has only database 0, every master: the cluster stack is for
// tests and benchmarks).
func (s *stack) flushRedis(ctx context.Context) error {
	if cc, ok := s.rdb.(*goredis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, m *goredis.Client) error { return m.FlushDB(ctx).Err() })
	}
	return s.rdb.FlushDB(ctx).Err()
}
