package features

// Event-time windows of the aggregates. See "Windows" in the header of aggregate.go for how a
// window's value is defined and how it ages.

import (
	"sort"
	"time"
)

// Window is an event-time window of the tenant, user and model aggregates: the last Span of
// event time, counted in buckets of Step. Its features are named <feature>_<Name>.
type Window struct {
	Name string
	Span time.Duration
	Step time.Duration
}

// Windows are the windows every tenant, user and model aggregate keeps: the last hour in
// 5-minute buckets (12) and the last day in 1-hour buckets (24).
var Windows = []Window{
	{Name: "1h", Span: time.Hour, Step: 5 * time.Minute},
	{Name: "24h", Span: 24 * time.Hour, Step: time.Hour},
}

// BucketStart is the start (unix seconds) of the Step-long bucket holding t.
func (w Window) BucketStart(t time.Time) int64 {
	step := int64(w.Step / time.Second)
	s := t.Unix()
	b := s - s%step
	if s < 0 && s%step != 0 {
		b -= step
	}
	return b
}

// From is the start (unix seconds, inclusive) of the window as of asOf: the Span/Step buckets
// that end with the bucket holding asOf. An event at t is in the window iff
// BucketStart(t) >= From(asOf) and t <= asOf.
func (w Window) From(asOf time.Time) int64 {
	return w.BucketStart(asOf) + int64(w.Step/time.Second) - int64(w.Span/time.Second)
}

// Bucket holds the counters of one Step of event time. Tenants and users use Requests,
// Flagged and Tokens; models Requests, Errors and the latency fields.
type Bucket struct {
	Start      int64 `json:"s"` // unix seconds, a multiple of the window's Step
	Requests   int64 `json:"n,omitempty"`
	Flagged    int64 `json:"f,omitempty"`
	Tokens     int64 `json:"k,omitempty"`
	Errors     int64 `json:"e,omitempty"`
	LatencySum int64 `json:"ls,omitempty"`
	LatencyMax int64 `json:"lm,omitempty"`
	Hist       Hist  `json:"h,omitempty"`
}

// Series are a window's buckets in ascending Start, at most Span/Step of them.
type Series []Bucket

// Windowed is the windows of one aggregate, by Window.Name.
type Windowed map[string]Series

// add applies fn to the bucket of event time t in every window, as of asOf (the aggregate's
// newest event time, at least t's). Buckets that fell out of a window are dropped first; an
// event older than a window's start changes nothing in that window.
func (wd *Windowed) add(asOf, t time.Time, fn func(*Bucket)) {
	if t.After(asOf) {
		asOf = t
	}
	if *wd == nil {
		*wd = Windowed{}
	}
	for _, w := range Windows {
		from := w.From(asOf)
		s := (*wd)[w.Name]
		i := sort.Search(len(s), func(i int) bool { return s[i].Start >= from })
		s = append(s[:0], s[i:]...)
		b := w.BucketStart(t)
		if b >= from {
			j := sort.Search(len(s), func(j int) bool { return s[j].Start >= b })
			if j == len(s) || s[j].Start != b {
				s = append(s, Bucket{})
				copy(s[j+1:], s[j:])
				s[j] = Bucket{Start: b}
			}
			fn(&s[j])
		}
		(*wd)[w.Name] = s
	}
}

// sum adds up the buckets of window w that are in it as of asOf.
func (wd Windowed) sum(w Window, asOf time.Time) Bucket {
	var out Bucket
	from := w.From(asOf)
	for _, b := range wd[w.Name] {
		if b.Start < from {
			continue
		}
		out.Requests += b.Requests
		out.Flagged += b.Flagged
		out.Tokens += b.Tokens
		out.Errors += b.Errors
		out.LatencySum += b.LatencySum
		out.LatencyMax = max(out.LatencyMax, b.LatencyMax)
		out.Hist.merge(b.Hist)
	}
	return out
}

// LatencyBoundsMs are the upper bounds (inclusive, ms) of the latency histogram's bins; a last
// bin holds everything above the final bound. A latency v falls in the first bin whose bound is
// >= v.
var LatencyBoundsMs = []int64{10, 25, 50, 75, 100, 150, 200, 300, 400, 500, 750, 1000, 1500, 2000, 3000, 5000, 7500, 10000, 20000, 30000, 60000}

// Hist is a latency histogram over LatencyBoundsMs: Hist[i] counts latencies in bin i
// (len(LatencyBoundsMs)+1 bins at most; trailing empty bins are left off). Its size is fixed
// whatever the traffic, so an aggregate's memory stays bounded.
type Hist []int64

func latencyBin(v int64) int {
	return sort.Search(len(LatencyBoundsMs), func(i int) bool { return LatencyBoundsMs[i] >= v })
}

func (h *Hist) add(v int64) {
	i := latencyBin(v)
	for len(*h) <= i {
		*h = append(*h, 0)
	}
	(*h)[i]++
}

func (h *Hist) merge(o Hist) {
	for len(*h) < len(o) {
		*h = append(*h, 0)
	}
	for i, n := range o {
		(*h)[i] += n
	}
}

// Quantile is an upper estimate of quantile q (0 < q <= 1) of the latencies counted: the upper
// bound of the bin holding the ceil(q·n)-th smallest, capped at maxMs (the largest latency seen,
// which also stands for the last, unbounded bin). 0 when empty.
func (h Hist) Quantile(q float64, maxMs int64) int64 {
	var n int64
	for _, c := range h {
		n += c
	}
	if n == 0 {
		return 0
	}
	rank := int64(q * float64(n))
	if float64(rank) < q*float64(n) {
		rank++
	}
	rank = max(rank, 1)
	var cum int64
	for i, c := range h {
		cum += c
		if cum >= rank {
			if i < len(LatencyBoundsMs) {
				return min(LatencyBoundsMs[i], maxMs)
			}
			return maxMs
		}
	}
	return maxMs
}

// windowFeature names a windowed feature: "request_count" + "1h" -> "request_count_1h".
func windowFeature(name string, w Window) string { return name + "_" + w.Name }
