package clickhouse

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/internal/ops"
	"github.com/backflowhq/backflow/internal/rollup"
)

// The rollup loop keeps the dashboards' rollups (internal/rollup) exact. Every flush of the
// sink and of the DLQ mirror, once its rows have landed and before it commits, writes a mark
// for each table and hour it wrote into (rollup_marks.go) to Config.RollupTopic. The rollup
// loop is a Sink over that topic (its own group, Config.RollupGroup) whose mapping re-aggregates
// the minutes the marks name, from FINAL, with rollup.Recompute, then commits. A mark is read
// only after its rows landed, a mark read twice re-aggregates the same minutes again, and the
// marks of one UTC day are one partition's, so one member at a time re-aggregates a day: the
// rollups end up equal to the deduplicated tables whatever was replayed, redelivered or late.

// RollupStage is the stage label of the rollup loop's metrics.
const RollupStage = "sink-clickhouse-rollups"

// MetricRollupLag is the rollup loop's freshness.
const MetricRollupLag = "backflow_rollup_lag_seconds"

// NewRollups validates cfg and builds the rollup loop: a Sink over cfg.RollupTopic in group
// cfg.RollupGroup that re-aggregates the minutes its marks name. A mark that does not decode
// goes to cfg.DLQTopic (stage RollupStage); it writes no ledger rows and no marks of its own.
// rc.Metrics, if set, is RollupStage's: besides the shared families it exports
// MetricRollupLag.
func NewRollups(cfg Config, rc RunConfig) (*Sink, error) {
	cfg = cfg.withDefaults()
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
	s := newRollupSink(loop, rc, rm)
	if rc.Metrics != nil {
		reg := rc.Metrics.Registerer()
		for _, source := range rollup.Sources() {
			f := rm.fresh[source]
			ops.Register(reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: MetricRollupLag,
				Help:        "Seconds from a flush landing rows of a table to the rollup loop having re-aggregated their minutes: the age of the table's oldest mark in the last rollup, or in the rollup under way while it lasts.",
				ConstLabels: prometheus.Labels{"group": cfg.RollupGroup, "source": source}}, f.lag))
		}
	}
	return s, nil
}

// newRollupSink is the rollup loop on cfg's group and topic: no ledger, no marks of its own,
// and a stop that leaves the rollup under way to the next owner (abandonOnStop).
func newRollupSink(cfg Config, rc RunConfig, rm *rollupMapping) *Sink {
	s := newSink(cfg, rc, rm, RollupStage)
	s.ledger, s.marks, s.abandonOnStop = false, "", true
	return s
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

// freshness is one table's MetricRollupLag.
type freshness struct {
	// pending is the time (Unix ms) of the table's oldest mark in the rollup under way, 0
	// between rollups; last is the lag of its last rollup, in ms.
	pending, last atomic.Int64
}

// lag is MetricRollupLag: how old the oldest mark of the rollup under way is, or, between
// rollups, how old the oldest mark of the last one was when it finished.
func (f *freshness) lag() float64 {
	if p := f.pending.Load(); p != 0 {
		return float64(time.Now().UnixMilli()-p) / 1000
	}
	return float64(f.last.Load()) / 1000
}

type markRow struct {
	mark
	at time.Time // when the flush that wrote it had landed its rows
}

// tally: a mark is no row of any table the ledger counts.
func (markRow) Tally() Tally { return Tally{} }

func (rm *rollupMapping) Map(_ context.Context, _ Waiter, rec *kgo.Record) (Row, error, error) {
	m, err := decodeMark(rec)
	if err != nil {
		return nil, err, nil
	}
	return markRow{mark: m, at: rec.Timestamp}, nil, nil
}

// insert re-aggregates the marks' minutes, each table's at once, retrying whatever fails
// (an outage, or a statement ClickHouse refuses, say after a column was changed by hand) with
// backoff until it succeeds or the loop stops: the rollups are derived, so their failure
// must not stop the sink, and the marks stay uncommitted meanwhile. The lag metric grows and
// BackflowRollupLagHigh fires; the panels stay exact, reading raw rows from the watermark on.
func (rm *rollupMapping) Insert(ctx context.Context, in Lander, rows []Row) (map[int]error, error) {
	conn := in.Statements()
	if conn == nil {
		return nil, fmt.Errorf("%w: the sink has no connection to run statements on", ErrClickHouseFatal)
	}
	minutes := map[string][]time.Time{}
	oldest := map[string]time.Time{}
	for _, r := range rows {
		m := r.(markRow)
		minutes[m.Source] = append(minutes[m.Source], m.times()...)
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

// mark writes the marks of a flush that landed rows (those not rejected) and, with a ledger,
// its ledger rows at flushedAt, retrying a Kafka outage; the flush commits after it.
func (s *Sink) mark(ctx context.Context, rows []Row, rejected func(i int) bool, flushedAt time.Time, attempts *atomic.Int64) error {
	if s.marks == "" {
		return nil
	}
	times := map[string][]time.Time{}
	add := func(source string, at time.Time) { times[source] = append(times[source], at) }
	for i, r := range rows {
		if mr, ok := r.(Marked); ok && !rejected(i) {
			mr.Marks(add)
		}
	}
	if s.ledger {
		add(rollup.SinkLedger, flushedAt)
	}
	var recs []*kgo.Record
	for _, source := range slices.Sorted(maps.Keys(times)) {
		for _, m := range marksOf(source, times[source]) {
			recs = append(recs, m.record(s.marks))
		}
	}
	if len(recs) == 0 {
		return nil
	}
	return s.retry.Retry(ctx, "mark rollups", attempts, isKafkaRetryable, func(ctx context.Context) error {
		return s.cl.ProduceSync(ctx, recs...).FirstErr()
	})
}
