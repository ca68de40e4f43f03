package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/internal/dlq"
	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/test/testenv"
)

// dlqFixture is a DLQ topic with 5 entries of 3 classes whose origins are in two fresh,
// empty origin topics.
type dlqFixture struct {
	cfg            kafka.Conn
	adm            *kadm.Client
	dlqTopic       string
	originA        string // 3 entries: 2 corrupt, 1 unknown_schema
	originB        string // 2 entries: 1 unknown_schema, 1 not_framed
	byOriginOffset map[int64]dlq.Entry
}

func newDLQFixture(t *testing.T, ctx context.Context) *dlqFixture {
	t.Helper()
	testenv.Integration(t)
	brokers := testenv.Get(testenv.KafkaBrokers)
	t.Setenv("BACKFLOW_KAFKA_BROKERS", brokers) // what the CLI reads
	f := &dlqFixture{cfg: kafka.Conn{Brokers: kafka.ParseBrokers(brokers), ClientID: "backflow-dlq-cli-test"}}
	cl, err := f.cfg.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	f.adm = kadm.NewClient(cl)
	id := testenv.ID("")
	f.dlqTopic, f.originA, f.originB = "dlq-cli-"+id, "dlq-cli-origin-a-"+id, "dlq-cli-origin-b-"+id
	testenv.Topics(t, ctx, f.cfg, 3, f.dlqTopic, f.originA, f.originB)

	w, err := dlq.NewWriter(cl, dlq.Config{Topic: f.dlqTopic, Stage: "ingest"})
	if err != nil {
		t.Fatal(err)
	}
	entries := []struct {
		topic string
		part  int32
		off   int64
		class string
	}{
		{f.originA, 0, 100, "corrupt"},
		{f.originA, 1, 101, "corrupt"},
		{f.originA, 2, 102, "unknown_schema"},
		{f.originB, 0, 103, "unknown_schema"},
		{f.originB, 1, 104, "not_framed"},
	}
	for _, e := range entries {
		o := dlq.Origin{Topic: e.topic, Partition: e.part, Offset: e.off, Timestamp: time.UnixMilli(1767225600000 + e.off),
			Key: fmt.Appendf(nil, "req-%d", e.off), Value: fmt.Appendf(nil, "value-%d", e.off),
			Headers: []kgo.RecordHeader{{Key: "trace-id", Value: fmt.Appendf(nil, "t-%d", e.off)}}}
		if err := w.Write(ctx, o, dlq.WithClass(e.class, fmt.Errorf("record %d is %s\n(line two)", e.off, e.class))); err != nil {
			t.Fatalf("write DLQ entry: %v", err)
		}
	}
	f.byOriginOffset = map[int64]dlq.Entry{}
	err = dlq.Scan(ctx, f.cfg, f.dlqTopic, func(r *kgo.Record) error {
		e, err := dlq.Decode(r)
		f.byOriginOffset[e.Origin.Offset] = e
		return err
	})
	if err != nil || len(f.byOriginOffset) != 5 {
		t.Fatalf("fixture scan: %v, %d entries", err, len(f.byOriginOffset))
	}
	return f
}

// ends returns the sum of the end offsets of topic's partitions.
func (f *dlqFixture) ends(t *testing.T, ctx context.Context, topic string) map[int32]int64 {
	t.Helper()
	lo, err := f.adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = lo.Error()
	}
	if err != nil {
		t.Fatalf("end offsets of %s: %v", topic, err)
	}
	out := map[int32]int64{}
	for p, o := range lo[topic] {
		out[p] = o.Offset
	}
	return out
}

// TestDLQListJSON: `dlq list --json` prints exactly one JSON object per entry, with the
// origin, class, stage, message and key of each, and nothing else; filters narrow it.
func TestDLQListJSON(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	f := newDLQFixture(t, ctx)

	code, out, stderr := runDLQ(t, ctx, "dlq", "list", "--topic", f.dlqTopic, "--json")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d lines, want 5 JSON objects:\n%s", len(lines), out)
	}
	counts := map[string]int{}
	seen := map[int64]bool{}
	for _, line := range lines {
		var j entryJSON
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&j); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		want, ok := f.byOriginOffset[j.OriginOffset]
		if !ok || seen[j.OriginOffset] {
			t.Fatalf("unexpected or repeated entry %+v", j)
		}
		seen[j.OriginOffset] = true
		counts[j.Class]++
		wantMsg := fmt.Sprintf("record %d is %s\n(line two)", j.OriginOffset, want.Class)
		if j.DLQTopic != f.dlqTopic || j.DLQPartition != want.DLQPartition || j.DLQOffset != want.DLQOffset ||
			j.OriginTopic != want.Origin.Topic || j.OriginPartition != want.Origin.Partition ||
			j.Class != want.Class || j.Stage != "ingest" || j.Message != wantMsg ||
			string(j.Key) != fmt.Sprintf("req-%d", j.OriginOffset) || j.ValueBytes != len(want.Origin.Value) ||
			j.OriginTimestamp != time.UnixMilli(1767225600000+j.OriginOffset).UTC().Format(dlq.TimeLayout) ||
			j.Time != want.Time.Format(dlq.TimeLayout) || j.TruncatedFrom != 0 {
			t.Errorf("entry %+v, want %+v", j, want)
		}
	}
	if counts["corrupt"] != 2 || counts["unknown_schema"] != 2 || counts["not_framed"] != 1 || len(counts) != 3 {
		t.Errorf("classes %v, want corrupt 2, unknown_schema 2, not_framed 1", counts)
	}

	// Filters and --limit.
	code, out, _ = runDLQ(t, ctx, "dlq", "list", "--topic", f.dlqTopic, "--json", "--class", "unknown_schema", "--origin-topic", f.originB)
	if code != exitOK || strings.Count(out, "\n") != 1 || !strings.Contains(out, `"origin_offset":103`) {
		t.Errorf("class+origin filter: exit %d, output %q, want only origin offset 103", code, out)
	}
	code, out, _ = runDLQ(t, ctx, "dlq", "list", "--topic", f.dlqTopic, "--json", "--limit", "2")
	if code != exitOK || strings.Count(out, "\n") != 2 {
		t.Errorf("--limit 2: exit %d, %d lines", code, strings.Count(out, "\n"))
	}
}

// TestDLQListText: the text listing has one line per entry (messages kept on one line) and
// the counts per class with the total.
func TestDLQListText(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	f := newDLQFixture(t, ctx)
	code, out, stderr := runDLQ(t, ctx, "dlq", "list", "--topic", f.dlqTopic, "--limit", "4")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	entryLines, counts := 0, map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) >= 6 && strings.Contains(fields[1], "dlq-cli-origin"):
			entryLines++
			e := f.byOriginOffset[parseTrailingOffset(t, fields[1])]
			if fields[0] != fmt.Sprintf("%d/%d", e.DLQPartition, e.DLQOffset) || fields[2] != e.Class || fields[3] != "ingest" ||
				!strings.HasSuffix(sc.Text(), "(line two)") {
				t.Errorf("line %q does not match entry %+v", sc.Text(), e)
			}
		case len(fields) >= 2 && fields[0] != "DLQ" && fields[0] != "CLASS":
			counts[fields[0]] = strings.Join(fields[1:], " ")
		}
	}
	want := map[string]string{"corrupt": "2", "not_framed": "1", "unknown_schema": "2", "total": "5 (4 shown)"}
	if entryLines != 4 || fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Errorf("%d entry lines, counts %v; want 4 and %v\n%s", entryLines, counts, want, out)
	}
}

func parseTrailingOffset(t *testing.T, s string) int64 {
	t.Helper()
	var off int64
	if _, err := fmt.Sscan(s[strings.LastIndex(s, "/")+1:], &off); err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return off
}

// TestDLQListMissingAndEmpty: a missing topic exits 1 naming it; an empty one lists nothing.
func TestDLQListMissingAndEmpty(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	f := newDLQFixture(t, ctx)
	missing := f.dlqTopic + "-missing"
	code, _, _ := runDLQ(t, ctx, "dlq", "list", "--topic", missing)
	if code != exitFailure {
		t.Errorf("missing topic: exit %d, want %d", code, exitFailure)
	}
	root := newRootCmd()
	root.SetOut(new(bytes.Buffer))
	root.SetArgs([]string{"dlq", "list", "--topic", missing})
	if err := root.ExecuteContext(ctx); !errors.Is(err, dlq.ErrNoTopic) || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing topic error %v, want ErrNoTopic naming %s", err, missing)
	}
	code, out, _ := runDLQ(t, ctx, "dlq", "list", "--topic", f.originA) // empty
	if code != exitOK || !strings.Contains(out, "no entries in "+f.originA) || !strings.Contains(out, "total  0") {
		t.Errorf("empty topic: exit %d, output %q", code, out)
	}
	code, out, _ = runDLQ(t, ctx, "dlq", "list", "--topic", f.originA, "--json")
	if code != exitOK || out != "" {
		t.Errorf("empty topic --json: exit %d, output %q, want none", code, out)
	}
}

// TestDLQRedriveDryRunProducesNothing: without --execute, redrive prints the plan and the
// origin topics' end offsets do not move.
func TestDLQRedriveDryRunProducesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	f := newDLQFixture(t, ctx)
	beforeA, beforeB := f.ends(t, ctx, f.originA), f.ends(t, ctx, f.originB)

	code, out, stderr := runDLQ(t, ctx, "dlq", "redrive", "--all", "--topic", f.dlqTopic)
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if n := strings.Count(out, "would re-drive "+f.dlqTopic+"/"); n != 5 || !strings.Contains(out, "dry run: would re-drive 5 record(s)") {
		t.Errorf("dry run output (%d plan lines):\n%s", n, out)
	}
	for off, e := range f.byOriginOffset {
		line := fmt.Sprintf("would re-drive %s/%d/%d -> %s/%d (class %s", f.dlqTopic, e.DLQPartition, e.DLQOffset, e.Origin.Topic, e.Origin.Partition, e.Class)
		if !strings.Contains(out, line) {
			t.Errorf("origin offset %d: no line %q", off, line)
		}
	}
	// Give a stray produce time to land before looking.
	time.Sleep(500 * time.Millisecond)
	afterA, afterB := f.ends(t, ctx, f.originA), f.ends(t, ctx, f.originB)
	if fmt.Sprint(beforeA, beforeB) != fmt.Sprint(afterA, afterB) {
		t.Errorf("dry run moved end offsets: %v %v -> %v %v", beforeA, beforeB, afterA, afterB)
	}
	for _, ends := range []map[int32]int64{afterA, afterB} {
		for p, end := range ends {
			if end != 0 {
				t.Errorf("origin partition %d has end offset %d after a dry run", p, end)
			}
		}
	}
}

// TestDLQRedriveExecute: --execute re-produces exactly the selected entries to their origin
// topics and partitions with count 1; an empty selection and unknown offsets exit 1.
func TestDLQRedriveExecute(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	f := newDLQFixture(t, ctx)

	// Nothing selected: exit 1, nothing produced.
	code, _, stderr := runDLQ(t, ctx, "dlq", "redrive", "--class", "oversized", "--topic", f.dlqTopic, "--execute")
	if code != exitFailure || !strings.Contains(stderr, "nothing selected") {
		t.Errorf("empty selection: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = runDLQ(t, ctx, "dlq", "redrive", "--offsets", "0:999", "--topic", f.dlqTopic, "--execute")
	if code != exitFailure || !strings.Contains(stderr, "0:999: no such entry") {
		t.Errorf("unknown offset: exit %d, stderr %q", code, stderr)
	}

	// unknown_schema is one entry from each origin topic.
	code, out, stderr := runDLQ(t, ctx, "dlq", "redrive", "--class", "unknown_schema", "--topic", f.dlqTopic, "--execute")
	if code != exitOK || !strings.Contains(out, "re-drove 2 record(s)") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	for _, c := range []struct {
		topic string
		off   int64
	}{{f.originA, 102}, {f.originB, 103}} {
		e := f.byOriginOffset[c.off]
		var got []*kgo.Record
		if err := dlq.Scan(ctx, f.cfg, c.topic, func(r *kgo.Record) error { got = append(got, r); return nil }); err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 {
			t.Fatalf("%s has %d records, want the 1 re-driven", c.topic, len(got))
		}
		r := got[0]
		hs := map[string]string{}
		for _, hd := range r.Headers {
			hs[hd.Key] = string(hd.Value)
		}
		from := fmt.Sprintf("%s/%d/%d", f.dlqTopic, e.DLQPartition, e.DLQOffset)
		if r.Partition != e.Origin.Partition || string(r.Key) != fmt.Sprintf("req-%d", c.off) || string(r.Value) != fmt.Sprintf("value-%d", c.off) ||
			len(r.Headers) != 4 || r.Headers[0].Key != "trace-id" || hs["trace-id"] != fmt.Sprintf("t-%d", c.off) ||
			hs[dlq.HeaderRedriveFrom] != from || hs[dlq.HeaderRedriveCount] != "1" || hs[dlq.HeaderRedriveTime] == "" {
			t.Errorf("%s: record %d/%d key %q value %q headers %v; want entry %s", c.topic, r.Partition, r.Offset, r.Key, r.Value, r.Headers, from)
		}
		if !strings.Contains(out, fmt.Sprintf("re-drove %s -> %s/%d/%d", from, c.topic, r.Partition, r.Offset)) {
			t.Errorf("output does not report %q:\n%q", fmt.Sprintf("re-drove %s -> %s/%d/%d", from, c.topic, r.Partition, r.Offset), out)
		}
	}
}

// TestDLQTail: tail prints only entries written after it started, as JSON lines, and stops
// after --limit of them with exit 0.
func TestDLQTail(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	f := newDLQFixture(t, ctx) // 5 entries already there: tail must not print them
	cl, err := f.cfg.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	w, err := dlq.NewWriter(cl, dlq.Config{Topic: f.dlqTopic, Stage: "sink-features"})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		code        int
		out, stderr string
	}
	done := make(chan result, 1)
	go func() {
		code, out, stderr := runDLQ(t, ctx, "dlq", "tail", "--topic", f.dlqTopic, "--json", "--class", "invalid", "--limit", "2")
		done <- result{code, out, stderr}
	}()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var res result
	for n := int64(0); ; n++ {
		select {
		case res = <-done:
		case <-tick.C:
			// Alternate a class tail filters out with one it prints.
			class := []string{"corrupt", "invalid"}[n%2]
			o := dlq.Origin{Topic: f.originA, Offset: 1000 + n, Key: fmt.Appendf(nil, "late-%d", n)}
			if err := w.Write(ctx, o, dlq.WithClass(class, errors.New("late"))); err != nil {
				t.Fatal(err)
			}
			continue
		case <-ctx.Done():
			t.Fatal("tail did not stop after --limit 2")
		}
		break
	}
	if res.code != exitOK {
		t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
	}
	// It said what it waited for, on stderr (stdout holds the JSON lines alone). Before, an
	// idle tail printed nothing.
	if want := "waiting for new entries in " + f.dlqTopic + " ("; !strings.HasPrefix(res.stderr, want) ||
		!strings.Contains(res.stderr, ", of class invalid; stops after 2; Ctrl-C stops\n") {
		t.Errorf("stderr %q, want %q… naming the class and the limit", res.stderr, want)
	}
	lines := strings.Split(strings.TrimSuffix(res.out, "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), res.out)
	}
	for _, line := range lines {
		var j entryJSON
		if err := json.Unmarshal([]byte(line), &j); err != nil {
			t.Fatal(err)
		}
		if j.Class != "invalid" || j.Stage != "sink-features" || j.OriginOffset < 1000 || !strings.HasPrefix(string(j.Key), "late-") {
			t.Errorf("tail printed %+v, want only late invalid entries", j)
		}
	}
}

// writeAgain dead-letters the fixture's record at origin offset off once more, as stage.
func (f *dlqFixture) writeAgain(t *testing.T, ctx context.Context, off int64, stage string) {
	t.Helper()
	again := f.byOriginOffset[off]
	cl, err := f.cfg.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	w, err := dlq.NewWriter(cl, dlq.Config{Topic: f.dlqTopic, Stage: stage})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(ctx, again.Origin, dlq.WithClass(again.Class, fmt.Errorf("record %d is %s", off, again.Class))); err != nil {
		t.Fatal(err)
	}
}

// TestDLQListFoldsRepeatedOrigins: after crashes the same bad record is in the DLQ twice; list
// shows it once, the first entry, with repeats 1 and a folded count, as v_dlq_entries does (by
// origin and stage: the same record given up on by another stage is an entry of its own), and
// --all lists both.
func TestDLQListFoldsRepeatedOrigins(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	f := newDLQFixture(t, ctx)
	f.writeAgain(t, ctx, 100, "ingest")          // a repeat: folded
	f.writeAgain(t, ctx, 101, "sink-clickhouse") // another stage: not folded
	first := f.byOriginOffset[100]

	jsonLines := func(args ...string) []entryJSON {
		t.Helper()
		code, out, stderr := runDLQ(t, ctx, append([]string{"dlq", "list", "--topic", f.dlqTopic, "--json"}, args...)...)
		if code != exitOK {
			t.Fatalf("list %v: exit %d, stderr %q", args, code, stderr)
		}
		var js []entryJSON
		for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			var j entryJSON
			if err := json.Unmarshal([]byte(line), &j); err != nil {
				t.Fatalf("line %q: %v", line, err)
			}
			js = append(js, j)
		}
		return js
	}
	folded := jsonLines()
	perOffset, repeats := map[int64]int{}, map[string]int{}
	for _, j := range folded {
		perOffset[j.OriginOffset]++
		if j.Repeats == nil {
			t.Fatalf("entry %+v has no repeats", j)
		}
		repeats[fmt.Sprintf("%d/%s", j.OriginOffset, j.Stage)] = *j.Repeats
		if j.OriginOffset == 100 && (j.DLQPartition != first.DLQPartition || j.DLQOffset != first.DLQOffset) {
			t.Errorf("origin 100 shown at DLQ %d/%d, want the first entry, %d/%d", j.DLQPartition, j.DLQOffset, first.DLQPartition, first.DLQOffset)
		}
	}
	wantRepeats := map[string]int{"100/ingest": 1, "101/ingest": 0, "101/sink-clickhouse": 0, "102/ingest": 0, "103/ingest": 0, "104/ingest": 0}
	if len(folded) != 6 || perOffset[100] != 1 || perOffset[101] != 2 || fmt.Sprint(repeats) != fmt.Sprint(wantRepeats) {
		t.Errorf("folded list: %d entries, per origin offset %v, repeats %v; want 6, origin 100 once, 101 twice (two stages), repeats %v",
			len(folded), perOffset, repeats, wantRepeats)
	}

	all := jsonLines("--all")
	perOffset = map[int64]int{}
	for _, j := range all {
		perOffset[j.OriginOffset]++
		if j.Repeats != nil {
			t.Errorf("--all entry %+v has repeats", j)
		}
	}
	if len(all) != 7 || perOffset[100] != 2 || perOffset[101] != 2 {
		t.Errorf("--all: %d entries, per origin offset %v; want 7, origin 100 and 101 twice each", len(all), perOffset)
	}

	code, out, stderr := runDLQ(t, ctx, "dlq", "list", "--topic", f.dlqTopic)
	line100 := regexp.MustCompile(fmt.Sprintf(`(?m)^%d/%d\s+%s/0/100\s+corrupt\s+ingest\s+\S+\s+1\s+record 100`, first.DLQPartition, first.DLQOffset, f.originA))
	if code != exitOK || !line100.MatchString(out) || !regexp.MustCompile(`(?m)^total\s+6$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^folded\s+1 repeated entry `).MatchString(out) || !regexp.MustCompile(`(?m)^corrupt\s+3$`).MatchString(out) {
		t.Errorf("text list: exit %d, want origin 100 once with REPEATS 1, corrupt 3 (101 by two stages), total 6, folded 1\n%s\n%s", code, out, stderr)
	}
	code, out, _ = runDLQ(t, ctx, "dlq", "list", "--topic", f.dlqTopic, "--all")
	if code != exitOK || strings.Count(out, f.originA+"/0/100 ") != 2 || !regexp.MustCompile(`(?m)^total\s+7$`).MatchString(out) || strings.Contains(out, "folded") {
		t.Errorf("text list --all: exit %d, want origin 100 twice, total 7, nothing folded\n%s", code, out)
	}
}

// TestDLQRedriveSaysWhatItCollapsed: list showed 209 entries and the dry run "would re-drive
// 206" without saying why. The same bad record dead-lettered twice (a retried DLQ write) is
// re-driven once, and redrive now says how many entries it collapsed.
func TestDLQRedriveSaysWhatItCollapsed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	f := newDLQFixture(t, ctx)
	f.writeAgain(t, ctx, 100, "ingest") // originA/0/100 written a second time
	code, out, stderr := runDLQ(t, ctx, "dlq", "list", "--all", "--topic", f.dlqTopic)
	if code != exitOK || !regexp.MustCompile(`(?m)^total\s+6$`).MatchString(out) {
		t.Fatalf("list: exit %d\n%s\n%s", code, out, stderr)
	}
	code, out, stderr = runDLQ(t, ctx, "dlq", "redrive", "--all", "--topic", f.dlqTopic)
	if code != exitOK || !strings.Contains(out, "dry run: would re-drive 5 record(s)") || !strings.Contains(out, "collapsed 1 entry that repeat") {
		t.Fatalf("redrive dry run: exit %d\n%s\n%s", code, out, stderr)
	}
}
