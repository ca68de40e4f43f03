package ingest

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"

	"github.com/backflowhq/backflow/internal/ops"
)

// Names of the ingest-only metrics (label group). The shared records in/out/DLQ and batch
// families are in package ops, with stage="ingest".
const (
	MetricBreakerState      = "backflow_moderation_breaker_state"
	MetricModerationLatency = "backflow_moderation_latency_seconds"
	MetricModerationErrors  = "backflow_moderation_errors_total"
	MetricDuplicates        = "backflow_ingest_duplicates_total"
	MetricForwarded         = "backflow_ingest_forwarded_total"
	MetricInFlight          = "backflow_ingest_in_flight_records"
)

// Breaker states as MetricBreakerState reports them.
const (
	BreakerClosed   = 0
	BreakerHalfOpen = 1
	BreakerOpen     = 2
)

// Metrics are the ingest stage's metrics. A nil *Metrics records nothing.
type Metrics struct {
	stage      *ops.Stage
	breaker    prometheus.Gauge
	latency    prometheus.Observer
	modErrors  *prometheus.CounterVec
	duplicates prometheus.Counter
	forwarded  prometheus.Counter
	inFlight   *prometheus.GaugeVec
	group      string
}

// NewMetrics returns the metrics of the ingest group group on st's registry (st nil: nil).
func NewMetrics(st *ops.Stage, group string) *Metrics {
	if st == nil {
		return nil
	}
	reg := st.Registerer()
	gl := prometheus.Labels{"group": group}
	breaker := ops.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricBreakerState,
		Help: "State of the moderation circuit breaker: 0 closed, 1 half-open, 2 open."}, []string{"group"}))
	latency := ops.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: MetricModerationLatency,
		Help:    "Duration of one call to the sensitive-word service, failed calls included.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}, []string{"group"}))
	modErrors := ops.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricModerationErrors,
		Help: "Failed calls to the sensitive-word service by class: unavailable (retried), breaker_open, mismatch (retried, then one by one), rejected (DLQ)."},
		[]string{"group", "class"}))
	dups := ops.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricDuplicates,
		Help: "Records dropped as duplicates of a requestId's earlier record."}, []string{"group"}))
	fwd := ops.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricForwarded,
		Help: "Records forwarded through the loopback topic to their key's home partition."}, []string{"group"}))
	inFlight := ops.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricInFlight,
		Help: "Records read but not yet committed (waiting for moderation, emission or the DLQ)."}, []string{"group"}))
	m := &Metrics{stage: st, breaker: breaker.With(gl), latency: latency.With(gl), modErrors: modErrors.MustCurryWith(gl),
		duplicates: dups.With(gl), forwarded: fwd.With(gl), inFlight: inFlight, group: group}
	m.breaker.Set(BreakerClosed)
	return m
}

func (m *Metrics) st() *ops.Stage {
	if m == nil {
		return nil
	}
	return m.stage
}

func (m *Metrics) setBreaker(s gobreaker.State) {
	if m == nil {
		return
	}
	switch s {
	case gobreaker.StateOpen:
		m.breaker.Set(BreakerOpen)
	case gobreaker.StateHalfOpen:
		m.breaker.Set(BreakerHalfOpen)
	default:
		m.breaker.Set(BreakerClosed)
	}
}

func (m *Metrics) moderationCall(d time.Duration) {
	if m != nil {
		m.latency.Observe(d.Seconds())
	}
}

func (m *Metrics) moderationError(class string) {
	if m != nil {
		m.modErrors.WithLabelValues(class).Inc()
	}
}

func (m *Metrics) duplicate() {
	if m != nil {
		m.duplicates.Inc()
	}
}

func (m *Metrics) forward() {
	if m != nil {
		m.forwarded.Inc()
	}
}

func (m *Metrics) setInFlight(n int) {
	if m != nil {
		m.inFlight.WithLabelValues(m.group).Set(float64(n))
	}
}
