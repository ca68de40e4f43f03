package dashboard

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/backflowhq/backflow/internal/alerts"
	"github.com/backflowhq/backflow/internal/kafka"
)

// GroupLag is one consumer group's lag, summed over its partitions.
type GroupLag struct {
	Group   string `json:"group"`
	State   string `json:"state"` // Kafka's group state (Stable, Empty, Dead, ...); "unknown" when it could not be read
	Members int    `json:"members"`
	// Lag is the sum over the group's partitions of end offset minus committed offset; null
	// when the group has no committed offsets or they could not be read.
	Lag        *int64 `json:"lag"`
	Partitions int    `json:"partitions"`
	// LogEnd is the sum of the log-end offsets of the group's partitions: above 0 when its
	// topics hold (or held) records.
	LogEnd int64  `json:"log_end"`
	Error  string `json:"error,omitempty"`
	// Status is the card's colour, judged by JudgeLag: "ok", "warn" or "bad"; Why says what
	// makes it other than ok.
	Status string `json:"status"`
	Why    string `json:"why,omitempty"`
}

// Lag thresholds of the health strip: at or above LagBad a group's card is bad, between 1 and
// LagBad it warns (BackflowConsumerLagHigh's threshold is the same 10,000).
const LagBad = 10000

// ProcessDownAlert is the alert Prometheus fires when a backflow process stops answering
// scrapes (deploy/prometheus/rules.yaml).
const ProcessDownAlert = "BackflowProcessDown"

// JudgeLag sets each group's Status and Why. A group no member reads is not consuming: it is
// bad when its topics have records or a backflow process is down (processDown), whatever
// its lag, since a lag of 0 with nobody reading only says nothing arrived since it stopped.
// Otherwise a lag of 0 is ok, under LagBad a warning, and from LagBad on bad; a lag that
// could not be read warns.
func JudgeLag(lags []GroupLag, processDown bool) {
	for i := range lags {
		g := &lags[i]
		switch {
		case g.Error != "":
			g.Status, g.Why = "warn", g.Error
		case g.Lag == nil:
			g.Status, g.Why = "warn", "no committed offsets: the group has not consumed yet, or Kafka does not know it"
		case g.Members == 0 && processDown:
			g.Status, g.Why = "bad", "no member consumes, and "+ProcessDownAlert+" fires: the stage's process is down"
		case g.Members == 0 && g.LogEnd > 0:
			g.Status, g.Why = "bad", "no member consumes its topics, which have records: the stage is not running"
		case *g.Lag == 0:
			g.Status, g.Why = "ok", ""
		case *g.Lag < LagBad:
			g.Status, g.Why = "warn", ""
		default:
			g.Status, g.Why = "bad", ""
		}
	}
}

// processDown tells whether a firing alert says a backflow process is down.
func processDown(a Alerts) bool {
	for _, x := range a.Firing {
		if x.Name == ProcessDownAlert {
			return true
		}
	}
	return false
}

// ReadLag asks Kafka for the lag of each group, in the order given. A group Kafka does not know
// comes back with state Dead and no lag; a failed call gives every group state "unknown" and
// the error.
func ReadLag(ctx context.Context, adm *kadm.Client, groups []string) []GroupLag {
	out := make([]GroupLag, len(groups))
	for i, g := range groups {
		out[i] = GroupLag{Group: g, State: "unknown"}
	}
	if adm == nil {
		for i := range out {
			out[i].Error = "no Kafka client"
		}
		return out
	}
	lags, err := adm.Lag(ctx, groups...)
	if err != nil {
		for i := range out {
			out[i].Error = fmt.Sprintf("kafka: lag: %v", err)
		}
		return out
	}
	for i, g := range groups {
		l, ok := lags[g]
		if !ok {
			out[i].Error = "not in Kafka's answer"
			continue
		}
		out[i].State, out[i].Members = l.State, len(l.Members)
		if err := l.Error(); err != nil {
			out[i].Error = err.Error()
			continue
		}
		var sum int64
		known := 0
		for _, parts := range l.Lag {
			for _, p := range parts {
				out[i].Partitions++
				if p.End.Err == nil && p.End.Offset > 0 {
					out[i].LogEnd += p.End.Offset
				}
				if p.Lag >= 0 && p.Err == nil {
					sum += p.Lag
					known++
				}
			}
		}
		if known > 0 {
			out[i].Lag = &sum
		}
	}
	return out
}

// BreakerMetric is the gauge the ingest stage exports for its moderation circuit breaker,
// labelled by group: 0 closed, 1 half-open, 2 open.
const BreakerMetric = "backflow_moderation_breaker_state"

// Breaker is the moderation circuit breaker's state as scraped from the ingest stage.
type Breaker struct {
	// State is the worst over the groups: "closed", "half-open", "open", or "unknown" when no
	// URL is configured, the scrape failed, or the gauge is missing.
	State  string         `json:"state"`
	Groups []GroupBreaker `json:"groups"`
	Source string         `json:"source"` // the URL scraped, or "" when none is configured
	Error  string         `json:"error,omitempty"`
}

// GroupBreaker is one ingest group's breaker.
type GroupBreaker struct {
	Group string `json:"group"`
	State string `json:"state"`
}

var breakerStates = []string{"closed", "half-open", "open"}

// ScrapeBreaker reads BreakerMetric from the Prometheus text exposition at url. It never fails:
// whatever goes wrong leaves the state "unknown" with the reason in Error.
func ScrapeBreaker(ctx context.Context, hc *http.Client, url string) Breaker {
	b, _ := ScrapeStage(ctx, hc, url)
	return b
}

// ScrapeStage scrapes the stage's Prometheus endpoint at url once and reads from it the
// moderation breaker and the group table restores in progress. It never fails: a failed
// scrape leaves the breaker "unknown" and the restore's Error set, both with the reason.
func ScrapeStage(ctx context.Context, hc *http.Client, url string) (Breaker, Restore) {
	b := Breaker{State: "unknown", Source: url, Groups: []GroupBreaker{}}
	r := Restore{Source: url, Restoring: []RestorePartition{}}
	if url == "" {
		b.Error = "not configured (backflow dashboard --breaker-metrics-url)"
		return b, r
	}
	families, err := scrape(ctx, hc, url)
	if err != nil {
		b.Error, r.Error = err.Error(), err.Error()
		return b, r
	}
	readBreaker(&b, families, url)
	r.Restoring = readRestore(families)
	return b, r
}

func scrape(ctx context.Context, hc *http.Client, url string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape: %s answered %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("scrape: parse %s: %v", url, err)
	}
	return families, nil
}

// value is a gauge's (or an untyped sample's) value; false for other kinds.
func value(m *dto.Metric) (float64, bool) {
	switch {
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue(), true
	case m.GetUntyped() != nil:
		return m.GetUntyped().GetValue(), true
	}
	return 0, false
}

func label(m *dto.Metric, name string) string {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}

func readBreaker(b *Breaker, families map[string]*dto.MetricFamily, url string) {
	mf, ok := families[BreakerMetric]
	if !ok || len(mf.GetMetric()) == 0 {
		b.Error = fmt.Sprintf("%s does not export %s", url, BreakerMetric)
		return
	}
	worst := -1
	for _, m := range mf.GetMetric() {
		v, ok := value(m)
		if !ok {
			continue
		}
		state := "unknown"
		if i := int(v); float64(i) == v && i >= 0 && i < len(breakerStates) {
			state = breakerStates[i]
			worst = max(worst, i)
		}
		b.Groups = append(b.Groups, GroupBreaker{Group: label(m, "group"), State: state})
	}
	sort.Slice(b.Groups, func(i, j int) bool { return b.Groups[i].Group < b.Groups[j].Group })
	if worst >= 0 {
		b.State = breakerStates[worst]
	} else {
		b.Error = fmt.Sprintf("%s holds no value 0, 1 or 2", BreakerMetric)
	}
}

// Restore is the group table restores the scraped stage has in progress (kafka's
// backflow_table_restore* gauges): what a stage waits for before it is ready.
type Restore struct {
	Source    string             `json:"source"`
	Restoring []RestorePartition `json:"restoring"` // empty when none is in progress
	Error     string             `json:"error,omitempty"`
}

// RestorePartition is one table partition being restored.
type RestorePartition struct {
	Stage     string  `json:"stage"`
	Group     string  `json:"group"`
	Partition string  `json:"partition"`
	Restored  int64   `json:"restored"`
	ToGo      int64   `json:"to_go"`
	Rate      float64 `json:"rate"`        // records per second
	ETA       float64 `json:"eta_seconds"` // -1 while unknown
}

// readRestore reads the partitions whose kafka.MetricTableRestoring is 1, with their figures,
// by stage, group and partition.
func readRestore(families map[string]*dto.MetricFamily) []RestorePartition {
	key := func(m *dto.Metric) string {
		return label(m, "stage") + "\x00" + label(m, "group") + "\x00" + label(m, "partition")
	}
	figures := func(name string) map[string]float64 {
		out := map[string]float64{}
		if mf, ok := families[name]; ok {
			for _, m := range mf.GetMetric() {
				if v, ok := value(m); ok {
					out[key(m)] = v
				}
			}
		}
		return out
	}
	restored, toGo := figures(kafka.MetricTableRestored), figures(kafka.MetricTableRestoreToGo)
	rate, eta := figures(kafka.MetricTableRestoreRate), figures(kafka.MetricTableRestoreETA)
	out := []RestorePartition{}
	mf, ok := families[kafka.MetricTableRestoring]
	if !ok {
		return out
	}
	for _, m := range mf.GetMetric() {
		if v, ok := value(m); !ok || v != 1 {
			continue
		}
		k := key(m)
		e, ok := eta[k]
		if !ok {
			e = -1
		}
		out = append(out, RestorePartition{Stage: label(m, "stage"), Group: label(m, "group"), Partition: label(m, "partition"),
			Restored: int64(restored[k]), ToGo: int64(toGo[k]), Rate: rate[k], ETA: e})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Stage != b.Stage {
			return a.Stage < b.Stage
		}
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		pa, _ := strconv.Atoi(a.Partition)
		pb, _ := strconv.Atoi(b.Partition)
		return pa < pb
	})
	return out
}

// Health is the page's health strip: lag per group, dead letters in the range, the breaker,
// the group table restores in progress, how far the rollups lag behind the newest landed
// event, and the alerts Prometheus has firing.
type Health struct {
	Lag     []GroupLag `json:"lag"`
	DLQ     *uint64    `json:"dlq"` // entries in the range; null when ClickHouse did not answer
	DLQErr  string     `json:"dlq_error,omitempty"`
	Breaker Breaker    `json:"breaker"`
	Restore Restore    `json:"restore"` // from the same scrape as the breaker
	Rollups RollupLag  `json:"rollups"`
	Alerts  Alerts     `json:"alerts"`
}

// Alerts are the alerts firing in Prometheus (deploy/prometheus/rules.yaml evaluated there).
type Alerts struct {
	// Source is Prometheus's URL; "" when none is configured (prometheus.url), and the page
	// shows no alerts card.
	Source string         `json:"source"`
	Firing []alerts.Alert `json:"firing"`
	Error  string         `json:"error,omitempty"` // Prometheus did not answer; Firing is empty
}

// ReadAlerts asks Prometheus for its firing alerts. It never fails: an error is in Error. A
// nil client gives an empty Source.
func ReadAlerts(ctx context.Context, c *alerts.Client) Alerts {
	a := Alerts{Firing: []alerts.Alert{}}
	if c == nil {
		return a
	}
	a.Source = c.URL()
	firing, err := c.Firing(ctx)
	if err != nil {
		a.Error = err.Error()
		return a
	}
	a.Firing = firing
	return a
}
