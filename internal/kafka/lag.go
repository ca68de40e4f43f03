package kafka

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// LagMonitor polls consumer groups' committed offsets and the partitions' end offsets and
// exports lag, committed and end offsets and the consume rate per group, topic and
// partition. Alert on a falling backflow_consumer_rate: it catches a slowing consumer before
// its backlog grows.
//
// Lifecycle: NewLagMonitor, then Run once (it polls every interval until ctx ends); Poll may
// also be called directly (tests).
type LagMonitor struct {
	adm      *kadm.Client
	groups   []string
	interval time.Duration
	log      *slog.Logger
	m        *lagMetrics
	last     map[lagKey]lagSample
}

type lagKey struct {
	group, topic string
	partition    int32
}

type lagSample struct {
	committed int64
	at        time.Time
}

// NewLagMonitor watches groups through cl (which it does not close), registering its
// metrics on reg. interval defaults to 10s.
func NewLagMonitor(cl *kgo.Client, groups []string, interval time.Duration, reg prometheus.Registerer, log *slog.Logger) *LagMonitor {
	if interval <= 0 {
		interval = 10 * time.Second
	}
	if log == nil {
		log = slog.Default()
	}
	return &LagMonitor{adm: kadm.NewClient(cl), groups: groups, interval: interval, log: log, m: newLagMetrics(reg), last: map[lagKey]lagSample{}}
}

// Run polls until ctx ends.
func (l *LagMonitor) Run(ctx context.Context) {
	t := time.NewTicker(l.interval)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, l.interval)
		if err := l.Poll(pctx); err != nil && ctx.Err() == nil {
			l.log.Debug("consumer lag poll failed", "error", err)
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Poll reads every group's lag once and updates the gauges. A group that has committed
// nothing yet has no series.
func (l *LagMonitor) Poll(ctx context.Context) error {
	lags, err := l.adm.Lag(ctx, l.groups...)
	if err != nil {
		for _, g := range l.groups {
			l.m.pollErrors.WithLabelValues(g).Inc()
		}
		return fmt.Errorf("kafka: lag: %w", err)
	}
	now := time.Now()
	var firstErr error
	for _, g := range l.groups {
		gl, ok := lags[g]
		if !ok {
			continue
		}
		if err := gl.Error(); err != nil {
			l.m.pollErrors.WithLabelValues(g).Inc()
			if firstErr == nil {
				firstErr = fmt.Errorf("kafka: lag of group %s: %w", g, err)
			}
			continue
		}
		for topic, parts := range gl.Lag {
			for p, ml := range parts {
				if ml.Err != nil || ml.Commit.At < 0 {
					continue
				}
				labels := []string{g, topic, strconv.Itoa(int(p))}
				l.m.committed.WithLabelValues(labels...).Set(float64(ml.Commit.At))
				l.m.end.WithLabelValues(labels...).Set(float64(ml.End.Offset))
				l.m.lag.WithLabelValues(labels...).Set(float64(max(ml.Lag, 0)))
				k := lagKey{g, topic, p}
				if prev, ok := l.last[k]; ok && now.After(prev.at) {
					l.m.rate.WithLabelValues(labels...).Set(float64(ml.Commit.At-prev.committed) / now.Sub(prev.at).Seconds())
				} else {
					l.m.rate.WithLabelValues(labels...).Set(0)
				}
				l.last[k] = lagSample{committed: ml.Commit.At, at: now}
			}
		}
	}
	return firstErr
}
