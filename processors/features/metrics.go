package features

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/backflowhq/backflow/internal/ops"
)

// MetricDeltas counts the loopback deltas of the aggregates (label group, result applied or
// resent). The shared records in/out/DLQ, batch (Redis pipeline), flush and sink-error
// families are in package ops, with stage="sink-features".
const MetricDeltas = "backflow_features_deltas_total"

type metrics struct {
	applied, resent prometheus.Counter
}

func newMetrics(st *ops.Stage, group string) *metrics {
	if st == nil {
		return nil
	}
	deltas := ops.Register(st.Registerer(), prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricDeltas,
		Help: "Aggregate deltas through the loopback: applied, or resent (already counted, a no-op)."}, []string{"group", "result"}))
	return &metrics{applied: deltas.WithLabelValues(group, "applied"), resent: deltas.WithLabelValues(group, "resent")}
}

func (m *metrics) delta(applied bool) {
	switch {
	case m == nil:
	case applied:
		m.applied.Inc()
	default:
		m.resent.Inc()
	}
}
