package sensitivewords

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the server's Prometheus metrics, in a registry of their own (served on
// /metrics) so that several servers can live in one process (tests).
//
//	sensitive_words_requests_total{route,code}          answered requests by route and status
//	sensitive_words_request_duration_seconds{route}     time to answer, histogram
//	sensitive_words_items_checked_total                 texts checked
//	sensitive_words_hits_total{category}                occurrences found (every hit, also
//	                                                    beyond the per-item cap)
//	sensitive_words_dictionary_entries                  entries of the dictionary in use
//	sensitive_words_dictionary_reloads_total{result}    reloads, result "ok" or "failed"
//
// plus the Go runtime and process collectors.
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	items    prometheus.Counter
	hits     *prometheus.CounterVec
	entries  prometheus.Gauge
	reloads  *prometheus.CounterVec
}

func newMetrics() *metrics {
	const ns = "sensitive_words"
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "requests_total", Help: "HTTP requests answered, by route and status code.",
		}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Name: "request_duration_seconds", Help: "Time to answer an HTTP request, by route.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route"}),
		items: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Name: "items_checked_total", Help: "Texts checked by /v1/check.",
		}),
		hits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "hits_total", Help: "Dictionary entries found in checked texts, by category.",
		}, []string{"category"}),
		entries: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Name: "dictionary_entries", Help: "Entries of the dictionary in use.",
		}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "dictionary_reloads_total", Help: "Dictionary reloads, by result (ok, failed).",
		}, []string{"result"}),
	}
	m.reloads.WithLabelValues("ok")
	m.reloads.WithLabelValues("failed")
	m.reg.MustRegister(m.requests, m.latency, m.items, m.hits, m.entries, m.reloads,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) observe(route string, code int, seconds float64) {
	m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	m.latency.WithLabelValues(route).Observe(seconds)
}
