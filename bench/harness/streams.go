package main

// Stream-formats mode (make bench-streams, bench-harness --stream-formats): how fast a declared
// stream drains when its values are Protobuf or JSON Schema, against the same data as Avro.
// For each pair of streamPairs it
//
//  1. fills a topic in the stream's own format from loadgen (--records originals, with
//     duplicates and poison, seed streamSeed);
//  2. writes the Avro record that format's schema maps to (avro.ParseStreamSchema) as an .avsc
//     and fills a second topic with the same records as Avro: each value read by the product's
//     decoder and written with that schema, under the same key, to the same partition, in the
//     same order; a value the decoder refuses (the poison) is copied as it is;
//  3. drains each topic with `backflow run` running the stage stream-<name> alone, with a
//     fresh consumer group, DLQ topic and ClickHouse database per drain, the two formats
//     interleaved run by run (A B A B ...), --runs times.
//
// It reports records/s, CPU µs per record and peak RSS per format, and per pair the ratio of
// records/s (the format's over Avro's, run r against run r): the median and its min-max
// spread. The target (docs/benchmarks.md) is a ratio of at least streamTarget. Everything it
// made (topics, groups, subjects, databases) is deleted after, unless --keep.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
)

// The formats a pair compares.
const (
	formatAvro     = "avro"
	formatProtobuf = "protobuf"
	formatJSON     = "json"
)

// streamTarget is the least records/s ratio (format over Avro) the formats are held to.
const streamTarget = 0.8

// streamSeed is loadgen's seed for every backlog of the mode.
const streamSeed = 39

// streamPair is one declared stream of deploy/demo.yaml measured in its own format against
// the same data as Avro.
type streamPair struct {
	Stream     string // the stream's name (its stage is stream-<name>)
	Format     string // formatProtobuf or formatJSON
	SchemaFile string
	DedupeKey  string
	EventTime  string
}

// streamPairs are the pairs measured, as deploy/demo.yaml declares their streams.
var streamPairs = []streamPair{
	{Stream: "shop-order", Format: formatProtobuf, SchemaFile: "deploy/streams/shop-order.proto", DedupeKey: "order_id", EventTime: "created"},
	{Stream: "page-view", Format: formatJSON, SchemaFile: "deploy/streams/page-view.schema.json", DedupeKey: "view_id", EventTime: "at"},
}

// schemaType is the registry type of the pair's own format.
func (p streamPair) schemaType() sr.SchemaType {
	if p.Format == formatJSON {
		return sr.TypeJSON
	}
	return sr.TypeProtobuf
}

// table is the ClickHouse table the stream lands in (the name with '-' as '_').
func (p streamPair) table() string { return strings.ReplaceAll(p.Stream, "-", "_") }

// selectPairs is the pairs named in list (comma-separated stream names), in streamPairs' order.
func selectPairs(list string) ([]streamPair, error) {
	want := map[string]bool{}
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s != "" {
			want[s] = true
		}
	}
	var out []streamPair
	for _, p := range streamPairs {
		if want[p.Stream] {
			out = append(out, p)
			delete(want, p.Stream)
		}
	}
	var errs []error
	for s := range want {
		errs = append(errs, fmt.Errorf("--stream-pairs: %q is not a pair (known: shop-order, page-view)", s))
	}
	if len(out) == 0 && len(errs) == 0 {
		errs = append(errs, errors.New("--stream-pairs: empty"))
	}
	return out, errors.Join(errs...)
}

// drainStep is one drain of the mode: pair index, format and run number.
type drainStep struct {
	pair   int
	format string
	run    int
}

// drainOrder interleaves the drains: run by run, pair by pair, the pair's format then Avro.
func drainOrder(pairs []streamPair, runs int) []drainStep {
	var out []drainStep
	for r := 1; r <= runs; r++ {
		for i, p := range pairs {
			out = append(out, drainStep{i, p.Format, r}, drainStep{i, formatAvro, r})
		}
	}
	return out
}

// streamResults is the raw results of the mode (.bench/results/stream-formats-*.json).
type streamResults struct {
	Commit   string         `json:"commit"`
	Machine  machine        `json:"machine"`
	Started  time.Time      `json:"started"`
	Finished time.Time      `json:"finished"`
	Partial  bool           `json:"partial,omitempty"`
	LoadEnd  string         `json:"load_average_end"`
	Options  streamOptions  `json:"options"`
	Pairs    []*pairResults `json:"pairs"`
}

type streamOptions struct {
	Records int    `json:"records"` // originals per backlog
	Runs    int    `json:"runs"`
	Seed    uint64 `json:"seed"`
}

// pairResults is one pair: its two backlogs and every drain of each.
type pairResults struct {
	Stream     string                   `json:"stream"`
	Format     string                   `json:"format"`
	AvroSchema string                   `json:"avro_schema"` // the .avsc the Avro backlog was written with
	Backlogs   map[string]streamBacklog `json:"backlogs"`    // format → its backlog
	Drains     map[string]*peerResults  `json:"drains"`      // format → its drains and their median
	Ratio      runRatio                 `json:"records_per_sec_ratio"`
	CPURatio   runRatio                 `json:"cpu_per_record_ratio"`
}

// streamBacklog is one topic of a pair.
type streamBacklog struct {
	Topic      string `json:"topic"`
	Records    int64  `json:"records"` // end offsets
	Originals  int    `json:"originals"`
	Duplicates int    `json:"duplicates"`
	Poison     int    `json:"poison"`
	// Transcoded and Copied: for the Avro backlog, the values read and written again as Avro,
	// and those copied as they were (the poison).
	Transcoded int `json:"transcoded,omitempty"`
	Copied     int `json:"copied,omitempty"`
}

// runRatio is a ratio per run (run r of one format against run r of the other), its median
// and its range.
type runRatio struct {
	Runs   []float64 `json:"runs"`
	Median float64   `json:"median"`
	Min    float64   `json:"min"`
	Max    float64   `json:"max"`
}

// ratioSpread is num[r]/den[r] for every run both have, with the median and range.
func ratioSpread(num, den []float64) runRatio {
	var s runRatio
	for i := range min(len(num), len(den)) {
		if den[i] > 0 {
			s.Runs = append(s.Runs, num[i]/den[i])
		}
	}
	if len(s.Runs) == 0 {
		return s
	}
	s.Median, s.Min, s.Max = med(s.Runs), s.Runs[0], s.Runs[0]
	for _, x := range s.Runs {
		s.Min, s.Max = min(s.Min, x), max(s.Max, x)
	}
	return s
}

// update recomputes the medians and ratios from the drains so far.
func (pr *pairResults) update() {
	rate := map[string][]float64{}
	cpu := map[string][]float64{}
	for f, d := range pr.Drains {
		d.Median = median(d.Runs)
		for _, m := range d.Runs {
			rate[f] = append(rate[f], m.RecordsPerSec)
			cpu[f] = append(cpu[f], m.CPUPerMillion)
		}
	}
	pr.Ratio = ratioSpread(rate[pr.Format], rate[formatAvro])
	pr.CPURatio = ratioSpread(cpu[pr.Format], cpu[formatAvro])
}

// streamBench is the mode: fill every pair's backlogs, drain them interleaved, report.
func (h *harness) streamBench(ctx context.Context) error {
	o := h.opt
	pairs, err := selectPairs(o.streamPairs)
	if err != nil {
		return err
	}
	res := &streamResults{Commit: gitCommit(), Machine: machineInfo(), Started: h.started.UTC(),
		Options: streamOptions{Records: o.records, Runs: o.runs, Seed: streamSeed}}
	say("bench %s: stream formats, %d originals per backlog, %d run(s) per format; logs in %s", h.stamp, o.records, o.runs, h.tmp)
	say("machine: %s", res.Machine)
	write := func(partial bool) (string, error) {
		res.Partial, res.Finished, res.LoadEnd = partial, time.Now().UTC(), loadAverage()
		if err := os.MkdirAll(o.out, 0o755); err != nil {
			return "", err
		}
		b, _ := json.MarshalIndent(res, "", "  ")
		path := filepath.Join(o.out, "stream-formats-"+h.stamp+".json")
		return path, os.WriteFile(path, append(b, '\n'), 0o644)
	}
	tag := "s" + strings.ToLower(h.stamp[4:])
	var subjects, topics []string
	defer func() {
		if !o.keep {
			c, cancel := context.WithTimeout(context.Background(), time.Minute)
			h.st.deleteTopics(c, topics...)
			cancel()
			h.deleteSubjects(subjects...)
		}
	}()
	backlogs := make([]map[string]backlog, len(pairs))
	for i, p := range pairs {
		bls, made, err := h.fillPair(ctx, tag, p)
		topics, subjects = append(topics, made.topics...), append(subjects, made.subjects...)
		if err != nil {
			return fmt.Errorf("%s: %w", p.Stream, err)
		}
		backlogs[i] = bls
		r := &pairResults{Stream: p.Stream, Format: p.Format, AvroSchema: made.avsc, Backlogs: map[string]streamBacklog{}, Drains: map[string]*peerResults{}}
		for f, bl := range bls {
			r.Backlogs[f] = made.counts[f]
			r.Backlogs[f] = withRecords(r.Backlogs[f], bl.records)
			r.Drains[f] = &peerResults{}
		}
		res.Pairs = append(res.Pairs, r)
	}
	var prof string
	if o.profile {
		prof = filepath.Join(o.out, "profiles", h.stamp)
		if err := os.MkdirAll(prof, 0o755); err != nil {
			return err
		}
	}
	for _, st := range drainOrder(pairs, o.runs) {
		p, r := pairs[st.pair], res.Pairs[st.pair]
		bl := backlogs[st.pair][st.format]
		pprof := ""
		if prof != "" && st.run == 1 {
			pprof = prof
		}
		pr := h.newStreamRun(tag, p, st.format, st.run, bl, pprof)
		subjects = append(subjects, pr.topics[0]+"-value") // the DLQ's, if it registered one
		m, err := h.measure(ctx, pr, bl)
		if err != nil {
			_, _ = write(true)
			return fmt.Errorf("%s as %s, run %d: %w", p.Stream, st.format, st.run, err)
		}
		r.Drains[st.format].Runs = append(r.Drains[st.format].Runs, m)
		r.update()
		say("%s as %s run %d/%d: %s", p.Stream, st.format, st.run, o.runs, m.line())
		say("  conditions: %s", m.Cond.line())
		_, _ = write(true)
	}
	path, err := write(false)
	if err != nil {
		return err
	}
	fmt.Println()
	fmt.Print(streamMarkdown(res))
	say("raw results (not committed): %s", path)
	if prof != "" {
		h.profileTops(prof)
		say("profiles (not committed): %s (the first run of each format; *.txt: their tops)", prof)
	}
	say("logs: %s", h.tmp)
	return saveSummary(o.summaryPath, func() ([]byte, error) { return streamSummary(res) })
}

func withRecords(b streamBacklog, n int64) streamBacklog {
	b.Records = n
	return b
}

// newStreamRun lays out one drain of bl (a pair's backlog in format) by `backflow run` running
// the stage stream-<name> alone: its config, group, DLQ topic and database named for the run.
// prof, when not empty, is the folder its CPU and allocation profiles go to.
func (h *harness) newStreamRun(tag string, p streamPair, format string, run int, bl backlog, prof string) peerRun {
	name := fmt.Sprintf("%s-%s-%s-%d", tag, p.Stream, format, run)
	pr := peerRun{peer: format, run: run, db: "bench_" + strings.ReplaceAll(name, "-", "_"), files: map[string]string{}}
	group, dlq := name+"-stream", name+".dlq"
	cfg := filepath.Join(h.tmp, name+".yaml")
	pr.files[cfg] = streamRunConfig(p, bl.inference, group, dlq)
	var args []string
	if prof != "" {
		base := filepath.Join(prof, p.Stream+"-"+format)
		args = []string{"--cpu-profile", base + ".cpu.pprof", "--alloc-profile", base + ".alloc.pprof"}
	}
	pr.procs = []proc{{name: "backflow-run", bin: h.opt.backflow, env: []string{"BACKFLOW_CLICKHOUSE_DATABASE=" + pr.db, gcTraceEnv},
		args: append(args, "run", "--config", cfg)}}
	pr.stages = []stage{{name: "stream-" + p.Stream, group: group, topics: []string{bl.inference}}}
	pr.topics, pr.groups, pr.precreate = []string{dlq}, []string{group}, []string{dlq}
	table := p.table()
	pr.rows = func(ctx context.Context, db string) (uint64, uint64, error) { return h.st.tableRows(ctx, db, table) }
	return pr
}

// streamDefaults are the mode's defaults for the flags not given (set), applied after --quick's:
// 500,000 originals (a --quick run 20,000), backflow alone, no latency run, the summary
// bench/stream-formats.json (a --quick run none).
func (o *options) streamDefaults(set map[string]bool) {
	if !set["records"] {
		o.records = 500_000
		if o.quick {
			o.records = 20_000
		}
	}
	if !set["peers"] {
		o.peers = peerBackflow
	}
	if !set["summary"] && !o.quick {
		o.summaryPath = "bench/stream-formats.json"
	}
	o.latency = false
}
