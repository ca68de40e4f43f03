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
