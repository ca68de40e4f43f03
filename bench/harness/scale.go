package main

import (
	"context"
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/backflowhq/backflow/internal/sizes"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Scale mode (--scale 100k,1M,10M): the same drains as a normal run, once per backlog size, on
// a backlog of its own, so records/s and µs per record can be read against the size of the
// backlog. A cost that grows with the backlog (compaction, a cache that stops fitting) shows
// as a line that rises.

// scalePoint is one backlog size of a scale run: its backlog and every peer's drains of it.
type scalePoint struct {
	Asked   int                     `json:"records_asked"` // the size given to --scale
	Backlog map[string]any          `json:"backlog"`
	Peers   map[string]*peerResults `json:"peers"`
}

// parseSizes reads a --scale list: positive whole numbers of source records, with an optional
// k (thousand) or M (million) suffix, in increasing order.
func parseSizes(s string) ([]int, error) {
	ns, err := sizes.Parse(s)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, n := range ns {
		if n < 3 {
			return nil, fmt.Errorf("%d records: want at least 3", n)
		}
		if len(out) > 0 && n <= out[len(out)-1] {
			return nil, fmt.Errorf("sizes must increase: %d after %d", n, out[len(out)-1])
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("no size given")
	}
	return out, nil
}

// scaleRuns drains a backlog of each --scale size in turn, deleting each backlog before the
// next is written. res.Peers and res.Backlog are set to the point of --records when it is one
// of the sizes, else to the largest, so the summary's peers and ratios come from one backlog.
func (h *harness) scaleRuns(ctx context.Context, res *results) error {
	for i, n := range h.opt.scale {
		say("scale %d/%d: a backlog of %d records", i+1, len(h.opt.scale), n)
		bl, err := h.prefill(ctx, fmt.Sprintf("s%d%s", i, strings.ToLower(h.stamp[4:])), n)
		if err != nil {
			return err
		}
		pt := scalePoint{Asked: n, Backlog: bl.summary(), Peers: map[string]*peerResults{}}
		res.Scale = append(res.Scale, pt)
		if err := h.drain(ctx, res, bl, pt.Peers, i == len(h.opt.scale)-1); err != nil {
			h.dropBacklog(bl)
			return fmt.Errorf("backlog of %d: %w", n, err)
		}
		h.dropBacklog(bl)
		res.pickScalePoint(h.opt.records)
		h.checkpoint(res)
	}
	return nil
}

// pickScalePoint sets the run's Backlog and Peers to the scale point of records, or else the
// largest, and recomputes the ratios.
func (r *results) pickScalePoint(records int) {
	if len(r.Scale) == 0 {
		return
	}
	pt := r.Scale[len(r.Scale)-1]
	for _, p := range r.Scale {
		if p.Asked == records {
			pt = p
		}
	}
	r.Backlog, r.Peers = pt.Backlog, pt.Peers
	r.ratios()
}

// recordsPerRequest is the backlog's source records per request (3 when unknown).
func (r *results) recordsPerRequest() float64 {
	rec, req := number(r.Backlog["records"]), number(r.Backlog["requests"])
	if rec <= 0 || req <= 0 {
		return 3
	}
	return rec / req
}

// number reads a backlog figure, an int64 or int in process and a float64 once read from JSON.
func number(v any) float64 {
	switch x := v.(type) {
	case int:
		return float64(x)
	case int64:
		return float64(x)
	case float64:
		return x
	}
	return 0
}

// drainTimeout is how long a drain of records may take: --timeout, or for a backlog larger
// than 1M records in scale and restart mode, 1.2 ms a record (a drain at 800 records/s),
// whichever is longer.
func (h *harness) drainTimeout(records int64) time.Duration {
	if len(h.opt.scale) == 0 && !h.opt.restart {
		return h.opt.timeout
	}
	return max(h.opt.timeout, time.Duration(records)*1200*time.Microsecond)
}

// summaryScale is one backlog size in bench/latest.json: its source records and, per peer, the
// medians of its drains.
type summaryScale struct {
	Records int64                       `json:"records"`
	Peers   map[string]summaryScalePeer `json:"peers"`
}

type summaryScalePeer struct {
	RecordsPerSec float64 `json:"records_per_sec"`
	Seconds       float64 `json:"seconds"`
	CPUPerRecord  float64 `json:"cpu_us_per_record"`
	ServicesCPU   float64 `json:"services_cpu_us_per_record"`
	PeakRSSMB     float64 `json:"peak_rss_mb"`
	Rows          uint64  `json:"clickhouse_rows"`
	RowsFinal     uint64  `json:"clickhouse_rows_final"`
}

func servicesCPU(m peerMeasure) float64 {
	total := 0.0
	for _, s := range m.Services {
		total += s.CPUPerMillion
	}
	return total
}

// summarizeScale makes the scale entries of the summary, one per backlog size.
func summarizeScale(r *results) []summaryScale {
	var out []summaryScale
	for _, pt := range r.Scale {
		s := summaryScale{Records: int64(number(pt.Backlog["records"])), Peers: map[string]summaryScalePeer{}}
		for name, pr := range pt.Peers {
			if pr == nil || len(pr.Runs) == 0 {
				continue
			}
			m := pr.Median
			s.Peers[name] = summaryScalePeer{
				RecordsPerSec: round(m.RecordsPerSec, 0),
				Seconds:       round(m.Seconds, 0),
				CPUPerRecord:  round(m.CPUPerMillion, 1),
				ServicesCPU:   round(servicesCPU(m), 1),
				PeakRSSMB:     round(m.PeakRSSMB, 0),
				Rows:          m.Rows,
				RowsFinal:     m.RowsFinal,
			}
		}
		out = append(out, s)
	}
	return out
}

// plotScale draws µs of CPU per source record against the backlog's size (log scale): for
// each peer, its own processes and its own plus the stack's services. It writes a PNG to path.
func plotScale(r *results, path string) error {
	pts := summarizeScale(r)
	if len(pts) == 0 {
		return errors.New("no scale point was measured")
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("CPU per source record against backlog size (%s, %d cores)", r.Started.UTC().Format("2006-01-02"), r.Machine.Cores)
	p.X.Label.Text = "backlog, source records"
	p.Y.Label.Text = "µs of CPU per source record"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.TickerFunc(func(min, max float64) []plot.Tick {
		var ts []plot.Tick
		for _, s := range pts {
			ts = append(ts, plot.Tick{Value: float64(s.Records), Label: humanCount(s.Records)})
		}
		return ts
	})
	p.Legend.Top = true
	p.Legend.Left = true
	p.Y.Min = 0
	colors := map[string]color.Color{
		peerBackflow: color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
		peerCeiling:  color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
		peerBenthos:  color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	}
	ymax := 0.0
	for _, peer := range allPeers {
		var own, total plotter.XYs
		for _, s := range pts {
			if m, ok := s.Peers[peer]; ok {
				own = append(own, plotter.XY{X: float64(s.Records), Y: m.CPUPerRecord})
				total = append(total, plotter.XY{X: float64(s.Records), Y: m.CPUPerRecord + m.ServicesCPU})
				ymax = math.Max(ymax, m.CPUPerRecord+m.ServicesCPU)
			}
		}
		if len(own) == 0 {
			continue
		}
		for i, xy := range []plotter.XYs{total, own} {
			l, s, err := plotter.NewLinePoints(xy)
			if err != nil {
				return err
			}
			l.Color, s.Color = colors[peer], colors[peer]
			s.Shape = draw.CircleGlyph{}
			label := peer + ": own processes + services"
			if i == 1 {
				l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
				s.Shape = draw.BoxGlyph{}
				label = peer + ": own processes"
			}
			p.Add(l, s)
			p.Legend.Add(label, l, s)
		}
	}
	p.Y.Max = ymax * 1.4 // room for the legend
	p.Add(plotter.NewGrid())
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return p.Save(8*vg.Inch, 4.5*vg.Inch, path)
}

// humanCount writes 100000 as 100k and 10300000 as 10.3M.
func humanCount(n int64) string {
	switch {
	case n >= 1_000_000:
		return strings.TrimSuffix(strings.TrimSuffix(strconv.FormatFloat(float64(n)/1e6, 'f', 1, 64), "0"), ".") + "M"
	case n >= 1_000:
		return strings.TrimSuffix(strings.TrimSuffix(strconv.FormatFloat(float64(n)/1e3, 'f', 1, 64), "0"), ".") + "k"
	}
	return strconv.FormatInt(n, 10)
}
