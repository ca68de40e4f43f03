package clickhouse

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/internal/rollup"
)

// Mark tells the rollup loop that a flush landed rows of Source in Minutes (Unix seconds, each
// the start of a minute), all of them in the UTC hour that starts at Hour. A flush produces one
// mark per table and hour it wrote into, after its insert succeeded and before it commits, so
// the loop never reads a mark before the rows it names. A mark's key is its table and UTC day:
// the marks of one day meet in one partition, so one owner at a time re-aggregates a day's
// minutes, its hours and the day itself (two owners of the same minutes could write an older
// aggregate last, and two owners of two hours of one day could each write the day from hours
// without the other's).
type Mark struct {
	Source  string  `json:"source"`
	Hour    int64   `json:"hour"`
	Minutes []int64 `json:"minutes"`
}

// MarksOf groups the event times of rows landed in source into marks, one per hour, each
// minute once. Zero times (a row without one) are left out.
func MarksOf(source string, times []time.Time) []Mark {
	byHour := map[int64][]int64{}
	for _, t := range times {
		if t.IsZero() || t.Unix() <= 0 {
			continue
		}
		m := t.Unix() - t.Unix()%60
		h := m - m%3600
		if !slices.Contains(byHour[h], m) {
			byHour[h] = append(byHour[h], m)
		}
	}
	out := make([]Mark, 0, len(byHour))
	for h, ms := range byHour {
		slices.Sort(ms)
		out = append(out, Mark{Source: source, Hour: h, Minutes: ms})
	}
	slices.SortFunc(out, func(a, b Mark) int { return int(a.Hour - b.Hour) })
	return out
}

// Record is the mark as a Kafka record of topic.
func (m Mark) Record(topic string) *kgo.Record {
	v, _ := json.Marshal(m) // a struct of strings and integers: cannot fail
	return &kgo.Record{Topic: topic, Key: []byte(m.Source + "/" + strconv.FormatInt(m.Hour-m.Hour%86400, 10)), Value: v}
}

// DecodeMark reads a mark. A record that is not one (not JSON, a table no rollup reads, a
// minute outside its hour) is a fault of the record.
func DecodeMark(rec *kgo.Record) (Mark, error) {
	var m Mark
	if err := json.Unmarshal(rec.Value, &m); err != nil {
		return Mark{}, fmt.Errorf("rollup mark: %w", err)
	}
	if len(rollup.ReadBy(m.Source)) == 0 {
		return Mark{}, fmt.Errorf("rollup mark: no rollup reads table %q", m.Source)
	}
	if m.Hour%3600 != 0 || len(m.Minutes) == 0 {
		return Mark{}, fmt.Errorf("rollup mark: hour %d with %d minutes", m.Hour, len(m.Minutes))
	}
	for _, min := range m.Minutes {
		if min%60 != 0 || min < m.Hour || min >= m.Hour+3600 {
			return Mark{}, fmt.Errorf("rollup mark: minute %d is not in hour %d", min, m.Hour)
		}
	}
	return m, nil
}

// Times are the mark's minutes.
func (m Mark) Times() []time.Time {
	out := make([]time.Time, len(m.Minutes))
	for i, s := range m.Minutes {
		out[i] = time.Unix(s, 0).UTC()
	}
	return out
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
		for _, m := range MarksOf(source, times[source]) {
			recs = append(recs, m.Record(s.marks))
		}
	}
	if len(recs) == 0 {
		return nil
	}
	return s.retry.Retry(ctx, "mark rollups", attempts, isKafkaRetryable, func(ctx context.Context) error {
		return s.cl.ProduceSync(ctx, recs...).FirstErr()
	})
}
