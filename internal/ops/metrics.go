package ops

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Names of the metric families shared by every stage (label stage: ingest, sink-clickhouse,
// sink-clickhouse-dlq-mirror, sink-features).
const (
	MetricRecordsIn    = "backflow_stage_records_in_total"
	MetricRecordsOut   = "backflow_stage_records_out_total"
	MetricRecordsDLQ   = "backflow_stage_records_dlq_total"
	MetricBatchRecords = "backflow_stage_batch_records"
	MetricFlushSeconds = "backflow_stage_flush_seconds"
	MetricSinkErrors   = "backflow_sink_errors_total"
	MetricStageReady   = "backflow_stage_ready"
	// MetricDLQWriteErrors counts DLQ writes that failed and are being retried: the bad
	// record's source offset waits uncommitted until one succeeds.
	MetricDLQWriteErrors = "backflow_dlq_write_errors_total"
)

// Metrics holds the shared families on one registry. Build it once per process with
// NewMetrics and hand each stage its Stage.
type Metrics struct {
	reg   *prometheus.Registry
	in    *prometheus.CounterVec
	out   *prometheus.CounterVec
	dlq   *prometheus.CounterVec
	batch *prometheus.HistogramVec
	flush *prometheus.HistogramVec
	errs  *prometheus.CounterVec
	ready *prometheus.GaugeVec
	dlqw  *prometheus.CounterVec
}

// NewRegistry returns a registry with the Go runtime and process collectors, what a process
// serves on /metrics.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// NewMetrics registers the shared families on reg.
func NewMetrics(reg *prometheus.Registry) *Metrics {
	m := &Metrics{reg: reg,
		in: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricRecordsIn,
			Help: "Records a stage consumed from its input topics (redeliveries count again)."}, []string{"stage"}),
		out: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricRecordsOut,
			Help: "Records a stage delivered: emitted to the enriched topic (ingest) or landed in its store (sinks)."}, []string{"stage"}),
		dlq: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricRecordsDLQ,
			Help: "Records a stage sent to the dead-letter topic, by DLQ class."}, []string{"stage", "class"}),
		batch: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: MetricBatchRecords,
			Help:    "Records per batch: moderation batches (ingest), flushes (sink-clickhouse), Redis pipelines (sink-features).",
			Buckets: prometheus.ExponentialBuckets(1, 4, 10)}, []string{"stage"}),
		flush: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: MetricFlushSeconds,
			Help:    "Time to land one batch, retries included: a ClickHouse flush with its ledger and commit, or a Redis pipeline.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 14)}, []string{"stage"}),
		errs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricSinkErrors,
			Help: "Failed attempts of a sink by class: retryable (an outage, retried), rejected (records the store refused), fatal (stops the sink)."},
			[]string{"stage", "class"}),
		ready: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricStageReady,
			Help: "1 while a stage consumes with partitions assigned, else 0."}, []string{"stage"}),
		dlqw: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricDLQWriteErrors,
			Help: "DLQ writes that failed and are retried; the bad record's source offset stays uncommitted meanwhile."}, []string{"stage"}),
	}
	m.in = Register(reg, m.in)
	m.out = Register(reg, m.out)
	m.dlq = Register(reg, m.dlq)
	m.batch = Register(reg, m.batch)
	m.flush = Register(reg, m.flush)
	m.errs = Register(reg, m.errs)
	m.ready = Register(reg, m.ready)
	m.dlqw = Register(reg, m.dlqw)
	return m
}

// Registry is the registry the metrics live on.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Stage returns the view of the shared families for one stage. Its counters appear at 0 from
// the start, so a rate is defined before the first record.
func (m *Metrics) Stage(name string) *Stage {
	if m == nil {
		return nil
	}
	s := &Stage{name: name, reg: m.reg, in: m.in.WithLabelValues(name), out: m.out.WithLabelValues(name),
		dlq: m.dlq.MustCurryWith(prometheus.Labels{"stage": name}), batch: m.batch.WithLabelValues(name),
		flush: m.flush.WithLabelValues(name), errs: m.errs.MustCurryWith(prometheus.Labels{"stage": name}),
		ready: m.ready.WithLabelValues(name), dlqw: m.dlqw.WithLabelValues(name)}
	return s
}

// Stage is one stage's handle on the shared families. All methods are safe on nil.
type Stage struct {
	name  string
	reg   prometheus.Registerer
	in    prometheus.Counter
	out   prometheus.Counter
	dlq   *prometheus.CounterVec
	batch prometheus.Observer
	flush prometheus.Observer
	errs  *prometheus.CounterVec
	ready prometheus.Gauge
	dlqw  prometheus.Counter
}

// Name is the stage label.
func (s *Stage) Name() string {
	if s == nil {
		return ""
	}
	return s.name
}

// Registerer is where the stage registers metrics of its own; nil for a nil Stage.
func (s *Stage) Registerer() prometheus.Registerer {
	if s == nil {
		return nil
	}
	return s.reg
}

// In counts n records consumed.
func (s *Stage) In(n int) {
	if s != nil && n > 0 {
		s.in.Add(float64(n))
	}
}

// Out counts n records delivered.
func (s *Stage) Out(n int) {
	if s != nil && n > 0 {
		s.out.Add(float64(n))
	}
}

// DLQ counts n records dead-lettered with class.
func (s *Stage) DLQ(class string, n int) {
	if s != nil && n > 0 {
		s.dlq.WithLabelValues(class).Add(float64(n))
	}
}

// Batch observes the size of one batch.
func (s *Stage) Batch(n int) {
	if s != nil {
		s.batch.Observe(float64(n))
	}
}

// Flush observes how long one batch took to land.
func (s *Stage) Flush(d time.Duration) {
	if s != nil {
		s.flush.Observe(d.Seconds())
	}
}

// SinkError counts one failed attempt of class.
func (s *Stage) SinkError(class string) {
	if s != nil {
		s.errs.WithLabelValues(class).Inc()
	}
}

// DLQWriteError counts one failed DLQ write that will be retried.
func (s *Stage) DLQWriteError() {
	if s != nil {
		s.dlqw.Inc()
	}
}

// SetReady sets the stage's ready gauge.
func (s *Stage) SetReady(ready bool) {
	if s == nil {
		return
	}
	if ready {
		s.ready.Set(1)
	} else {
		s.ready.Set(0)
	}
}

// Register registers c on reg and returns it, or the collector already registered under the
// same description (a second stage of the same kind in one process shares it). A nil reg
// leaves c unregistered, still usable.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if reg == nil {
		return c
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(err)
	}
	return c
}
