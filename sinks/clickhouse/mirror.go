package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/internal/dlq"
	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/internal/ops"
)

// TableDLQ and ViewDLQ hold the DLQ mirror.
const (
	TableDLQ = "dlq_entries"
	ViewDLQ  = "v_dlq_entries"
)

// MirrorConfig says what the DLQ mirror reads and how it batches.
type MirrorConfig struct {
	// Group is the consumer group. Default: Config's MirrorDLQGroup.
	Group string
	// Topic is the dead-letter topic. Default: "backflow.dlq".
	Topic string
	// BatchRows, BatchInterval, InsertTimeout, BackoffMin, BackoffMax and FromStart mean what
	// they mean in Config, with the same defaults.
	BatchRows              int
	BatchInterval          time.Duration
	InsertTimeout          time.Duration
	BackoffMin, BackoffMax time.Duration
	FromStart              bool
	// Metrics (stage MirrorStage) and OnAssigned mean what they mean in RunConfig; both
	// optional.
	Metrics    *ops.Stage
	OnAssigned func(assigned bool)
}

func (c MirrorConfig) sink() Config {
	if c.Group == "" {
		c.Group = Config{}.withDefaults().MirrorDLQGroup
	}
	if c.Topic == "" {
		c.Topic = dlq.DefaultTopic
	}
	// DLQTopic is unused by the mirror (there is no DLQ for the DLQ); name it apart from Topic
	// so that Config's checks apply unchanged.
	return Config{Group: c.Group, Topic: c.Topic, DLQTopic: c.Topic + ".unused", BatchRows: c.BatchRows,
		BatchInterval: c.BatchInterval, InsertTimeout: c.InsertTimeout, BackoffMin: c.BackoffMin, BackoffMax: c.BackoffMax,
		FromStart: c.FromStart}.withDefaults()
}

// Validate reports every bad field by name.
func (c MirrorConfig) Validate() error { return c.sink().Validate() }

// DLQRow is a row of dlq_entries.
type DLQRow struct {
	DLQTopic        string    `ch:"dlq_topic"`
	DLQPartition    int32     `ch:"dlq_partition"`
	DLQOffset       int64     `ch:"dlq_offset"`
	OriginTopic     string    `ch:"origin_topic"`
	OriginPartition int32     `ch:"origin_partition"`
	OriginOffset    int64     `ch:"origin_offset"`
	OriginTime      time.Time `ch:"origin_time"`
	Stage           string    `ch:"stage"`
	Class           string    `ch:"class"`
	Message         string    `ch:"message"`
	ErrorTime       time.Time `ch:"error_time"`
	RecordKey       string    `ch:"record_key"`
	ValueBytes      uint32    `ch:"value_bytes"`
	TruncatedFrom   uint32    `ch:"truncated_from"`
	Version         uint64    `ch:"version"`
}

// MapDLQRecord turns a DLQ record into its mirror row. A record without the DLQ headers (not
// written by dlq.Writer) is mirrored too, with class "unreadable_entry" and the reason as its
// message, so that it is visible rather than silently skipped.
func MapDLQRecord(r *kgo.Record) DLQRow {
	row := DLQRow{DLQTopic: r.Topic, DLQPartition: r.Partition, DLQOffset: r.Offset, Version: uint64(max(r.Offset, 0)),
		ErrorTime: r.Timestamp.UTC(), RecordKey: string(r.Key), ValueBytes: uint32(len(r.Value))}
	e, err := dlq.Decode(r)
	if err != nil {
		row.Class, row.Message = "unreadable_entry", err.Error()
		return row
	}
	row.OriginTopic, row.OriginPartition, row.OriginOffset = e.Origin.Topic, e.Origin.Partition, e.Origin.Offset
	row.Stage, row.Class, row.Message = e.Stage, e.Class, e.Message
	row.RecordKey, row.ValueBytes, row.TruncatedFrom = string(e.Origin.Key), uint32(len(e.Origin.Value)), uint32(max(e.TruncatedFrom, 0))
	if !e.Origin.Timestamp.IsZero() && e.Origin.Timestamp.After(minDateTime) {
		row.OriginTime = e.Origin.Timestamp.UTC()
	} else {
		row.OriginTime = minDateTime
	}
	if !e.Time.IsZero() {
		row.ErrorTime = e.Time.UTC()
	}
	return row
}

// minDateTime is the smallest value of a ClickHouse DateTime.
var minDateTime = time.Unix(0, 0).UTC()

// RunDLQMirror mirrors the dead-letter topic into dlq_entries until ctx ends: a consumer group
// that batches like the sink (BatchRows, BatchInterval), inserts with one PrepareBatch per flush,
// retries outages with backoff (fetching paused), and commits only what it inserted. There is
// no DLQ for the DLQ: an insert error that is not retryable stops it.
func RunDLQMirror(ctx context.Context, mc MirrorConfig, kcfg kafka.Conn, chcfg Conn, log *slog.Logger) error {
	if err := mc.Validate(); err != nil {
		return err
	}
	cfg := mc.sink()
	if log == nil {
		log = slog.Default()
	}
	s := &Sink{cfg: cfg, log: log, rc: RunConfig{ClickHouse: chcfg, OnAssigned: mc.OnAssigned}, m: newMetrics(mc.Metrics, cfg.Group)}
	conn, err := s.openClickHouse(ctx)
	if err != nil {
		return err
	}
	s.w = NewWriter(conn, s.cfg.InsertTimeout).forCluster(s.rc.ClickHouse)
	defer s.w.Close()

	var (
		mu    sync.Mutex
		buf   = map[int32][]*kgo.Record{}
		n     int
		first time.Time
	)
	drop := func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range m[cfg.Topic] {
			n -= len(buf[p])
			delete(buf, p)
		}
	}
	reset := kgo.NewOffset().AtEnd()
	if cfg.FromStart {
		reset = kgo.NewOffset().AtStart()
	}
	s.cl, err = kcfg.NewClient(kgo.ConsumerGroup(cfg.Group), kgo.ConsumeTopics(cfg.Topic), kgo.ConsumeResetOffset(reset),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(), kgo.OnPartitionsRevoked(drop),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) { s.assigned(true) }),
		kgo.OnPartitionsLost(func(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
			drop(ctx, cl, m)
			s.assigned(false)
		}))
	if err != nil {
		return err
	}
	defer s.cl.Close()

	flush := func(ctx context.Context) error {
		start := time.Now()
		mu.Lock()
		b, k := buf, n
		buf, n = map[int32][]*kgo.Record{}, 0
		mu.Unlock()
		if k == 0 {
			return nil
		}
		defer s.resume()
		parts := make([]int32, 0, len(b))
		for p := range b {
			parts = append(parts, p)
		}
		sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
		rows := make([]DLQRow, 0, k)
		last := make([]*kgo.Record, 0, len(parts))
		for _, p := range parts {
			for _, r := range b[p] {
				rows = append(rows, MapDLQRecord(r))
			}
			last = append(last, b[p][len(b[p])-1])
		}
		if _, err := insertRows(ctx, s, TableDLQ, rows, nil, nil); err != nil {
			return err
		}
		attempts := 0
		s.commit(ctx, last, &attempts)
		s.stats.records.Add(int64(k))
		s.stats.rows.Add(int64(k))
		s.stats.flushes.Add(1)
		s.m.st().Out(k)
		s.m.st().Batch(k)
		s.m.st().Flush(time.Since(start))
		return nil
	}

	for {
		if ctx.Err() != nil {
			fctx, cancel := context.WithTimeout(context.Background(), cfg.InsertTimeout)
			err := flush(fctx)
			cancel()
			if err != nil {
				log.Warn("clickhouse dlq mirror: final flush failed; its records stay uncommitted", "err", err)
			}
			return nil
		}
		mu.Lock()
		room, k, f := cfg.BatchRows-n, n, first
		mu.Unlock()
		if room > 0 {
			wait := cfg.BatchInterval
			if k > 0 {
				wait = max(time.Until(f.Add(cfg.BatchInterval)), time.Millisecond)
			}
			pctx, cancel := context.WithTimeout(ctx, wait)
			fs := s.cl.PollRecords(pctx, room)
			cancel()
			if fs.IsClientClosed() {
				return nil
			}
			fs.EachError(func(t string, p int32, err error) {
				if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
					log.Warn("clickhouse dlq mirror: fetch", "topic", t, "partition", p, "err", err)
				}
			})
			mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				if n == 0 {
					first = time.Now()
				}
				buf[r.Partition] = append(buf[r.Partition], r)
				n++
				s.m.st().In(1)
			})
			mu.Unlock()
		}
		mu.Lock()
		due := n >= cfg.BatchRows || (n > 0 && time.Since(first) >= cfg.BatchInterval)
		mu.Unlock()
		if due {
			if err := flush(ctx); err != nil {
				s.cl.AllowRebalance()
				if ctx.Err() != nil {
					continue // the final flush above retries once, bounded
				}
				return fmt.Errorf("clickhouse dlq mirror: %w", err)
			}
		}
		s.cl.AllowRebalance()
	}
}
