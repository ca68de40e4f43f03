package replay

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want time.Duration
	}{
		{"6h", 6 * time.Hour}, {"7d", 7 * 24 * time.Hour}, {"1d12h", 36 * time.Hour}, {"90m", 90 * time.Minute},
		{"P1DT6H", 30 * time.Hour}, {"PT30M", 30 * time.Minute}, {"P7D", 7 * 24 * time.Hour}, {"PT1.5S", 1500 * time.Millisecond},
		{"pt6h", 6 * time.Hour},
	} {
		got, err := ParseDuration(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
		// The ISO form we hand Kafka's tool reads back to the same duration.
		if back, err := ParseDuration(FormatDuration(got)); err != nil || back != got {
			t.Errorf("FormatDuration(%v) = %q reads back as %v, %v", got, FormatDuration(got), back, err)
		}
	}
	for _, bad := range []string{"", "P", "PT", "P1W", "-6h", "0h", "6x", "P1DT", "d"} {
		if _, err := ParseDuration(bad); !errors.Is(err, ErrBadRequest) {
			t.Errorf("ParseDuration(%q): %v, want ErrBadRequest", bad, err)
		}
	}
}

// TestKafkaOrder: the order of partitions in Kafka's --export is a java.util.HashMap's. The
// wanted orders were printed by Java 17 iterating a HashMap of keys with TopicPartition's
// hashCode, filled in (topic, partition) order.
func TestKafkaOrder(t *testing.T) {
	for _, tt := range []struct {
		topics []string
		parts  int32
		want   string
	}{
		{[]string{"replay-times-1796184616434596441"}, 3, "replay-times-1796184616434596441:2 replay-times-1796184616434596441:1 replay-times-1796184616434596441:0"},
		{[]string{"gateway-log", "model-inference-result"}, 3, "gateway-log:1 gateway-log:2 gateway-log:0 model-inference-result:0 model-inference-result:2 model-inference-result:1"},
		{[]string{"backflow.enriched"}, 12, "backflow.enriched:3 backflow.enriched:4 backflow.enriched:5 backflow.enriched:6 backflow.enriched:0 backflow.enriched:1 " +
			"backflow.enriched:2 backflow.enriched:11 backflow.enriched:7 backflow.enriched:8 backflow.enriched:9 backflow.enriched:10"},
		{[]string{"backflow.dlq", "backflow.enriched", "gateway-log", "model-inference-result"}, 6, "backflow.dlq:1 backflow.enriched:3 gateway-log:1 backflow.dlq:0 " +
			"backflow.enriched:4 gateway-log:2 backflow.enriched:5 gateway-log:3 gateway-log:4 backflow.enriched:0 backflow.enriched:1 backflow.enriched:2 gateway-log:0 " +
			"model-inference-result:0 model-inference-result:2 model-inference-result:1 gateway-log:5 model-inference-result:4 model-inference-result:3 " +
			"model-inference-result:5 backflow.dlq:5 backflow.dlq:4 backflow.dlq:3 backflow.dlq:2"},
	} {
		var rows []Row
		for _, topic := range tt.topics {
			for p := range tt.parts {
				rows = append(rows, Row{Topic: topic, Partition: p})
			}
		}
		var got []string
		for _, r := range KafkaOrder(rows) {
			got = append(got, fmt.Sprintf("%s:%d", r.Topic, r.Partition))
		}
		if strings.Join(got, " ") != tt.want {
			t.Errorf("%v × %d partitions:\ngot  %s\nwant %s", tt.topics, tt.parts, strings.Join(got, " "), tt.want)
		}
	}
}

// TestParseDatetime: every form Kafka's kafka-consumer-groups --to-datetime accepts (its
// YYYY-MM-DDTHH:mm:SS.sss, zone-less meaning UTC, with Z, ±HH:MM, ±HHMM or ±HH, one-digit
// fields), and RFC 3339; a bad field is refused.
func TestParseDatetime(t *testing.T) {
	want := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		in   string
		want time.Time
	}{
		{"2026-11-02T10:00:00.000", want},
		{"2026-11-02T10:00:00.000Z", want},
		{"2026-11-02T12:00:00.000+02:00", want},
		{"2026-11-02T12:00:00.000+0200", want},
		{"2026-11-02T12:00:00.000+02", want},
		{"2026-11-02T04:30:00.000-05:30", want},
		{"2026-11-02T15:30:00.000+0530", want},
		{"2026-11-2T10:0:0.000Z", want},
		{" 2026-11-02T10:00:00Z ", want},
		{"2026-11-02T10:00:00", want},
		{"2026-11-02T10:00:00.250Z", want.Add(250 * time.Millisecond)},
		{"2026-11-02T10:00:00.5Z", want.Add(500 * time.Millisecond)},
		{"2026-11-02T10:00:00.123456789Z", want.Add(123456789)},
	} {
		got, err := ParseDatetime(tt.in)
		if err != nil || !got.Equal(tt.want) {
			t.Errorf("ParseDatetime(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "yesterday", "2026-11-02", "2026-11-02 10:00:00", "2026-11-02t10:00:00.000Z", "2026-11-02T10:00:00.000z",
		"2026-13-02T10:00:00.000", "2026-02-30T10:00:00.000", "2026-11-02T24:00:00.000", "2026-11-02T10:60:00.000", "2026-11-02T10:00:00.000+19:00",
		"2026-11-02T10:00:00.000Z junk", "26-11-02T10:00:00.000Z", "2026-11-02T10:00:00.000+2"} {
		if _, err := ParseDatetime(bad); !errors.Is(err, ErrBadRequest) {
			t.Errorf("ParseDatetime(%q): %v, want ErrBadRequest", bad, err)
		}
	}
}

func TestParseTopic(t *testing.T) {
	ts, err := ParseTopic("gateway-log:0,2")
	if err != nil || ts.Topic != "gateway-log" || len(ts.Partitions) != 2 || ts.Partitions[1] != 2 {
		t.Fatalf("%+v %v", ts, err)
	}
	if ts, err := ParseTopic("backflow.enriched"); err != nil || ts.Partitions != nil {
		t.Fatalf("%+v %v", ts, err)
	}
	for _, bad := range []string{"", "a b", "t:", "t:x", "t:-1", "t:0,,1"} {
		if _, err := ParseTopic(bad); !errors.Is(err, ErrBadRequest) {
			t.Errorf("ParseTopic(%q): %v", bad, err)
		}
	}
}

func TestPlanFileRoundTrip(t *testing.T) {
	p := &Plan{Rows: []Row{{Topic: "gateway-log", Partition: 0, Target: 12}, {Topic: "backflow.enriched", Partition: 2, Target: 7}}}
	var b bytes.Buffer
	if err := WriteCSV(&b, p); err != nil {
		t.Fatal(err)
	}
	// Kafka's exporter quotes names holding '-', and so do we; its order is its HashMap's, and it
	// ends with an empty line.
	if b.String() != "\"gateway-log\",0,12\nbackflow.enriched,2,7\n\n" {
		t.Fatalf("export %q", b.String())
	}
	got, err := ParsePlanFile(&b, "g")
	if err != nil || len(got) != 2 || got[TopicPartition{"gateway-log", 0}] != 12 || got[TopicPartition{"backflow.enriched", 2}] != 7 {
		t.Fatalf("read back %v, %v", got, err)
	}
	// The multi-group form keeps the named group's lines.
	got, err = ParsePlanFile(strings.NewReader("g,t,0,5\nother,t,1,9\n\ng,t,1,6\n"), "g")
	if err != nil || len(got) != 2 || got[TopicPartition{"t", 1}] != 6 {
		t.Fatalf("with groups: %v, %v", got, err)
	}
	for _, bad := range []string{"", "t,0\n", "t,0,1\ng,t,0,1\n", "t,x,1\n", "t,0,-1\n", "t,0,1\nt,0,2\n", "other,t,0,1\n"} {
		if _, err := ParsePlanFile(strings.NewReader(bad), "g"); !errors.Is(err, ErrBadRequest) {
			t.Errorf("ParsePlanFile(%q): %v", bad, err)
		}
	}
}

func TestMeasure(t *testing.T) {
	t0 := time.Unix(1000, 0)
	base := Base{{"t", 0}: 0, {"t", 1}: 100}
	prev := GroupStatus{Time: t0, Partitions: []PartitionLag{{Topic: "t", Partition: 0, Committed: 100, End: 400, Lag: 300}, {Topic: "t", Partition: 1, Committed: 100, End: 200, Lag: 100}}}
	cur := GroupStatus{Time: t0.Add(2 * time.Second), Partitions: []PartitionLag{{Topic: "t", Partition: 0, Committed: 300, End: 400, Lag: 100}, {Topic: "t", Partition: 1, Committed: 200, End: 200, Lag: 0}}}
	pr := Measure(base, &prev, cur)
	// done: 300 on p0 + 100 on p1; moved in 2 s: 200 + 100 -> 150/s; 100 left -> ETA 666ms.
	if pr.Done != 400 || pr.Total != 500 || pr.Lag != 100 || pr.Rate != 150 || pr.ETA.Round(time.Millisecond) != 667*time.Millisecond {
		t.Fatalf("%+v", pr)
	}
	if f := pr.Fraction(); f != 0.8 {
		t.Fatalf("fraction %v", f)
	}
	if pr := Measure(base, nil, cur); pr.Rate != 0 || pr.ETA != 0 {
		t.Fatalf("no previous snapshot: %+v", pr)
	}
}

func TestRequestValidate(t *testing.T) {
	for _, ok := range []Request{
		{Group: "g", Scope: Scope{AllTopics: true}, Spec: Spec{Kind: ToEarliest}},
		{Group: "g", Scope: Scope{Topics: []TopicScope{{Topic: "t"}}}, Spec: Spec{Kind: ToCurrent}},
		// Kafka's tool takes --from-file with a scope, or without.
		{Group: "g", Scope: Scope{AllTopics: true}, Spec: Spec{Kind: FromFile, File: map[TopicPartition]int64{{"t", 0}: 1}}},
		{Group: "g", Scope: Scope{Topics: []TopicScope{{Topic: "t", Partitions: []int32{1}}}}, Spec: Spec{Kind: FromFile, File: map[TopicPartition]int64{{"t", 0}: 1}}},
		{Group: "g", Spec: Spec{Kind: FromFile, File: map[TopicPartition]int64{{"t", 0}: 1}}},
	} {
		if err := ok.Validate(); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
	for name, r := range map[string]Request{
		"no group":            {Scope: Scope{AllTopics: true}, Spec: Spec{Kind: ToEarliest}},
		"no spec":             {Group: "g", Scope: Scope{AllTopics: true}},
		"two scopes":          {Group: "g", Scope: Scope{AllTopics: true, Topics: []TopicScope{{Topic: "t"}}}, Spec: Spec{Kind: ToEarliest}},
		"loop in scope":       {Group: "g", Scope: Scope{Topics: []TopicScope{{Topic: "g-loop"}}}, Spec: Spec{Kind: ToEarliest}, ToEnd: []string{"g-loop"}},
		"file and two scopes": {Group: "g", Scope: Scope{AllTopics: true, Topics: []TopicScope{{Topic: "t"}}}, Spec: Spec{Kind: FromFile, File: map[TopicPartition]int64{{"t", 0}: 1}}},
		"file without a row":  {Group: "g", Scope: Scope{AllTopics: true}, Spec: Spec{Kind: FromFile}},
		"to-current no scope": {Group: "g", Spec: Spec{Kind: ToCurrent}},
		"unknown spec":        {Group: "g", Scope: Scope{AllTopics: true}, Spec: Spec{Kind: ToCurrent + 1}},
	} {
		if err := r.Validate(); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestCompleteSaysTheResetStateScope: --reset-state without a scope moves the enriched topic,
// and says so; before, it planned it silently where a plain replay is refused for want of a
// scope.
func TestCompleteSaysTheResetStateScope(t *testing.T) {
	req := Request{Group: "backflow-features", Spec: Spec{Kind: ToEarliest}}
	got, warnings, err := Complete(req, Options{ResetState: true})
	if err != nil {
		t.Fatal(err)
	}
	if s := got.Scope.String(); s != "--topic backflow.enriched" {
		t.Errorf("scope %q, want --topic backflow.enriched", s)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "no scope given: --reset-state moves backflow.enriched") || !strings.Contains(warnings[0], "backflow-features-loop to its end") {
		t.Errorf("warnings %q, want one saying the scope it chose", warnings)
	}
	req.Scope = Scope{AllTopics: true}
	if _, warnings, err := Complete(req, Options{ResetState: true}); err != nil || len(warnings) != 0 {
		t.Errorf("with --all-topics: %q %v, want no warning", warnings, err)
	}
	if _, _, err := Complete(Request{Group: "g", Spec: Spec{Kind: ToEarliest}}, Options{}); !errors.Is(err, ErrBadRequest) {
		t.Errorf("a plain replay without a scope: %v, want refused", err)
	}
	for _, tt := range []struct {
		s    Scope
		want string
	}{{Scope{AllTopics: true}, "--all-topics"}, {Scope{Topics: []TopicScope{{Topic: "a"}, {Topic: "b", Partitions: []int32{0, 2}}}}, "--topic a --topic b:0,2"}, {Scope{}, "(none)"}} {
		if got := tt.s.String(); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.s, got, tt.want)
		}
	}
}
