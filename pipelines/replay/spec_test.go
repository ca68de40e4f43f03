package replay

import (
	"bytes"
	"errors"
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
	// Kafka's exporter quotes names holding '-', and so do we.
	if b.String() != "\"gateway-log\",0,12\nbackflow.enriched,2,7\n" {
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
	ok := Request{Group: "g", Scope: Scope{AllTopics: true}, Spec: Spec{Kind: ToEarliest}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]Request{
		"no group":         {Scope: Scope{AllTopics: true}, Spec: Spec{Kind: ToEarliest}},
		"no spec":          {Group: "g", Scope: Scope{AllTopics: true}},
		"two scopes":       {Group: "g", Scope: Scope{AllTopics: true, Topics: []TopicScope{{Topic: "t"}}}, Spec: Spec{Kind: ToEarliest}},
		"loop in scope":    {Group: "g", Scope: Scope{Topics: []TopicScope{{Topic: "g-loop"}}}, Spec: Spec{Kind: ToEarliest}, ToEnd: []string{"g-loop"}},
		"file and a scope": {Group: "g", Scope: Scope{AllTopics: true}, Spec: Spec{Kind: FromFile, File: map[TopicPartition]int64{{"t", 0}: 1}}},
	} {
		if err := r.Validate(); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
