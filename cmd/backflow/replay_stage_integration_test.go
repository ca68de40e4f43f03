package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/test/testenv"
)

// TestReplayRefusesStageStepsOnAnotherStagesGroup: --new-epoch on a sink's group planned an
// ingest epoch bump for it, and --reset-state on a ClickHouse sink's group failed late with
// UNKNOWN_TOPIC_OR_PARTITION. Both must be refused up front (exit 2), naming which groups the
// flag is for, and a plain replay of the same group must still plan.
func TestReplayRefusesStageStepsOnAnotherStagesGroup(t *testing.T) {
	kcfg := testenv.Kafka(t, "replay-stage-test")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t.Setenv("BACKFLOW_KAFKA_BROKERS", kcfg.Endpoint())
	enriched := testenv.CreateTopic(t, ctx, kcfg, "replay-stage-enriched", 1)
	group := testenv.ID("replay-stage-sink-") // a sink group: it reads the enriched topic
	cl, err := kcfg.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: enriched, Value: []byte("v")}, &kgo.Record{Topic: enriched, Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	testenv.Groups(t, kcfg, group) // removed when the test ends, after the deferred closes
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: enriched, Partition: 0, At: 2, LeaderEpoch: -1})
	if resp, err := adm.CommitOffsets(ctx, group, offs); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	for _, tt := range []struct {
		name string
		args []string
		code int
		want string // in stderr (refusals) or stdout (the plan)
	}{
		{"new epoch on a sink group", []string{"--topic", enriched, "--new-epoch"}, exitUsage, "--new-epoch is for ingest groups"},
		{"reset state on a group without a loopback", []string{"--reset-state"}, exitUsage, "--reset-state is for sink-features groups"},
		{"plain replay of the same group", []string{"--topic", enriched}, exitOK, "dry run: nothing changed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"replay", "--group", group, "--to-earliest", "--enriched-topic", enriched}, tt.args...)
			var stdout, stderr bytes.Buffer
			root := newRootCmd()
			root.SetOut(&stdout)
			root.SetErr(&stderr)
			root.SetArgs(args)
			err := root.ExecuteContext(ctx)
			code, out, errOut := classify(err), stdout.String(), stderr.String()
			if err != nil {
				errOut += err.Error() // what execute prints after "backflow:"
			}
			if code != tt.code || !strings.Contains(out+errOut, tt.want) {
				t.Fatalf("exit %d, want %d and %q\nstdout:\n%s\nstderr:\n%s", code, tt.code, tt.want, out, errOut)
			}
			if tt.code == exitUsage && !strings.Contains(errOut, group) {
				t.Errorf("the refusal does not name the group %s:\n%s", group, errOut)
			}
		})
	}
}

// TestReplayResetStateSaysItsScope: --reset-state without a scope planned the enriched topic
// and the loopback without saying so (a plain replay is refused for want of a scope), and the
// dry run's stage line read as done ("table … re-created empty, … deleted"). The plan now names
// its scope, a warning says where it came from, and the stage line says it is not done.
func TestReplayResetStateSaysItsScope(t *testing.T) {
	kcfg := testenv.Kafka(t, "replay-scope-test")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t.Setenv("BACKFLOW_KAFKA_BROKERS", kcfg.Endpoint())
	group := testenv.ID("replay-scope-features-") // a feature group: the enriched topic and a loopback
	enriched, loop := group+"-enriched", group+"-loop"
	testenv.Topics(t, ctx, kcfg, 1, enriched, loop)
	testenv.Groups(t, kcfg, group)
	cl, err := kcfg.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: enriched, Value: []byte("v")}, &kgo.Record{Topic: loop, Value: []byte("d")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: enriched, Partition: 0, At: 1, LeaderEpoch: -1})
	offs.Add(kadm.Offset{Topic: loop, Partition: 0, At: 1, LeaderEpoch: -1})
	if resp, err := kadm.NewClient(cl).CommitOffsets(ctx, group, offs); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	out, errOut, err := execRoot(ctx, "replay", "--group", group, "--to-earliest", "--reset-state", "--enriched-topic", enriched)
	if err != nil {
		t.Fatalf("replay --reset-state: %v\nstderr:\n%s", err, errOut)
	}
	if want := "warning: no scope given: --reset-state moves " + enriched; !strings.Contains(errOut, want) {
		t.Errorf("stderr does not say %q:\n%s", want, errOut)
	}
	if want := "spec --to-earliest, scope --topic " + enriched + "\n"; !strings.Contains(out, want) {
		t.Errorf("the plan's header does not name its scope %q:\n%s", want, out)
	}
	var stage string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "stage") {
			stage = line
		}
	}
	if !strings.HasPrefix(stage, "stage, with --execute (not done): feature state of "+group+": re-create table ") ||
		strings.Contains(stage, "re-created") || strings.Contains(stage, " deleted") {
		t.Errorf("the dry run's stage line reads as done or is missing: %q", stage)
	}
	// Named, the scope needs no warning.
	_, errOut, err = execRoot(ctx, "replay", "--group", group, "--to-earliest", "--reset-state", "--enriched-topic", enriched, "--topic", enriched)
	if err != nil || strings.Contains(errOut, "no scope given") {
		t.Errorf("with --topic: %v, stderr %q", err, errOut)
	}
}
