package kafka

import (
	"github.com/prometheus/client_golang/prometheus"

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
