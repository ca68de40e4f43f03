// Package dlqmirror is the DLQ mirror, the stage sink-clickhouse-dlq-mirror (Stage): it copies
// each entry of the dead-letter topic into dlq_entries, and each entry's origin into
// dlq_first, for the dashboards and `backflow dlq` to read. It is the ClickHouse sink's one
// loop (clickhouse.NewLoop) over the dead-letter topic, in its own group, with a mapping of its
// own (mirrorMapping); after a flush, at most once an hour, it drops dlq_first's days past the
// topic's retention (retention.go). Its settings are keys of the sink_clickhouse section
// (clickhouse.Config: mirror_dlq, mirror_dlq_group, and the sink's batching), which ConfigOf
// reads: it starts and stops with the sink-clickhouse stage.
package dlqmirror

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/internal/dlq"
	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/internal/ops"
	"github.com/backflowhq/backflow/internal/rollup"
	"github.com/backflowhq/backflow/sinks/clickhouse"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
)

// Stage is the DLQ mirror's stage: its part in /readyz and the stage label of its metrics.
const Stage = "sink-clickhouse-dlq-mirror"

// TableDLQ and ViewDLQ hold the DLQ mirror.
const (
	TableDLQ = "dlq_entries"
	ViewDLQ  = "v_dlq_entries"
)

// Config says what the DLQ mirror reads and how it batches.
type Config struct {
	// Group is the consumer group. Default: clickhouse.Config's MirrorDLQGroup.
	Group string
	// Topic is the dead-letter topic. Default: "backflow.dlq".
	Topic string
	// BatchRows, BatchInterval, InsertTimeout, BackoffMin, BackoffMax and FromStart mean what
	// they mean in clickhouse.Config, with the same defaults.
	BatchRows              int
	BatchInterval          time.Duration
	InsertTimeout          time.Duration
	BackoffMin, BackoffMax time.Duration
	FromStart              bool
	// RollupTopic receives the mirror's rollup marks (the minutes of dlq_entries each flush
	// wrote into); "": none.
	RollupTopic string
	// Metrics (stage Stage) and OnAssigned mean what they mean in clickhouse.RunConfig; both
	// optional.
	Metrics    *ops.Stage
	OnAssigned func(assigned bool)
}

// ConfigOf is the DLQ mirror's part of the sink_clickhouse section c: its group, the DLQ
// topic, the sink's batching, and the topic of its rollup marks ("" without rollups).
func ConfigOf(c clickhouse.Config) Config {
	c = c.WithDefaults()
	return Config{Group: c.MirrorDLQGroup, Topic: c.DLQTopic, BatchRows: c.BatchRows, BatchInterval: c.BatchInterval,
		InsertTimeout: c.InsertTimeout, BackoffMin: c.BackoffMin, BackoffMax: c.BackoffMax, FromStart: c.FromStart, RollupTopic: c.MarksTopic()}
}

// sink is the loop's config: c's, with the defaults.
func (c Config) sink() clickhouse.Config {
	if c.Group == "" {
		c.Group = clickhouse.Config{}.WithDefaults().MirrorDLQGroup
	}
	if c.Topic == "" {
		c.Topic = dlq.DefaultTopic
	}
	// DLQTopic is unused by the mirror (there is no DLQ for the DLQ); name it apart from Topic
	// so that Config's checks apply unchanged.
	return clickhouse.Config{Group: c.Group, Topic: c.Topic, DLQTopic: c.Topic + ".unused", BatchRows: c.BatchRows,
		BatchInterval: c.BatchInterval, InsertTimeout: c.InsertTimeout, BackoffMin: c.BackoffMin, BackoffMax: c.BackoffMax,
		FromStart: c.FromStart}.WithDefaults()
}

// Validate reports every bad field by name.
func (c Config) Validate() error { return c.sink().Validate() }

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

// MapRecord turns a DLQ record into its mirror row. A record without the DLQ headers (not
// written by dlq.Writer) is mirrored too, with class "unreadable_entry" and the reason as its
// message, so that it is visible rather than silently skipped.
func MapRecord(r *kgo.Record) DLQRow {
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

// New validates mc and builds the DLQ mirror: a clickhouse.Sink over the dead-letter topic
// that copies each entry into dlq_entries (mirrorMapping), with the sink's batching, retries
// and commits. There is no DLQ for the DLQ: an entry always maps to a row, and a row
// ClickHouse rejects stops the mirror uncommitted. It writes no sink_ledger rows, and of the
// metrics only the stage's shared families (records in and out, batches, flushes, sink
// errors): its backlog shows as its group's consumer lag.
func New(mc Config, kcfg kafka.Conn, chcfg chschema.Conn, log *slog.Logger) (*clickhouse.Sink, error) {
	if err := mc.Validate(); err != nil {
		return nil, err
	}
	if err := chcfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	cfg := mc.sink()
	mm := &mirrorMapping{log: log, sweep: func(ctx context.Context, conn rollup.Conn, now time.Time) ([]uint32, error) {
		retention, err := topicRetention(ctx, kcfg, cfg.Topic)
		if err != nil {
			return nil, err
		}
		return DropExpiredDLQFirst(ctx, conn, chcfg, retention, now)
	}}
	return clickhouse.NewLoop(cfg, clickhouse.RunConfig{Kafka: kcfg, ClickHouse: chcfg, Logger: log, Metrics: mc.Metrics, OnAssigned: mc.OnAssigned},
		mm, clickhouse.Loop{Marks: mc.RollupTopic}), nil
}

// Run builds the DLQ mirror (New) and runs it until ctx ends; see clickhouse.Sink.
func Run(ctx context.Context, mc Config, kcfg kafka.Conn, chcfg chschema.Conn, log *slog.Logger) error {
	s, err := New(mc, kcfg, chcfg, log)
	if err != nil {
		return err
	}
	return s.Run(ctx)
}

// mirrorMapping is the DLQ mirror's mapping: a DLQ entry becomes its row of dlq_entries
// (MapRecord), an entry not written by dlq.Writer included. After a flush, at most once per
// dlqSweepEvery, it drops dlq_first's days past the topic's retention (dlq_retention.go).
type mirrorMapping struct {
	// sweep drops the expired days (nil: never); next is when it is due again. Flushes run
	// one at a time, so they need no lock.
	sweep func(ctx context.Context, conn rollup.Conn, now time.Time) ([]uint32, error)
	next  time.Time
	log   *slog.Logger
}

// Map mirrors any record: an entry never is at fault.
func (*mirrorMapping) Map(_ context.Context, _ clickhouse.Waiter, rec *kgo.Record) (clickhouse.Row, error, error) {
	return MapRecord(rec), nil, nil
}

// Insert lands the entries in dlq_entries, then their origins in dlq_first, then sweeps
// dlq_first's expired days when due.
func (mm *mirrorMapping) Insert(ctx context.Context, in clickhouse.Lander, rows []clickhouse.Row) (map[int]error, error) {
	dl := make([]DLQRow, len(rows))
	owners := make([]int, len(rows))
	for i, r := range rows {
		dl[i], owners[i] = r.(DLQRow), i
	}
	rejects := map[int]error{}
	if err := in.Insert(ctx, clickhouse.TableBatch(TableDLQ, dl, chschema.StructColumns[DLQRow]), owners, rejects); err != nil {
		return rejects, err
	}
	// Each entry's origin in dlq_first, which keeps the first: the DLQ rollup counts an
	// origin once, as v_dlq_entries does (migration 0015).
	first := make([]DLQFirstRow, len(dl))
	for i, d := range dl {
		first[i] = d.first()
	}
	if err := in.Insert(ctx, clickhouse.TableBatch(rollup.DLQFirst, first, chschema.StructColumns[DLQFirstRow]), nil, nil); err != nil {
		return rejects, err
	}
	mm.expire(ctx, in.Statements(), time.Now())
	return rejects, nil
}

// expire drops dlq_first's expired days when due. A failure (Kafka or ClickHouse away) is
// logged and tried again dlqSweepRetry later: the mirror runs on, and a day kept longer only
// costs disk.
func (mm *mirrorMapping) expire(ctx context.Context, conn rollup.Conn, now time.Time) {
	if mm.sweep == nil || conn == nil || now.Before(mm.next) {
		return
	}
	// Housekeeping inside a flush: a broker or server that does not answer holds the flush,
	// and the commit after it, dlqSweepTimeout at most.
	ctx, cancel := context.WithTimeout(ctx, dlqSweepTimeout)
	defer cancel()
	days, err := mm.sweep(ctx, conn, now)
	if err != nil {
		mm.next = now.Add(dlqSweepRetry)
		mm.log.Warn("dlq mirror: dropping expired days of "+rollup.DLQFirst+" failed; trying again later", "err", err, "retry_in", dlqSweepRetry)
		return
	}
	mm.next = now.Add(dlqSweepEvery)
	if len(days) > 0 {
		mm.log.Info("dlq mirror: dropped days of "+rollup.DLQFirst+" past the dead-letter topic's retention", "days", fmt.Sprint(days))
	}
}

// DLQFirstRow is a row of dlq_first: an entry's origin and its place in the DLQ, versioned so
// that FINAL keeps an origin's lowest place. OriginTime leads the key (rollup.DLQFirstTime).
type DLQFirstRow struct {
	OriginTime      time.Time `ch:"origin_time"`
	OriginTopic     string    `ch:"origin_topic"`
	OriginPartition int32     `ch:"origin_partition"`
	OriginOffset    int64     `ch:"origin_offset"`
	Stage           string    `ch:"stage"`
	Orphan          string    `ch:"orphan"`
	DLQTopic        string    `ch:"dlq_topic"`
	DLQPartition    int32     `ch:"dlq_partition"`
	DLQOffset       int64     `ch:"dlq_offset"`
	Version         uint64    `ch:"version"`
}

// first is the entry's dlq_first row; an entry without an origin is its own (rollup.DLQOrphan),
// at its own dead-letter time.
func (r DLQRow) first() DLQFirstRow {
	f := DLQFirstRow{OriginTime: r.OriginTime, OriginTopic: r.OriginTopic, OriginPartition: r.OriginPartition, OriginOffset: r.OriginOffset, Stage: r.Stage,
		DLQTopic: r.DLQTopic, DLQPartition: r.DLQPartition, DLQOffset: r.DLQOffset,
		Version: ^uint64(0) - (uint64(max(r.DLQPartition, 0))<<40 + uint64(max(r.DLQOffset, 0)))}
	if r.OriginTopic == "" {
		f.Orphan = fmt.Sprintf("%s/%d/%d", r.DLQTopic, r.DLQPartition, r.DLQOffset)
		f.OriginTime = r.ErrorTime
	}
	return f
}

// Marks: an entry lands in dlq_entries at its dead-letter time.
func (r DLQRow) Marks(add func(source string, at time.Time)) { add(rollup.DLQEntries, r.ErrorTime) }

// Tally: an entry is one row of dlq_entries (the mirror keeps no ledger).
func (DLQRow) Tally() clickhouse.Tally { return clickhouse.Tally{Rows: 1} }
