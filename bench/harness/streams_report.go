package main

// Stream-formats mode: its summary (bench/stream-formats.json) and its markdown table.

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
)

// streamSummaryDoc is bench/stream-formats.json: per pair, each format's median drain and the
// ratios, with the conditions of the sitting.
type streamSummaryDoc struct {
	Started  time.Time           `json:"started"`
	Commit   string              `json:"commit"`
	Machine  machine             `json:"machine"` // load_average_start: the load when the sitting began
	LoadEnd  string              `json:"load_average_end"`
	Options  streamOptions       `json:"options"`
	Target   float64             `json:"target_records_per_sec_ratio"`
	Pairs    []streamSummaryPair `json:"pairs"`
	Partial  bool                `json:"partial,omitempty"`
	Duration string              `json:"duration"`
}

type streamSummaryPair struct {
	Stream string                        `json:"stream"`
	Format string                        `json:"format"`
	Drains map[string]streamSummaryDrain `json:"drains"` // format (and avro) → median drain
	// Ratio: the format's records/s over Avro's, run r against run r; CPURatio: its CPU per
	// record over Avro's.
	Ratio       runRatio `json:"records_per_sec_ratio"`
	CPURatio    runRatio `json:"cpu_per_record_ratio"`
	MeetsTarget bool     `json:"meets_target"`
}

type streamSummaryDrain struct {
	Records        int64   `json:"records"`
	RecordsPerSec  float64 `json:"records_per_sec"`
	CPUUsPerRecord float64 `json:"cpu_us_per_record"` // backflow's process only
	PeakRSSMB      float64 `json:"peak_rss_mb"`
	RowsFinal      uint64  `json:"rows_final"` // through FINAL: one per original
	Originals      uint64  `json:"originals"`
	Runs           int     `json:"runs"`
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

func (r runRatio) rounded() runRatio {
	out := runRatio{Median: round3(r.Median), Min: round3(r.Min), Max: round3(r.Max)}
	for _, x := range r.Runs {
		out.Runs = append(out.Runs, round3(x))
	}
	return out
}

// summarizeStreams is the summary of res.
func summarizeStreams(res *streamResults) streamSummaryDoc {
	doc := streamSummaryDoc{Started: res.Started, Commit: res.Commit, Machine: res.Machine, LoadEnd: res.LoadEnd, Options: res.Options,
		Target: streamTarget, Partial: res.Partial, Duration: res.Finished.Sub(res.Started).Round(time.Second).String()}
	for _, p := range res.Pairs {
		sp := streamSummaryPair{Stream: p.Stream, Format: p.Format, Drains: map[string]streamSummaryDrain{}, Ratio: p.Ratio.rounded(), CPURatio: p.CPURatio.rounded()}
		for f, d := range p.Drains {
			m := d.Median
			sp.Drains[f] = streamSummaryDrain{Records: m.Records, RecordsPerSec: math.Round(m.RecordsPerSec), CPUUsPerRecord: round1(m.CPUPerMillion),
				PeakRSSMB: math.Round(m.PeakRSSMB), RowsFinal: m.RowsFinal, Originals: m.RowsExpected, Runs: len(d.Runs)}
		}
		sp.MeetsTarget = len(p.Ratio.Runs) > 0 && p.Ratio.Median >= streamTarget
		doc.Pairs = append(doc.Pairs, sp)
	}
	return doc
}

func streamSummary(res *streamResults) ([]byte, error) {
	b, err := json.MarshalIndent(summarizeStreams(res), "", "  ")
	return append(b, '\n'), err
}

// streamMarkdown is the table docs/benchmarks.md quotes.
func streamMarkdown(res *streamResults) string {
	doc := summarizeStreams(res)
	var b strings.Builder
	fmt.Fprintf(&b, "%d originals per backlog (%d runs per format, interleaved); %s; load average at the start %s\n\n",
		doc.Options.Records, doc.Options.Runs, res.Commit, doc.Machine.LoadStart)
	b.WriteString("| stream | format | records/s | CPU µs/record | peak RSS MB | rows (FINAL) / originals | records/s ratio to Avro (min-max) | CPU ratio |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|\n")
	for _, p := range doc.Pairs {
		for _, f := range []string{p.Format, formatAvro} {
			d, ok := p.Drains[f]
			if !ok {
				continue
			}
			ratio, cpu := "", ""
			if f != formatAvro {
				ratio = fmt.Sprintf("%.2f (%.2f-%.2f)", p.Ratio.Median, p.Ratio.Min, p.Ratio.Max)
				cpu = fmt.Sprintf("%.2f", p.CPURatio.Median)
			}
			fmt.Fprintf(&b, "| %s | %s | %.0f | %.1f | %.0f | %d / %d | %s | %s |\n", p.Stream, f, d.RecordsPerSec, d.CPUUsPerRecord, d.PeakRSSMB,
				d.RowsFinal, d.Originals, ratio, cpu)
		}
	}
	return b.String()
}
