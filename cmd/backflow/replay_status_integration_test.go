package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/test/testenv"
)

// TestReplayStatusWatchStopsCleanlyWithoutATerminal: `replay status --watch` stopped by a
// signal (its context ending) while stderr is not a terminal, or with --no-progress, panicked
// on the progress bar it never drew (exit 2 and a stack trace). It must exit 0 having printed
// the lag table and one plain line per poll.
func TestReplayStatusWatchStopsCleanlyWithoutATerminal(t *testing.T) {
	kcfg := testenv.Kafka(t, "replay-status-test")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t.Setenv("BACKFLOW_KAFKA_BROKERS", kcfg.Endpoint())
	topic, group := laggingGroup(t, ctx, kcfg, "replay-status")
	// A control topic that does not exist holds no replay records: "since now", no warning
	// (the reader retried the missing topic for about ten seconds, then warned).
	code, out, errOut := runDLQ(t, ctx, "replay", "status", "--group", group, "--control-topic", "replay-status-control-none")
	if code != exitOK || !strings.Contains(out, "since now: 0/14 records") || strings.Contains(errOut, "warning") {
		t.Fatalf("status with no control topic: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	control := testenv.CreateTopic(t, ctx, kcfg, "replay-status-control", 1) // no replay recorded in it
	for _, extra := range [][]string{nil, {"--no-progress"}} {
		t.Run(strings.Join(append([]string{"watch"}, extra...), " "), func(t *testing.T) {
			// The signal: main's context ends while the watch polls.
			wctx, stop := context.WithTimeout(ctx, 5*time.Second)
			defer stop()
			args := append([]string{"replay", "status", "--group", group, "--watch", "--interval", "200ms", "--control-topic", control}, extra...)
			code, out, errOut := runDLQ(t, wctx, args...)
			if code != exitOK {
				t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			if !strings.Contains(out, topic) || !strings.Contains(out, "14") {
				t.Errorf("no lag table with the topic and its lag of 14:\n%s", out)
			}
			if polls := strings.Count(out, "records/s"); polls < 3 {
				t.Errorf("%d progress lines, want the first and at least two polls:\n%s", polls, out)
			}
		})
	}
}

// laggingGroup makes a topic of two partitions holding 10 records each, and a group with no
// members that committed offset 3 on each: lag 7 + 7. Both are removed when the test ends.
func laggingGroup(t *testing.T, ctx context.Context, kcfg kafka.Conn, tag string) (topic, group string) {
	t.Helper()
	topic = testenv.CreateTopic(t, ctx, kcfg, tag, 2)
	group = testenv.ID(tag + "-g-")
	testenv.Groups(t, kcfg, group) // removed when the test ends
	cl, err := kcfg.NewClient(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := range 20 {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: []byte("v")})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: 3, LeaderEpoch: -1})
	offs.Add(kadm.Offset{Topic: topic, Partition: 1, At: 3, LeaderEpoch: -1})
	if resp, err := kadm.NewClient(cl).CommitOffsets(ctx, group, offs); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	return topic, group
}
