package replay_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/pipelines/replay"
	"github.com/backflowhq/backflow/test/testenv"
)

// timedTopic is a topic whose records have known timestamps: partition p, record k has
// CreateTime base + k hours + 30 min + 7p min, for k in [0, perPartition). base is now - 9 days
// (to the second), so every "now - D" a spec asks for (D a whole number of hours) falls at
// least 16 minutes from any record, whatever the minutes between two tools' "now". (Rounding base
// down to the hour put the cutoff next to a record whenever the test started in the second
// half of an hour, and ours and Kafka's tool, run seconds apart, then disagreed.)
type timedTopic struct {
	topic    string
	base     time.Time
	perPart  int
	logStart map[int32]int64
}

const perPartition = 216 // 9 days of hourly records

func newTimedTopic(t *testing.T, ctx context.Context, kcfg kafka.Conn, adm *kadm.Client, cl *kgo.Client) timedTopic {
	t.Helper()
	tt := timedTopic{topic: testenv.ID("replay-times-"), perPart: perPartition,
		base: time.Now().Add(-9 * 24 * time.Hour).Truncate(time.Second)}
	// Records days old must survive the broker's 7-day retention: keep them forever.
	testenv.TopicSpecs(t, ctx, kcfg, kafka.TopicSpec{Name: tt.topic, Partitions: 3, Configs: map[string]string{"retention.ms": "-1"}})
	var recs []*kgo.Record
	for p := int32(0); p < 3; p++ {
		for k := 0; k < tt.perPart; k++ {
			recs = append(recs, &kgo.Record{Topic: tt.topic, Partition: p, Key: []byte(fmt.Sprintf("k%d", k)),
				Value: []byte("v"), Timestamp: tt.at(p, k)})
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// Partition 0 lost its first 20 records to retention: its log starts at 20.
	var del kadm.Offsets
	del.Add(kadm.Offset{Topic: tt.topic, Partition: 0, At: 20})
	dr, err := adm.DeleteRecords(ctx, del)
	if err == nil {
		err = dr.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	tt.logStart = map[int32]int64{0: 20, 1: 0, 2: 0}
	return tt
}

func (tt timedTopic) at(p int32, k int) time.Time {
	return tt.base.Add(time.Duration(k)*time.Hour + 30*time.Minute + time.Duration(p)*7*time.Minute)
}

// producerClient writes to the partition each record names.
func producerClient(t *testing.T, kcfg kafka.Conn) *kgo.Client {
	t.Helper()
	cl, err := kcfg.NewClient(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// kafkaTool runs Apache Kafka's kafka-consumer-groups (ConsumerGroupCommand from the jars the
// stack resolved) and returns its stdout.
func kafkaTool(t *testing.T, ctx context.Context, brokers string, args ...string) string {
	t.Helper()
	tool := testenv.Get(testenv.KafkaTool)
	if tool == "" {
		root, _ := filepath.Abs("../..")
		tool = filepath.Join(root, "deploy/local/kafka-tool")
	}
	cmd := exec.CommandContext(ctx, tool, append([]string{"consumer-groups", "--bootstrap-server", brokers}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("kafka-consumer-groups %v: %v\nstdout: %s\nstderr: %s", args, err, out.String(), errb.String())
	}
	return out.String()
}

var csvLine = regexp.MustCompile(`^"?([A-Za-z0-9._-]+)"?,(\d+),(\d+)$`)

// parseCSV reads the topic,partition,offset lines of Kafka's --export output (other lines are
// its warnings).
func parseCSV(s string) map[replay.TopicPartition]int64 {
	out := map[replay.TopicPartition]int64{}
	for _, l := range strings.Split(s, "\n") {
		if m := csvLine.FindStringSubmatch(strings.TrimSpace(l)); m != nil {
			p, _ := strconv.Atoi(m[2])
			o, _ := strconv.ParseInt(m[3], 10, 64)
			out[replay.TopicPartition{Topic: m[1], Partition: int32(p)}] = o
		}
	}
	return out
}

// planCSV is our --export of p, which must be byte for byte what Kafka's tool printed from its
// first CSV line on (before it, Kafka's tool prints its warnings to stdout; ours go to stderr):
// the same quoting, the same order of partitions, the same empty line at the end.
func planCSV(t *testing.T, p *replay.Plan, kafkaOut string) map[replay.TopicPartition]int64 {
	t.Helper()
	var b bytes.Buffer
	if err := replay.WriteCSV(&b, p); err != nil {
		t.Fatal(err)
	}
	theirs := kafkaOut
	for i, l := range strings.SplitAfter(kafkaOut, "\n") {
		if csvLine.MatchString(strings.TrimSuffix(l, "\n")) {
			theirs = strings.Join(strings.SplitAfter(kafkaOut, "\n")[i:], "")
			break
		}
	}
	if b.String() != theirs {
		t.Fatalf("--export differs from Kafka's:\nours:    %q\nKafka's: %q", b.String(), theirs)
	}
	return parseCSV(b.String())
}

// specCase is one spec planned by us and by Kafka's tool.
type specCase struct {
	name    string
	ours    []string // our flags, parsed into a Request by the same code as the command
	kafka   []string
	parts   []int32
	want    func(p int32) int64
	warning string // a warning the plan must carry ("" none)
}

// match plans c for group (which committed these offsets on tt) with our code and with Kafka's
// tool, and checks both plans against c and each other.
func (c specCase) match(t *testing.T, ctx context.Context, cl *kgo.Client, brokers string, tt timedTopic, group string, committed map[int32]int64) {
	t.Run(c.name, func(t *testing.T) {
		req, err := replay.ParseArgs(group, c.ours)
		if err != nil {
			t.Fatal(err)
		}
		p, err := replay.Build(ctx, cl, req)
		if err != nil {
			t.Fatal(err)
		}
		raw := kafkaTool(t, ctx, brokers, append([]string{"--group", group, "--reset-offsets", "--dry-run", "--export"}, c.kafka...)...)
		theirs := parseCSV(raw)
		ours := planCSV(t, p, raw)
		if len(ours) != len(c.parts) || len(theirs) != len(c.parts) {
			t.Fatalf("partitions: ours %v, Kafka's %v (it printed %q), want %v", ours, theirs, raw, c.parts)
		}
		for _, part := range c.parts {
			tp := replay.TopicPartition{Topic: tt.topic, Partition: part}
			if w := c.want(part); ours[tp] != w || theirs[tp] != w {
				t.Fatalf("%s: ours %d, Kafka's %d, from the timestamps %d", tp, ours[tp], theirs[tp], w)
			}
		}
		if c.warning != "" && !strings.Contains(strings.Join(p.Warnings, "\n"), c.warning) {
			t.Fatalf("warnings %q lack %q", p.Warnings, c.warning)
		}
		if c.warning == "" && len(p.Warnings) > 0 {
			t.Fatalf("unexpected warnings %q", p.Warnings)
		}
		for _, r := range p.Rows {
			wantCur, reread := int64(-1), int64(0)
			if o, ok := committed[r.Partition]; ok {
				wantCur, reread = o, o-r.Target
			}
			if r.Current != wantCur || r.Reread() != reread {
				t.Fatalf("%s:%d current %d re-read %d", r.Topic, r.Partition, r.Current, r.Reread())
			}
			// Timestamps at both ends: the record the group consumed last and the first it will read.
			if r.Current > r.LogStart && !r.CurrentTime.Equal(tt.at(r.Partition, int(r.Current-1))) {
				t.Fatalf("%s:%d current time %v, want %v", r.Topic, r.Partition, r.CurrentTime, tt.at(r.Partition, int(r.Current-1)))
			}
			if r.Target >= r.LogStart && r.Target < r.LogEnd && !r.TargetTime.Equal(tt.at(r.Partition, int(r.Target))) {
				t.Fatalf("%s:%d target time %v, want %v", r.Topic, r.Partition, r.TargetTime, tt.at(r.Partition, int(r.Target)))
			}
			if r.Target == r.LogEnd && !r.TargetTime.IsZero() {
				t.Fatalf("%s:%d target at the log end has a time %v", r.Topic, r.Partition, r.TargetTime)
			}
		}
		t.Logf("%s: ours = Kafka's = %v", c.name, ours)
	})

}

// TestSpecsMatchKafkaTool plans every spec against a topic with known timestamps, for a group
// with committed offsets on every partition and for one with commits on some (one of them out
// of retention), and asks Apache Kafka's own kafka-consumer-groups --reset-offsets --dry-run
// --export for the same group and spec: the target offsets must be the same, and equal to
// what the timestamps and commits say. A clamped shift, a --to-current and a --from-file
// with a scope are then executed, ours on one group and Kafka's on an identical second group:
// the committed offsets must be the same.
func TestSpecsMatchKafkaTool(t *testing.T) {
	kcfg := testenv.Kafka(t, "replay-kafkatool-test")
	// Each case starts Kafka's JVM tool once: about 5 s alone, up to 20 s on a loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cl := producerClient(t, kcfg)
	adm := kadm.NewClient(cl)
	tt := newTimedTopic(t, ctx, kcfg, adm, cl)
	brokers := kcfg.Endpoint()

	group := testenv.ID("replay-g-")
	committed := map[int32]int64{0: 100, 1: 150, 2: 60}
	// partial has committed on partitions 0 (before the log start, 20) and 2, not on 1.
	partial, partialCommitted := testenv.ID("replay-gp-"), map[int32]int64{0: 5, 2: 60}
	commit := func(g string, committed map[int32]int64) {
		testenv.Groups(t, kcfg, g)
		var os kadm.Offsets
		for p, o := range committed {
			os.Add(kadm.Offset{Topic: tt.topic, Partition: p, At: o, LeaderEpoch: -1})
		}
		if err := adm.CommitAllOffsets(ctx, g, os); err != nil {
			t.Fatal(err)
		}
	}
	commit(group, committed)
	commit(partial, partialCommitted)

	plan := filepath.Join(t.TempDir(), "plan.csv")
	if err := os.WriteFile(plan, []byte(fmt.Sprintf("%[1]s,0,3\n%[1]s,1,120\n%[1]s,2,999\n", tt.topic)), 0o644); err != nil {
		t.Fatal(err)
	}
	// plan02 leaves partition 1 out: with --topic T:1 or --all-topics the scope and the file differ.
	plan02 := filepath.Join(t.TempDir(), "plan02.csv")
	if err := os.WriteFile(plan02, []byte(fmt.Sprintf("%[1]s,0,3\n%[1]s,2,999\n", tt.topic)), 0o644); err != nil {
		t.Fatal(err)
	}
	kafkaTime := func(tm time.Time) string { return tm.UTC().Format("2006-01-02T15:04:05.000Z07:00") }
	at100 := tt.base.Add(100 * time.Hour) // records k >= 100 are at or after it
	all := []int32{0, 1, 2}
	// want computes the expected target from the timestamps: the first k at or after ts.
	firstAt := func(p int32, ts time.Time) int64 {
		for k := 0; k < tt.perPart; k++ {
			if !tt.at(p, k).Before(ts) {
				return max(int64(k), tt.logStart[p])
			}
		}
		return int64(tt.perPart)
	}
	clamp := func(p int32, o int64) int64 { return min(max(o, tt.logStart[p]), int64(tt.perPart)) }
	now := time.Now()
	t.Setenv("TZ", "Asia/Kolkata") // Kafka's tool (a JVM) and ours run in a zone that is not UTC
	cases := []specCase{
		{"to-earliest all-topics", []string{"--to-earliest", "--all-topics"}, []string{"--to-earliest", "--all-topics"}, all,
			func(p int32) int64 { return tt.logStart[p] }, ""},
		{"to-latest", []string{"--to-latest", "--topic", tt.topic}, []string{"--to-latest", "--topic", tt.topic}, all,
			func(int32) int64 { return int64(tt.perPart) }, ""},
		{"to-datetime some partitions", []string{"--to-datetime", at100.UTC().Format(time.RFC3339), "--topic", tt.topic + ":0,2"},
			[]string{"--to-datetime", kafkaTime(at100), "--topic", tt.topic + ":0,2"}, []int32{0, 2},
			func(p int32) int64 { return firstAt(p, at100) }, ""},
		// Kafka's own forms, the same string to both tools. Without a zone Kafka's tool reads UTC
		// whatever the machine's zone: TZ is set for both processes.
		{"to-datetime zone-less", []string{"--to-datetime", at100.UTC().Format("2006-01-02T15:04:05.000"), "--all-topics"},
			[]string{"--to-datetime", at100.UTC().Format("2006-01-02T15:04:05.000"), "--all-topics"}, all,
			func(p int32) int64 { return firstAt(p, at100) }, ""},
		{"to-datetime +02:00", []string{"--to-datetime", at100.In(time.FixedZone("", 7200)).Format("2006-01-02T15:04:05.000-07:00"), "--all-topics"},
			[]string{"--to-datetime", at100.In(time.FixedZone("", 7200)).Format("2006-01-02T15:04:05.000-07:00"), "--all-topics"}, all,
			func(p int32) int64 { return firstAt(p, at100) }, ""},
		{"to-datetime -0500", []string{"--to-datetime", at100.In(time.FixedZone("", -5*3600)).Format("2006-01-02T15:04:05.000-0700"), "--all-topics"},
			[]string{"--to-datetime", at100.In(time.FixedZone("", -5*3600)).Format("2006-01-02T15:04:05.000-0700"), "--all-topics"}, all,
			func(p int32) int64 { return firstAt(p, at100) }, ""},
		{"to-datetime +05", []string{"--to-datetime", at100.In(time.FixedZone("", 5*3600)).Format("2006-01-02T15:04:05.000-07"), "--all-topics"},
			[]string{"--to-datetime", at100.In(time.FixedZone("", 5*3600)).Format("2006-01-02T15:04:05.000-07"), "--all-topics"}, all,
			func(p int32) int64 { return firstAt(p, at100) }, ""},
		{"to-datetime -03:30", []string{"--to-datetime", at100.In(time.FixedZone("", -(3*3600 + 1800))).Format("2006-01-02T15:04:05.000-07:00"), "--all-topics"},
			[]string{"--to-datetime", at100.In(time.FixedZone("", -(3*3600 + 1800))).Format("2006-01-02T15:04:05.000-07:00"), "--all-topics"}, all,
			func(p int32) int64 { return firstAt(p, at100) }, ""},
		{"to-datetime before retention", []string{"--to-datetime", tt.base.Add(-time.Hour).Format(time.RFC3339), "--all-topics"},
			[]string{"--to-datetime", kafkaTime(tt.base.Add(-time.Hour)), "--all-topics"}, all,
			func(p int32) int64 { return tt.logStart[p] }, "clamped to the log start"},
		{"to-datetime after the end", []string{"--to-datetime", now.Add(time.Hour).UTC().Format(time.RFC3339), "--all-topics"},
			[]string{"--to-datetime", kafkaTime(now.Add(time.Hour)), "--all-topics"}, all,
			func(int32) int64 { return int64(tt.perPart) }, "clamped to the log end"},
		{"by-duration 6h", []string{"--by-duration", "6h", "--all-topics"}, []string{"--by-duration", "PT6H", "--all-topics"}, all,
			func(p int32) int64 { return firstAt(p, now.Add(-6*time.Hour)) }, ""},
		{"by-duration 7d", []string{"--by-duration", "7d", "--all-topics"}, []string{"--by-duration", "P7D", "--all-topics"}, all,
			func(p int32) int64 { return firstAt(p, now.Add(-7*24*time.Hour)) }, ""},
		{"by-duration P1DT6H", []string{"--by-duration", "P1DT6H", "--all-topics"}, []string{"--by-duration", "P1DT6H", "--all-topics"}, all,
			func(p int32) int64 { return firstAt(p, now.Add(-30*time.Hour)) }, ""},
		{"shift-by back", []string{"--shift-by", "-30", "--all-topics"}, []string{"--shift-by", "-30", "--all-topics"}, all,
			func(p int32) int64 { return clamp(p, committed[p]-30) }, ""},
		{"shift-by past the start", []string{"--shift-by", "-90", "--all-topics"}, []string{"--shift-by", "-90", "--all-topics"}, all,
			func(p int32) int64 { return clamp(p, committed[p]-90) }, "out of retention"},
		{"shift-by past the end", []string{"--shift-by", "100", "--all-topics"}, []string{"--shift-by", "100", "--all-topics"}, all,
			func(p int32) int64 { return clamp(p, committed[p]+100) }, "past the log end"},
		{"to-offset clamped to the start", []string{"--to-offset", "5", "--all-topics"}, []string{"--to-offset", "5", "--all-topics"}, all,
			func(p int32) int64 { return clamp(p, 5) }, "out of retention"},
		{"to-offset past the end", []string{"--to-offset", "100000", "--topic", tt.topic + ":1"}, []string{"--to-offset", "100000", "--topic", tt.topic + ":1"}, []int32{1},
			func(int32) int64 { return int64(tt.perPart) }, "past the log end"},
		{"from-file", []string{"--from-file", plan}, []string{"--from-file", plan}, all,
			func(p int32) int64 { return clamp(p, map[int32]int64{0: 3, 1: 120, 2: 999}[p]) }, "clamped"},
		// With a scope, Kafka's tool checks the scope's partitions exist and moves the file's.
		{"from-file topic", []string{"--from-file", plan, "--topic", tt.topic}, []string{"--from-file", plan, "--topic", tt.topic}, all,
			func(p int32) int64 { return clamp(p, map[int32]int64{0: 3, 1: 120, 2: 999}[p]) }, "clamped"},
		{"from-file topic, other partitions", []string{"--from-file", plan02, "--topic", tt.topic + ":1"}, []string{"--from-file", plan02, "--topic", tt.topic + ":1"},
			[]int32{0, 2}, func(p int32) int64 { return clamp(p, map[int32]int64{0: 3, 2: 999}[p]) }, "in the file but not in the scope, move"},
		{"from-file all-topics", []string{"--from-file", plan02, "--all-topics"}, []string{"--from-file", plan02, "--all-topics"}, []int32{0, 2},
			func(p int32) int64 { return clamp(p, map[int32]int64{0: 3, 2: 999}[p]) }, "in the scope but not in the file, stay"},
		{"to-current", []string{"--to-current", "--topic", tt.topic + ":0,2"}, []string{"--to-current", "--topic", tt.topic + ":0,2"}, []int32{0, 2},
			func(p int32) int64 { return committed[p] }, ""},
	}
	// --to-current where the group has no commit (the log end) and one out of retention (kept).
	partialCases := []specCase{
		{"to-current partial", []string{"--to-current", "--topic", tt.topic}, []string{"--to-current", "--topic", tt.topic}, all,
			func(p int32) int64 { return map[int32]int64{0: 5, 1: int64(tt.perPart), 2: 60}[p] }, "no committed offset: set to the log end"},
		{"to-current partial all-topics", []string{"--to-current", "--all-topics"}, []string{"--to-current", "--all-topics"}, []int32{0, 2},
			func(p int32) int64 { return partialCommitted[p] }, "before the log start (20, out of retention): kept"},
		{"to-current partial some partitions", []string{"--to-current", "--topic", tt.topic + ":1,2"}, []string{"--to-current", "--topic", tt.topic + ":1,2"}, []int32{1, 2},
			func(p int32) int64 { return map[int32]int64{1: int64(tt.perPart), 2: 60}[p] }, "no committed offset"},
	}
	runs := []struct {
		group     string
		committed map[int32]int64
		cases     []specCase
	}{{group, committed, cases}, {partial, partialCommitted, partialCases}}
	for _, run := range runs {
		for _, c := range run.cases {
			c.match(t, ctx, cl, brokers, tt, run.group, run.committed)
		}
	}

	// Executed: ours on one group, Kafka's on an identical one (a clamped shift; --to-current
	// keeping an offset out of retention and setting the log end where there was no commit;
	// --from-file moving partitions outside its scope and leaving the scope's partition 1).
	for _, c := range []struct {
		name        string
		from        map[int32]int64 // the commits both groups start from
		ours, kafka []string
	}{
		{"shift", committed, []string{"--shift-by", "-90", "--topic", tt.topic}, []string{"--shift-by", "-90", "--topic", tt.topic}},
		{"current", partialCommitted, []string{"--to-current", "--topic", tt.topic}, []string{"--to-current", "--topic", tt.topic}},
		{"file", committed, []string{"--from-file", plan02, "--topic", tt.topic + ":1"}, []string{"--from-file", plan02, "--topic", tt.topic + ":1"}},
	} {
		ga, gb := group+"-a-"+c.name, group+"-b-"+c.name
		commit(ga, c.from)
		commit(gb, c.from)
		req, err := replay.ParseArgs(ga, c.ours)
		if err != nil {
			t.Fatal(err)
		}
		p, err := replay.Build(ctx, cl, req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := replay.Apply(ctx, cl, p, replay.Config{}); err != nil {
			t.Fatal(err)
		}
		kafkaTool(t, ctx, brokers, append([]string{"--group", gb, "--reset-offsets", "--execute"}, c.kafka...)...)
		oa, err := adm.FetchOffsets(ctx, ga)
		if err != nil {
			t.Fatal(err)
		}
		ob, err := adm.FetchOffsets(ctx, gb)
		if err != nil {
			t.Fatal(err)
		}
		// Every partition: the plan's target where it has a row, else where the group started.
		want := map[int32]int64{}
		for part, o := range c.from {
			want[part] = o
		}
		for _, r := range p.Rows {
			want[r.Partition] = r.Target
		}
		for part := int32(0); part < 3; part++ {
			a, okA := oa.Lookup(tt.topic, part)
			b, okB := ob.Lookup(tt.topic, part)
			w, okW := want[part]
			if okA != okW || okB != okW || a.At != b.At || okW && a.At != w {
				t.Fatalf("%v executed: partition %d committed %d, %v (ours) vs %d, %v (Kafka's), want %d, %v", c.ours, part, a.At, okA, b.At, okB, w, okW)
			}
		}
		t.Logf("%v executed: both groups committed %v", c.ours, p.Offsets())
	}
}
