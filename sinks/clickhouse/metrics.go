package clickhouse

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/backflowhq/backflow/internal/ops"
)

// Names of the ClickHouse-sink metrics of its own (label group). The shared records
// in/out/DLQ, batch, flush and sink-error families are in package ops, with
// stage="sink-clickhouse" (and each loop's own stage: dlqmirror.Stage, rollups.Stage).
const (
	MetricBuffered = "backflow_clickhouse_buffered_records"
	MetricDropped  = "backflow_clickhouse_dropped_on_revoke_total"
)

// metrics are a sink's handles: its stage's shared families, and its buffer's gauge and
// counter (nil for a loop without them, Loop.BufferMetrics: the DLQ mirror). A nil *metrics
// records nothing.
type metrics struct {
	stage    *ops.Stage
	buffered prometheus.Gauge
	dropped  prometheus.Counter
}

func newMetrics(st *ops.Stage, group string) *metrics {
	if st == nil {
		return nil
	}
	reg := st.Registerer()
	buffered := ops.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricBuffered,
		Help: "Records the sink holds and has not committed: its buffer plus the batch being flushed."}, []string{"group"}))
	dropped := ops.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricDropped,
		Help: "Buffered records dropped uncommitted because their partition was revoked or lost (their new owner reads them again)."},
		[]string{"group"}))
	return &metrics{stage: st, buffered: buffered.WithLabelValues(group), dropped: dropped.WithLabelValues(group)}
}

func (m *metrics) st() *ops.Stage {
	if m == nil {
		return nil
	}
	return m.stage
}

func (m *metrics) setBuffered(n int) {
	if m != nil && m.buffered != nil {
		m.buffered.Set(float64(n))
	}
}

func (m *metrics) drop(n int) {
	if m != nil && m.dropped != nil {
		m.dropped.Add(float64(n))
	}
}

// errorClass is the class label of a failed attempt (see IsFatal, IsRejected, IsRetryable).
func errorClass(err error) string {
	switch {
	case IsFatal(err):
		return "fatal"
	case IsRejected(err):
		return "rejected"
	case IsRetryable(err):
		return "retryable"
	}
	return "other"
}
