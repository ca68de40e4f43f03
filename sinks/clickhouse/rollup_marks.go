package clickhouse

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/internal/rollup"
)

// mark tells the rollup loop that a flush landed rows of Source in Minutes (Unix seconds, each
// the start of a minute), all of them in the UTC hour that starts at Hour. A flush produces one
// mark per table and hour it wrote into, after its insert succeeded and before it commits, so
// the loop never reads a mark before the rows it names. A mark's key is its table and UTC day:
// the marks of one day meet in one partition, so one owner at a time re-aggregates a day's
// minutes, its hours and the day itself (two owners of the same minutes could write an older
// aggregate last, and two owners of two hours of one day could each write the day from hours
// without the other's).
type mark struct {
	Source  string  `json:"source"`
	Hour    int64   `json:"hour"`
	Minutes []int64 `json:"minutes"`
}

// marksOf groups the event times of rows landed in source into marks, one per hour, each
// minute once. Zero times (a row without one) are left out.
func marksOf(source string, times []time.Time) []mark {
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
	out := make([]mark, 0, len(byHour))
	for h, ms := range byHour {
		slices.Sort(ms)
		out = append(out, mark{Source: source, Hour: h, Minutes: ms})
	}
	slices.SortFunc(out, func(a, b mark) int { return int(a.Hour - b.Hour) })
	return out
}

// record is the mark as a Kafka record of topic.
func (m mark) record(topic string) *kgo.Record {
	v, _ := json.Marshal(m) // a struct of strings and integers: cannot fail
	return &kgo.Record{Topic: topic, Key: []byte(m.Source + "/" + strconv.FormatInt(m.Hour-m.Hour%86400, 10)), Value: v}
}

// decodeMark reads a mark. A record that is not one (not JSON, a table no rollup reads, a
// minute outside its hour) is a fault of the record.
func decodeMark(rec *kgo.Record) (mark, error) {
	var m mark
	if err := json.Unmarshal(rec.Value, &m); err != nil {
		return mark{}, fmt.Errorf("rollup mark: %w", err)
	}
	if len(rollup.ReadBy(m.Source)) == 0 {
		return mark{}, fmt.Errorf("rollup mark: no rollup reads table %q", m.Source)
	}
	if m.Hour%3600 != 0 || len(m.Minutes) == 0 {
		return mark{}, fmt.Errorf("rollup mark: hour %d with %d minutes", m.Hour, len(m.Minutes))
	}
	for _, min := range m.Minutes {
		if min%60 != 0 || min < m.Hour || min >= m.Hour+3600 {
			return mark{}, fmt.Errorf("rollup mark: minute %d is not in hour %d", min, m.Hour)
		}
	}
	return m, nil
}

// times are the mark's minutes.
func (m mark) times() []time.Time {
	out := make([]time.Time, len(m.Minutes))
	for i, s := range m.Minutes {
		out[i] = time.Unix(s, 0).UTC()
	}
	return out
}
