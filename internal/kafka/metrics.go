package kafka

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/internal/ops"
)

// Names of the consumer-group metrics LagMonitor exports (labels group, topic, partition).
const (
	MetricConsumerLag       = "backflow_consumer_lag"
	MetricConsumerCommitted = "backflow_consumer_committed_offset"
	MetricConsumerEnd       = "backflow_consumer_end_offset"
	MetricConsumerRate      = "backflow_consumer_rate"
	MetricLagPollErrors     = "backflow_consumer_lag_poll_errors_total"
)

type lagMetrics struct {
	lag, committed, end, rate *prometheus.GaugeVec
	pollErrors                *prometheus.CounterVec
}

func newLagMetrics(reg prometheus.Registerer) *lagMetrics {
	labels := []string{"group", "topic", "partition"}
	m := &lagMetrics{
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricConsumerLag,
			Help: "Records between a group's committed offset and the partition's end offset, as of the last poll."}, labels),
		committed: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricConsumerCommitted,
			Help: "A group's committed offset (the next record it will read) per partition."}, labels),
		end: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricConsumerEnd,
			Help: "The partition's end offset (high watermark)."}, labels),
		rate: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricConsumerRate,
			Help: "Records per second a group committed on a partition between the last two polls: its consume rate."}, labels),
		pollErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricLagPollErrors,
			Help: "Lag polls that failed for a group (the gauges keep their last values)."}, []string{"group"}),
	}
	m.lag = ops.Register(reg, m.lag)
	m.committed = ops.Register(reg, m.committed)
	m.end = ops.Register(reg, m.end)
	m.rate = ops.Register(reg, m.rate)
	m.pollErrors = ops.Register(reg, m.pollErrors)
	return m
}

// MetricTableChangelogMisconfigured is 1 for a goka table changelog that the start-up check
// (CheckTableChangelog) found wrong, 0 when it is fine (label topic).
const MetricTableChangelogMisconfigured = "backflow_table_changelog_misconfigured"

// FlagTableChangelog runs CheckTableChangelog on topic, logs a problem as a warning, and sets
// MetricTableChangelogMisconfigured on reg (nil: no metric). It never fails the stage: a check
// that cannot run is logged too.
func FlagTableChangelog(ctx context.Context, cl *kgo.Client, reg prometheus.Registerer, log *slog.Logger, topic string) {
	problem, err := CheckTableChangelog(ctx, cl, topic)
	if err != nil {
		log.Warn("could not check the table changelog", "topic", topic, "error", err)
		return
	}
	if problem != "" {
		log.Warn(problem, "topic", topic)
	}
	if reg == nil {
		return
	}
	g := ops.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricTableChangelogMisconfigured,
		Help: "1 when a group table's changelog topic is not compacted (checked at start-up), else 0."}, []string{"topic"}))
	v := 0.0
	if problem != "" {
		v = 1
	}
	g.WithLabelValues(topic).Set(v)
}
