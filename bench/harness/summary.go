package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// summary is bench/latest.json: the few figures of a run that the docs quote, small enough to
// commit (a few hundred bytes a peer). The raw results and profiles stay under --out, which git
// ignores. Every figure comes from a results value (see summarize); fields, all snake_case:
//
//	started                  the run's start, UTC, RFC 3339 to the second
//	commit                   `git rev-parse --short HEAD` when the run started; "" if unknown
//	machine.cores            logical CPUs (runtime.NumCPU)
//	machine.cpu              CPU model name from /proc/cpuinfo
//	machine.load_average_start  /proc/loadavg (1, 5, 15 min) when the run started
//	options.records          --records: source records asked of loadgen
//	options.runs             --runs: drains per peer; every peer figure is the median over them
//	options.layout           --backflow-layout: stages (a process per stage) or run (one process)
//	options.quick            true for a --quick run (omitted otherwise)
//	options.scale            a scale run's backlog sizes asked for, e.g. "100000,1000000,10000000"
//	                         (omitted otherwise)
//	backlog_records          source records in the backlog (requests × 3, duplicates, poison)
//	clickhouse_rows_expected the backlog's valid originals: the rows an exact peer lands
//	peers.<peer>             backflow, ceiling, benthos; medians over the runs:
//	  records_per_sec             end to end: start until every group committed its input
//	  cpu_us_per_record           CPU of the peer's own processes, µs per source record
//	                              (the same number as CPU s per million records)
//	  services_cpu_us_per_record  CPU of the stack's services found running (Kafka, ClickHouse,
//	                              Redis, the registry, sensitive-words) while the peer ran,
//	                              summed, µs per source record
//	  peak_rss_mb                 peak RSS (VmHWM), summed over the peer's processes
//	  clickhouse_rows             rows in ClickHouse after the drain
//	  clickhouse_rows_final       the same counted with FINAL (duplicates collapsed)
//	  kafka_written_per_record    records the peer wrote to its own Kafka topics, per source record
//	  kafka_consumed_per_record   records its consumer groups committed, per source record
//	  latency                     backflow only, when the latency run ran: rate_requests_per_sec
//	                              (loadgen's rate; 3 records a request), p50_ms and p99_ms of
//	                              event time → landed in ClickHouse, medians over the runs
//	ratios                   backflow's median over the other peer's; omitted when not measured
//	  backflow_ceiling_records_per_sec, backflow_benthos_records_per_sec   > 1: backflow faster
//	  backflow_ceiling_cpu_per_record,  backflow_benthos_cpu_per_record    < 1: backflow cheaper
//	pairs.<backflow/peer>    run r of backflow against run r of the peer, drained back to back:
//	  records_per_sec, cpu_per_record   {median, min, max} of the pairs' ratios
//	runs                     every drain in the order run: peer, run, records_per_sec,
//	                         cpu_us_per_record, mode (fast or slow against the peer's fastest
//	                         run) and why, from the conditions recorded for it (load,
//	                         steal, the rest of the machine's CPU, GC cycles)
//	scale                    only from a scale run (--scale): one entry per backlog size, in
//	                         increasing order: records (source records in that backlog) and
//	                         peers.<peer> with the medians records_per_sec, seconds,
//	                         cpu_us_per_record, services_cpu_us_per_record, peak_rss_mb,
//	                         clickhouse_rows, clickhouse_rows_final; backlog_records, peers and
//	                         ratios above are then those of the size --records names (default
//	                         1M), or the largest size when --records is not one of them
//	drains                   only from --summarize with more than one file: backflow draining a
//	                         larger backlog, each with its own started, commit, layout, records
//	                         (source records), seconds, records_per_sec, cpu_us_per_record,
//	                         peak_rss_mb and clickhouse_rows
//
// Rounding: records/s, seconds and peak RSS to whole numbers, µs per record to 0.1, latency
// to whole ms, ratios to 0.001 (the markdown results show the same to fewer digits).
type summary struct {
	Started        string                 `json:"started"`
	Commit         string                 `json:"commit"`
	Machine        summaryMachine         `json:"machine"`
	Options        summaryOptions         `json:"options"`
	BacklogRecords int64                  `json:"backlog_records"`
	RowsExpected   uint64                 `json:"clickhouse_rows_expected"`
	Peers          map[string]summaryPeer `json:"peers"`
	Ratios         *summaryRatios         `json:"ratios,omitempty"`
	Pairs          map[string]summaryPair `json:"pairs,omitempty"`
	Runs           []summaryRun           `json:"runs,omitempty"`
	Drains         []summaryDrain         `json:"drains,omitempty"`
	Scale          []summaryScale         `json:"scale,omitempty"`
}

type summaryMachine struct {
	Cores     int    `json:"cores"`
	CPU       string `json:"cpu"`
	LoadStart string `json:"load_average_start"`
}

type summaryOptions struct {
	Records int    `json:"records"`
	Runs    int    `json:"runs"`
	Layout  string `json:"layout"`
	Quick   bool   `json:"quick,omitempty"`
	Scale   string `json:"scale,omitempty"`
}

type summaryPeer struct {
	RecordsPerSec float64 `json:"records_per_sec"`
	CPUPerRecord  float64 `json:"cpu_us_per_record"`
	ServicesCPU   float64 `json:"services_cpu_us_per_record"`
	PeakRSSMB     float64 `json:"peak_rss_mb"`
	Rows          uint64  `json:"clickhouse_rows"`
	RowsFinal     uint64  `json:"clickhouse_rows_final"`
	// Kafka records the peer wrote, and its groups consumed, per source record.
	KafkaWritten  float64         `json:"kafka_written_per_record"`
	KafkaConsumed float64         `json:"kafka_consumed_per_record"`
	Latency       *summaryLatency `json:"latency,omitempty"`
}

type summaryLatency struct {
	RateRequests float64 `json:"rate_requests_per_sec"`
	P50          float64 `json:"p50_ms"`
	P99          float64 `json:"p99_ms"`
}

type summaryRatios struct {
	CeilingRecordsPerSec float64 `json:"backflow_ceiling_records_per_sec,omitempty"`
	CeilingCPU           float64 `json:"backflow_ceiling_cpu_per_record,omitempty"`
	BenthosRecordsPerSec float64 `json:"backflow_benthos_records_per_sec,omitempty"`
	BenthosCPU           float64 `json:"backflow_benthos_cpu_per_record,omitempty"`
}

type summarySpread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

type summaryPair struct {
	RecordsPerSec summarySpread `json:"records_per_sec"`
	CPUPerRecord  summarySpread `json:"cpu_per_record"`
	Pairs         int           `json:"pairs"`
}

type summaryRun struct {
	Peer          string  `json:"peer"`
	Run           int     `json:"run"`
	RecordsPerSec float64 `json:"records_per_sec"`
	CPUPerRecord  float64 `json:"cpu_us_per_record"`
	Mode          string  `json:"mode,omitempty"`
	Why           string  `json:"why,omitempty"`
}

type summaryDrain struct {
	Started       string  `json:"started"`
	Commit        string  `json:"commit"`
	Layout        string  `json:"layout"`
	Records       int64   `json:"records"`
	Seconds       float64 `json:"seconds"`
	RecordsPerSec float64 `json:"records_per_sec"`
	CPUPerRecord  float64 `json:"cpu_us_per_record"`
	PeakRSSMB     float64 `json:"peak_rss_mb"`
	Rows          uint64  `json:"clickhouse_rows"`
}

func round(x float64, digits int) float64 {
	p := math.Pow10(digits)
	return math.Round(x*p) / p
}

// optionInt reads an integer option of a results file (its options are strings).
func (r *results) optionInt(name string) (int, error) {
	n, err := strconv.Atoi(r.Options[name])
	if err != nil {
		return 0, fmt.Errorf("options.%s: %q is not a number", name, r.Options[name])
	}
	return n, nil
}

func (r *results) checkComplete() error {
	if r.Partial {
		return fmt.Errorf("the results of %s are partial (the run did not finish)", r.Started.UTC().Format(time.RFC3339))
	}
	if len(r.Peers) == 0 {
		return errors.New("no peer was measured")
	}
	return nil
}

// summarize makes the summary of one run's results; drains are added by summarizeDrain.
func summarize(r *results) (*summary, error) {
	if err := r.checkComplete(); err != nil {
		return nil, err
	}
	records, err := r.optionInt("records")
	if err != nil {
		return nil, err
	}
	runs, err := r.optionInt("runs")
	if err != nil {
		return nil, err
	}
	s := &summary{
		Started: r.Started.UTC().Format(time.RFC3339),
		Commit:  r.Commit,
		Machine: summaryMachine{Cores: r.Machine.Cores, CPU: r.Machine.CPU, LoadStart: r.Machine.LoadStart},
		Options: summaryOptions{Records: records, Runs: runs, Layout: r.Options["backflow_layout"], Quick: r.Options["quick"] == "true",
			Scale: r.Options["scale"]},
		Peers: map[string]summaryPeer{},
	}
	for name, pr := range r.Peers {
		if pr == nil {
			continue
		}
		m := pr.Median
		services := 0.0
		for _, sv := range m.Services {
			services += sv.CPUPerMillion
		}
		p := summaryPeer{
			RecordsPerSec: round(m.RecordsPerSec, 0),
			CPUPerRecord:  round(m.CPUPerMillion, 1), // CPU s per 1e6 records = µs per record
			ServicesCPU:   round(services, 1),
			PeakRSSMB:     round(m.PeakRSSMB, 0),
			Rows:          m.Rows,
			RowsFinal:     m.RowsFinal,
			KafkaWritten:  round(m.KafkaWritten, 2),
			KafkaConsumed: round(m.KafkaConsumed, 2),
		}
		if name == peerBackflow && r.Latency != nil && len(r.Latency.Runs) > 0 {
			l := r.Latency
			p.Latency = &summaryLatency{RateRequests: round(l.RateRequests, 0), P50: round(l.Median.P50, 0), P99: round(l.Median.P99, 0)}
		}
		s.Peers[name] = p
		s.BacklogRecords = max(s.BacklogRecords, m.Records)
		s.RowsExpected = max(s.RowsExpected, m.RowsExpected)
	}
	ratio := func(peer, figure string) float64 {
		return round(r.Ratios["backflow/"+peer+" "+figure], 3)
	}
	rs := summaryRatios{
		CeilingRecordsPerSec: ratio(peerCeiling, "records_per_sec"),
		CeilingCPU:           ratio(peerCeiling, "cpu_seconds_per_million"),
		BenthosRecordsPerSec: ratio(peerBenthos, "records_per_sec"),
		BenthosCPU:           ratio(peerBenthos, "cpu_seconds_per_million"),
	}
	if rs != (summaryRatios{}) {
		s.Ratios = &rs
	}
	spread := func(p pairRatio) summarySpread {
		return summarySpread{Median: round(p.Median, 3), Min: round(p.Min, 3), Max: round(p.Max, 3)}
	}
	for k, pr := range r.PairRatios {
		if len(pr["records_per_sec"].Pairs) == 0 {
			continue
		}
		if s.Pairs == nil {
			s.Pairs = map[string]summaryPair{}
		}
		s.Pairs[k] = summaryPair{RecordsPerSec: spread(pr["records_per_sec"]), CPUPerRecord: spread(pr["cpu_seconds_per_million"]),
			Pairs: len(pr["records_per_sec"].Pairs)}
	}
	if len(r.Scale) == 0 {
		for run := 1; ; run++ {
			found := false
			for _, name := range r.peerNames() {
				if pr := r.Peers[name]; pr != nil && run <= len(pr.Runs) {
					m := pr.Runs[run-1]
					s.Runs = append(s.Runs, summaryRun{Peer: name, Run: m.Run, RecordsPerSec: round(m.RecordsPerSec, 0),
						CPUPerRecord: round(m.CPUPerMillion, 1), Mode: m.Cond.Mode, Why: m.Cond.Why})
					found = true
				}
			}
			if !found {
				break
			}
		}
	}
	s.Scale = summarizeScale(r)
	return s, nil
}

// summarizeDrain makes a drains entry of backflow's figures in one run's results.
func summarizeDrain(r *results) (summaryDrain, error) {
	if err := r.checkComplete(); err != nil {
		return summaryDrain{}, err
	}
	b := r.Peers[peerBackflow]
	if b == nil {
		return summaryDrain{}, errors.New("a drain needs backflow's figures, and these results have none")
	}
	m := b.Median
	return summaryDrain{
		Started:       r.Started.UTC().Format(time.RFC3339),
		Commit:        r.Commit,
		Layout:        r.Options["backflow_layout"],
		Records:       m.Records,
		Seconds:       round(m.Seconds, 0),
		RecordsPerSec: round(m.RecordsPerSec, 0),
		CPUPerRecord:  round(m.CPUPerMillion, 1),
		PeakRSSMB:     round(m.PeakRSSMB, 0),
		Rows:          m.Rows,
	}, nil
}

func (s *summary) json() ([]byte, error) {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// summaryJSON is the summary of res, the small file to commit (saveSummary writes it).
func summaryJSON(res *results) ([]byte, error) {
	s, err := summarize(res)
	if err != nil {
		return nil, err
	}
	return s.json()
}

// summarizeFiles is `bench-harness --summarize RUN.json [DRAIN.json...]`: the summary of the
// first results file, with backflow's figures in each further file as a drain. commit, if not
// empty, stands in for the commit of results files written before the harness recorded it.
func summarizeFiles(files []string, commit string) ([]byte, error) {
	if len(files) == 0 {
		return nil, errors.New("--summarize: give the results JSON of a run (and, after it, of any drains)")
	}
	var s *summary
	for i, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var r results
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if r.Commit == "" {
			r.Commit = commit
		}
		if i == 0 {
			if s, err = summarize(&r); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			continue
		}
		d, err := summarizeDrain(&r)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		s.Drains = append(s.Drains, d)
	}
	return s.json()
}

// gitCommit is `git rev-parse --short HEAD`, or "" outside a git checkout or without git.
func gitCommit() string {
	b, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
