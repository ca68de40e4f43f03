package replay

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// formsCluster is a kfake cluster with topic t (3 partitions of 10 records, t:0's first 4
// deleted as by retention) and u (2 partitions of 4), and group g committed on t:0 at 2
// (before the log start), t:1 at 7 and u:0 at 3, with nothing on t:2 and u:1.
func formsCluster(t *testing.T, ctx context.Context) *kgo.Client {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "t"), kfake.SeedTopics(2, "u"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	var recs []*kgo.Record
	for topic, n := range map[string]int{"t": 10, "u": 4} {
		for p := range int32(map[string]int32{"t": 3, "u": 2}[topic]) {
			for k := range n {
				recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "%d", k)})
			}
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	var del kadm.Offsets
	del.Add(kadm.Offset{Topic: "t", Partition: 0, At: 4})
	if dr, err := adm.DeleteRecords(ctx, del); err != nil || dr.Error() != nil {
		t.Fatalf("delete records: %v %v", err, dr.Error())
	}
	var os kadm.Offsets
	for tp, o := range map[TopicPartition]int64{{"t", 0}: 2, {"t", 1}: 7, {"u", 0}: 3} {
		os.Add(kadm.Offset{Topic: tp.Topic, Partition: tp.Partition, At: o, LeaderEpoch: -1})
	}
	if err := adm.CommitAllOffsets(ctx, "g", os); err != nil {
		t.Fatal(err)
	}
	return cl
}

// TestBuildKafkaForms: --to-current and --from-file with a scope plan as Kafka 4.4's
// kafka-consumer-groups does (they were refused: --to-current as an unknown flag, --from-file
// with --topic or --all-topics as a bad request). --to-current keeps each committed offset
// unclamped and sets the log end where there is none; --from-file moves the file's partitions
// whatever the scope, whose partitions must exist.
func TestBuildKafkaForms(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := formsCluster(t, ctx)
	plan := filepath.Join(t.TempDir(), "plan.csv")
	if err := os.WriteFile(plan, []byte("t,0,5\nt,2,99\nu,1,1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fromFile := map[string]int64{"t:0": 5, "t:2": 10, "u:1": 1} // t:2's 99 clamped to its end
	for _, tt := range []struct {
		name     string
		args     []string
		want     map[string]int64 // target per partition, exactly these rows
		warnings []string         // each must be in one warning, and there are as many warnings
	}{
		{"to-current topic", []string{"--to-current", "--topic", "t"},
			map[string]int64{"t:0": 2, "t:1": 7, "t:2": 10},
			[]string{"t:0: 2 is before the log start (4, out of retention): kept", "t:2: no committed offset: set to the log end"}},
		{"to-current all-topics", []string{"--to-current", "--all-topics"},
			map[string]int64{"t:0": 2, "t:1": 7, "u:0": 3}, []string{"t:0: 2 is before the log start"}},
		{"to-current some partitions", []string{"--to-current", "--topic", "t:1", "--topic", "u"},
			map[string]int64{"t:1": 7, "u:0": 3, "u:1": 4}, []string{"u:1: no committed offset"}},
		{"from-file without a scope", []string{"--from-file", plan}, fromFile, []string{"t:2: 99 is past the log end"}},
		{"from-file topic", []string{"--from-file", plan, "--topic", "t"}, fromFile,
			[]string{"t:2: 99 is past the log end", "[t:1], in the scope but not in the file, stay", "[u:1], in the file but not in the scope, move"}},
		{"from-file some partitions", []string{"--from-file", plan, "--topic", "t:1"}, fromFile,
			[]string{"t:2: 99 is past the log end", "[t:1], in the scope but not in the file", "[t:0 t:2 u:1], in the file but not in the scope"}},
		{"from-file all-topics", []string{"--from-file", plan, "--all-topics"}, fromFile,
			[]string{"t:2: 99 is past the log end", "[t:1 u:0], in the scope but not in the file", "[t:2 u:1], in the file but not in the scope"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, err := ParseArgs("g", tt.args)
			if err != nil {
				t.Fatal(err)
			}
			p, err := Build(ctx, cl, req)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int64{}
			for _, r := range p.Rows {
				got[fmt.Sprintf("%s:%d", r.Topic, r.Partition)] = r.Target
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("targets %v, want %v", got, tt.want)
			}
			if len(p.Warnings) != len(tt.warnings) {
				t.Fatalf("%d warnings %q, want %d", len(p.Warnings), p.Warnings, len(tt.warnings))
			}
			for _, w := range tt.warnings {
				if !strings.Contains(strings.Join(p.Warnings, "\n"), w) {
					t.Errorf("warnings %q lack %q", p.Warnings, w)
				}
			}
			if offs := p.Offsets(); len(offs["t"])+len(offs["u"]) != len(tt.want) {
				t.Fatalf("commits %v, want %d", offs, len(tt.want))
			}
		})
	}
	// The scope given with --from-file must exist, as Kafka's tool checks it.
	for _, scope := range []string{"t:9", "nosuch"} {
		req, err := ParseArgs("g", []string{"--from-file", plan, "--topic", scope})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Build(ctx, cl, req); !errors.Is(err, ErrUnknownPartition) || !strings.Contains(err.Error(), scope) {
			t.Errorf("--from-file --topic %s: %v, want ErrUnknownPartition naming it", scope, err)
		}
	}
}

// TestParseKafkaForms: the flags of the forms Kafka 4.4's tool takes and backflow refused
// (--to-current; --from-file with --topic or --all-topics) parse into their request, and the
// mixes Kafka's tool refuses are refused.
func TestParseKafkaForms(t *testing.T) {
	plan := filepath.Join(t.TempDir(), "plan.csv")
	if err := os.WriteFile(plan, []byte("t,0,5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name      string
		args      []string
		kind      Kind
		spec      string
		allTopics bool
		topics    string // the --topic scopes, fmt.Sprint'ed
	}{
		{"to-current topic", []string{"--to-current", "--topic", "t:0,2"}, ToCurrent, "--to-current", false, "[{t [0 2]}]"},
		{"to-current all-topics", []string{"--to-current", "--all-topics"}, ToCurrent, "--to-current", true, "[]"},
		{"from-file topic", []string{"--from-file", plan, "--topic", "t", "--topic", "u:1"}, FromFile, "--from-file " + plan, false, "[{t []} {u [1]}]"},
		{"from-file all-topics", []string{"--from-file", plan, "--all-topics"}, FromFile, "--from-file " + plan, true, "[]"},
	} {
		req, err := ParseArgs("g", tt.args)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if req.Spec.Kind != tt.kind || req.Spec.String() != tt.spec || req.Scope.AllTopics != tt.allTopics || fmt.Sprint(req.Scope.Topics) != tt.topics {
			t.Errorf("%s: kind %d spec %q all-topics %v topics %v", tt.name, req.Spec.Kind, req.Spec, req.Scope.AllTopics, req.Scope.Topics)
		}
		if tt.kind == FromFile && (len(req.Spec.File) != 1 || req.Spec.File[TopicPartition{"t", 0}] != 5) {
			t.Errorf("%s: file %v", tt.name, req.Spec.File)
		}
	}
	for name, args := range map[string][]string{
		"to-current and to-latest":      {"--to-current", "--to-latest", "--all-topics"},
		"to-current and from-file":      {"--to-current", "--from-file", plan, "--all-topics"},
		"to-current without a scope":    {"--to-current"},
		"to-current takes no value":     {"--to-current=5", "--all-topics"},
		"from-file with two scopes":     {"--from-file", plan, "--all-topics", "--topic", "t"},
		"from-file with a bad topic":    {"--from-file", plan, "--topic", "t:x"},
		"to-current with a bad topic":   {"--to-current", "--topic", "a b"},
		"from-file with a missing file": {"--from-file", plan + ".missing", "--topic", "t"},
	} {
		if _, err := ParseArgs("g", args); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%s: %v, want ErrBadRequest", name, err)
		}
	}
}
