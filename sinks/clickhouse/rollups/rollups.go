// Package rollups is the rollup loop, the stage sink-clickhouse-rollups (Stage): it keeps the
// dashboards' rollups (internal/rollup) exact. Every flush of the ClickHouse sink and of the
// DLQ mirror, once its rows have landed and before it commits, writes a mark for each table
// and hour it wrote into (clickhouse.Mark, sinks/clickhouse/rollup_marks.go) to
// Config.RollupTopic, which EnsureTopic creates. The rollup loop is the ClickHouse sink's one
// loop (clickhouse.NewLoop) over that topic, in its own group (Config.RollupGroup), with a
// mapping of its own (rollupMapping) that re-aggregates the minutes the marks name, from FINAL,
// with rollup.Recompute, then commits. A mark is read only after its rows landed, a mark read
// twice re-aggregates the same minutes again, and the marks of one UTC day are one partition's,
// so one member at a time re-aggregates a day: the rollups end up equal to the deduplicated
// tables whatever was replayed, redelivered or late.
//
// Its settings are keys of the sink_clickhouse section (clickhouse.Config: rollups,
// rollup_topic, rollup_group), with their defaults there: the sink's flushes need the topic
// too, and the loop starts and stops with the sink-clickhouse stage.
package rollups

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/internal/ops"
	"github.com/backflowhq/backflow/internal/rollup"
	"github.com/backflowhq/backflow/sinks/clickhouse"
)

// Stage is the rollup loop's stage: its part in /readyz, the stage label of its metrics and
// the stage of its dead letters.
const Stage = "sink-clickhouse-rollups"

// MetricLag is the rollup loop's freshness.
const MetricLag = "backflow_rollup_lag_seconds"

// New validates cfg and builds the rollup loop: a clickhouse.Sink over cfg.RollupTopic in group
// cfg.RollupGroup that re-aggregates the minutes its marks name. A mark that does not decode
// goes to cfg.DLQTopic (stage Stage); it writes no ledger rows and no marks of its own, and a
// stop leaves the rollup under way to the partition's next owner. rc.Metrics, if set, is
// Stage's: besides the shared families and the buffer's it exports MetricLag.
func New(cfg clickhouse.Config, rc clickhouse.RunConfig) (*clickhouse.Sink, error) {
	cfg = cfg.WithDefaults()
	cfg.Rollups = true
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := rc.ClickHouse.Validate(); err != nil {
		return nil, err
	}
	rm := newRollupMapping()
	loop := cfg
	loop.Group, loop.Topic = cfg.RollupGroup, cfg.RollupTopic
	s := newLoop(loop, rc, rm)
	if rc.Metrics != nil {
		reg := rc.Metrics.Registerer()
		for _, source := range rollup.Sources() {
			f := rm.fresh[source]
			ops.Register(reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: MetricLag,
				Help:        "Seconds from a flush landing rows of a table to the rollup loop having re-aggregated their minutes: the age of the table's oldest mark in the last rollup, or in the rollup under way while it lasts.",
				ConstLabels: prometheus.Labels{"group": cfg.RollupGroup, "source": source}}, f.lag))
		}
	}
	return s, nil
}

// newLoop is the rollup loop on cfg's group and topic: dead letters of stage Stage, no ledger,
// no marks of its own, and a stop that leaves the rollup under way to the next owner (a
// rollup is safe to repeat, and can take seconds on a loaded server: finishing it held every
// stop of the process for up to InsertTimeout).
func newLoop(cfg clickhouse.Config, rc clickhouse.RunConfig, rm *rollupMapping) *clickhouse.Sink {
	return clickhouse.NewLoop(cfg, rc, rm, clickhouse.Loop{DLQStage: Stage, AbandonOnStop: true, BufferMetrics: true})
}

// EnsureTopic creates the rollup loop's topic (cfg.RollupTopic) if it is missing, with the
// partitions of the sink's topic (one if that does not exist yet): the flushes of several
// members produce marks, and the loop's members share the days among them.
func EnsureTopic(ctx context.Context, k kafka.Conn, cfg clickhouse.Config) error {
	cfg = cfg.WithDefaults()
	cl, err := k.NewClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	partitions := int32(1)
	if td, err := kadm.NewClient(cl).ListTopics(ctx, cfg.Topic); err == nil && td.Has(cfg.Topic) && td[cfg.Topic].Err == nil {
		partitions = int32(max(len(td[cfg.Topic].Partitions), 1))
	}
	return kafka.EnsureTopics(ctx, cl, kafka.TopicSpec{Name: cfg.RollupTopic, Partitions: partitions,
		Replication: int16(max(k.TableReplication, 1))})
}

// rollupMapping is the rollup loop's mapping: a mark becomes a markRow, and a flush
// re-aggregates the minutes of its marks, table by table.
type rollupMapping struct {
	fresh map[string]*freshness // by source table: every one of rollup.Sources
}

func newRollupMapping() *rollupMapping {
	rm := &rollupMapping{fresh: map[string]*freshness{}}
	for _, s := range rollup.Sources() {
		rm.fresh[s] = &freshness{}
	}
	return rm
}

// freshness is one table's MetricLag.
type freshness struct {
	// pending is the time (Unix ms) of the table's oldest mark in the rollup under way, 0
	// between rollups; last is the lag of its last rollup, in ms.
	pending, last atomic.Int64
}

// lag is MetricLag: how old the oldest mark of the rollup under way is, or, between
// rollups, how old the oldest mark of the last one was when it finished.
func (f *freshness) lag() float64 {
	if p := f.pending.Load(); p != 0 {
		return float64(time.Now().UnixMilli()-p) / 1000
	}
	return float64(f.last.Load()) / 1000
}

// markRow is a mark read, and when it was written.
type markRow struct {
	clickhouse.Mark
	at time.Time // when the flush that wrote it had landed its rows
}

// Tally: a mark is no row of any table the ledger counts.
func (markRow) Tally() clickhouse.Tally { return clickhouse.Tally{} }

// Map reads a mark; one that is not (clickhouse.DecodeMark) is at fault.
func (rm *rollupMapping) Map(_ context.Context, _ clickhouse.Waiter, rec *kgo.Record) (clickhouse.Row, error, error) {
	m, err := clickhouse.DecodeMark(rec)
	if err != nil {
		return nil, err, nil
	}
	return markRow{Mark: m, at: rec.Timestamp}, nil, nil
}

// Insert re-aggregates the marks' minutes, each table's at once, retrying whatever fails
// (an outage, or a statement ClickHouse refuses, say after a column was changed by hand) with
// backoff until it succeeds or the loop stops: the rollups are derived, so their failure
// must not stop the sink, and the marks stay uncommitted meanwhile. The lag metric grows and
// BackflowRollupLagHigh fires; the panels stay exact, reading raw rows from the watermark on.
func (rm *rollupMapping) Insert(ctx context.Context, in clickhouse.Lander, rows []clickhouse.Row) (map[int]error, error) {
	conn := in.Statements()
	if conn == nil {
		return nil, fmt.Errorf("%w: the sink has no connection to run statements on", clickhouse.ErrClickHouseFatal)
	}
	minutes := map[string][]time.Time{}
	oldest := map[string]time.Time{}
	for _, r := range rows {
		m := r.(markRow)
		minutes[m.Source] = append(minutes[m.Source], m.Times()...)
		if o, ok := oldest[m.Source]; !ok || m.at.Before(o) {
			oldest[m.Source] = m.at
		}
	}
	for source, at := range oldest {
		rm.fresh[source].pending.Store(at.UnixMilli())
	}
	defer func() {
		for source := range oldest {
			rm.fresh[source].pending.Store(0)
		}
	}()
	for _, source := range slices.Sorted(maps.Keys(minutes)) {
		spans := rollup.Spans(minutes[source])
		// nil retryable: every failure is retried, until ctx ends (the loop stopping).
		err := in.Retry(ctx, "rollup "+source, nil, func(ctx context.Context) error {
			return rollup.Recompute(ctx, conn, source, spans, time.Now())
		})
		if err != nil {
			return nil, err
		}
		f := rm.fresh[source]
		f.last.Store(time.Since(oldest[source]).Milliseconds())
		f.pending.Store(0)
	}
	return nil, nil
}
