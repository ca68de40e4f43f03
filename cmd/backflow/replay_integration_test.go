package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
	"github.com/backflowhq/backflow/test/pipelinetest"
	"github.com/backflowhq/backflow/test/testenv"
)

// TestReplayCommand drives `backflow replay` on the real stack: while the group has a live
// member, a dry run prints the plan and says --execute would be refused, and --execute exits 1
// naming the member and moves nothing (Kafka's own tool refuses too). Once the member left,
// --execute moves the offsets and records the replay; `replay status --watch` follows a
// consumer catching up until the lag is 0, and `groups` shows the group.
func TestReplayCommand(t *testing.T) {
	kcfg := testenv.Kafka(t, "replay-cmd-test")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	t.Setenv("BACKFLOW_KAFKA_BROKERS", kcfg.Endpoint())
	t.Setenv("BACKFLOW_CLICKHOUSE_ADDR", testenv.Get(testenv.ClickHouseAddr))
	topic := testenv.CreateTopic(t, ctx, kcfg, "replay-cmd", 3)
	group := testenv.ID("replay-cmd-g-")
	control := "replay-cmd-control-" + group
	testenv.Groups(t, kcfg, group)
	testenv.RemoveTopics(t, kcfg, control)
	cl, err := kcfg.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	// A private database with the migrations, for replay_log.
	chcfg, ch := pipelinetest.Database(t, ctx, pipelinetest.Plain().ClickHouse, testenv.ID("it_replaycmd_"))
	t.Setenv("BACKFLOW_CLICKHOUSE_DATABASE", chcfg.Database)
	if _, err := chschema.Migrate(ctx, ch); err != nil {
		t.Fatal(err)
	}

	var recs []*kgo.Record
	for i := 0; i < 90; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint(i)), Value: []byte("v")})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// A live member that consumed and committed everything.
	member, err := kcfg.NewClient(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.ClientID("live-member-x"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	leave := sync.OnceFunc(member.Close)
	t.Cleanup(leave) // a failed test leaves the group too, so that it can be deleted
	for n := 0; n < 90; {
		fs := member.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("member did not consume")
		}
		n += fs.NumRecords()
		if err := member.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatal(err)
		}
	}
	committed := func() int64 {
		o, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		var sum int64
		o.Each(func(r kadm.OffsetResponse) { sum += r.At })
		return sum
	}
	if committed() != 90 {
		t.Fatalf("member committed %d, want 90", committed())
	}

	args := []string{"replay", "--group", group, "--topic", topic, "--to-earliest", "--control-topic", control}
	code, out, _ := runReplayCLI(t, ctx, args...)
	if code != 0 || !strings.Contains(out, "TOPIC") || !strings.Contains(out, "RE-READ") || !strings.Contains(out, "90 record(s) to re-read") ||
		!strings.Contains(out, "live-member-x") || !strings.Contains(out, "--execute would be refused") {
		t.Fatalf("dry run while live: exit %d\n%s", code, out)
	}
	code, _, errOut := runReplayCLI(t, ctx, append(args, "--execute")...)
	if code != exitFailure || !strings.Contains(errOut, "live member") || !strings.Contains(errOut, "live-member-x") {
		t.Fatalf("--execute while live: exit %d, stderr %q", code, errOut)
	}
	if committed() != 90 {
		t.Fatalf("a refused replay moved the offsets: %d", committed())
	}
	tool := exec.CommandContext(ctx, testenv.Get(testenv.KafkaTool), "consumer-groups", "--bootstrap-server", kcfg.Endpoint(),
		"--group", group, "--reset-offsets", "--to-earliest", "--topic", topic, "--execute")
	kout, _ := tool.CombinedOutput()
	if !strings.Contains(string(kout), "can only be reset if the group '"+group+"' is inactive") {
		t.Fatalf("Kafka's tool on the live group said: %s", kout)
	}
	t.Logf("refused while live, by us (%q) and by Kafka's tool", strings.TrimSpace(errOut))

	leave() // leaves the group
	code, out, errOut = runReplayCLI(t, ctx, append(args, "--execute", "--reason", "cli test")...)
	if code != 0 || !strings.Contains(out, "executed: replay") {
		t.Fatalf("--execute: exit %d\n%s\n%s", code, out, errOut)
	}
	if committed() != 0 {
		t.Fatalf("after --execute the group committed %d in total, want 0", committed())
	}
	var rows uint64
	var who, reason string
	if err := ch.QueryRow(ctx, "SELECT count(), any(who), any(reason) FROM replay_log WHERE consumer_group = ?", group).Scan(&rows, &who, &reason); err != nil {
		t.Fatal(err)
	}
	if rows != 3 || reason != "cli test" || !strings.Contains(who, "@") {
		t.Fatalf("replay_log: %d rows, who %q, reason %q", rows, who, reason)
	}

	code, out, _ = runReplayCLI(t, ctx, "groups", group)
	if code != 0 || !strings.Contains(out, group) || !strings.Contains(out, "Empty") || !strings.Contains(out, " 90") {
		t.Fatalf("groups: exit %d\n%s", code, out)
	}
	// A consumer catches up while status --watch follows it.
	done := make(chan struct{})
	var wcode int
	var wout string
	go func() {
		defer close(done)
		wcode, wout, _ = runReplayCLI(t, ctx, "replay", "status", "--group", group, "--watch", "--interval", "300ms", "--control-topic", control)
	}()
	time.Sleep(time.Second)
	again, err := kcfg.NewClient(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	leaveAgain := sync.OnceFunc(again.Close)
	t.Cleanup(leaveAgain)
	for n := 0; n < 90; {
		fs := again.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("consumer did not catch up")
		}
		n += fs.NumRecords()
		if err := again.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatal(err)
		}
	}
	<-done
	leaveAgain()
	if wcode != 0 || !strings.Contains(wout, "since replay") || !strings.Contains(wout, "caught up: 90 record(s)") || !strings.Contains(wout, "records/s") {
		t.Fatalf("status --watch: exit %d\n%s", wcode, wout)
	}
	t.Logf("status --watch:\n%s", wout)
}

// runReplayCLI runs the CLI in-process: exit code, stdout, stderr (with the error main would print).
func runReplayCLI(t *testing.T, ctx context.Context, args ...string) (int, string, string) {
	t.Helper()
	stdout, stderr, err := execRoot(ctx, args...)
	if err != nil {
		stderr += "backflow: " + err.Error() + "\n"
	}
	return classify(err), stdout, stderr
}
