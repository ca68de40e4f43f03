package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/test/pipelinetest"
)

// TestStreamsMigrateAndCheckConfig: with the example streams declared in a config file and
// their v1 schemas registered, check-config checks each stream against the registry (a
// nullable dedupe key is reported at its key and line), migrate --dry-run shows each table's
// CREATE TABLE and view and applies nothing, migrate applies them, a second migrate finds
// them up to date, and after v2 is registered migrate shows and applies its ADD COLUMNs.
func TestStreamsMigrateAndCheckConfig(t *testing.T) {
	env := pipelinetest.NewEnv(t, "sm")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, conn := env.Database(t, ctx, "")
	agentTopic, trainTopic := "agent-"+env.ID, "train-"+env.ID
	register := func(subject, file string) int {
		t.Helper()
		b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "streams", file))
		if err != nil {
			t.Fatal(err)
		}
		enc, err := avro.NewTextEncoder[any](env.Registry, string(b), subject)
		if err != nil {
			t.Fatal(err)
		}
		id, err := enc.ID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	agentV1 := register(agentTopic+"-value", "agent-task-event.avsc")
	trainV1 := register(trainTopic+"-value", "training-data-pipeline.avsc")
	// history reads the recorded migrations: stream, version, schema id and change, one line
	// each, in order.
	history := func() string {
		t.Helper()
		rows, err := conn.Query(ctx, "SELECT stream, version, schema_id, change, length(statements) FROM stream_migrations ORDER BY stream, version")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var b strings.Builder
		for rows.Next() {
			var (
				stream, change string
				version, id    uint32
				stmts          uint64
			)
			if err := rows.Scan(&stream, &version, &id, &change, &stmts); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "%s v%d id %d: %s (%d statements)\n", stream, version, id, change, stmts)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}

	example, err := os.ReadFile(filepath.Join("..", "..", "deploy", "streams", "streams.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	streams := strings.NewReplacer("topic: agent-task-event", "topic: "+agentTopic, "topic: training-data-pipeline", "topic: "+trainTopic).Replace(string(example))
	header := fmt.Sprintf("stages: [stream-agent-task-event, stream-training-data-pipeline]\nclickhouse:\n  database: %s\n", env.DB)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte(header+streams), 0o600)
	bad := filepath.Join(dir, "bad.yaml")
	badStreams := strings.Replace(streams, "dedupe_key: record_id", "dedupe_key: session_id", 1)
	os.WriteFile(bad, []byte(header+badStreams), 0o600)
	badLine := 1 + strings.Count(header+badStreams[:strings.Index(badStreams, "dedupe_key: session_id")], "\n")

	code, out, errOut := runCLIErr(t, "check-config", "--config", good)
	if code != exitOK || !strings.Contains(out, "configuration is valid") {
		t.Fatalf("check-config of the example streams: exit %d\n%s%s", code, out, errOut)
	}
	code, _, errOut = runCLIErr(t, "check-config", "--config", bad)
	want := fmt.Sprintf("streams[1].dedupe_key (line %d): field session_id is Nullable(String): a dedupe key must be a single non-null value", badLine)
	if code != exitUsage || !strings.Contains(errOut, want) {
		t.Fatalf("check-config of a nullable dedupe key: exit %d, stderr\n%s\nwant %q", code, errOut, want)
	}

	code, out, errOut = runCLIErr(t, "migrate", "--config", good, "--dry-run")
	if code != exitOK || !strings.Contains(out, "table agent_task_event: migration 1: create") || !strings.Contains(out, "table training_data: migration 1: create") ||
		!strings.Contains(out, "CREATE TABLE IF NOT EXISTS agent_task_event (") || !strings.Contains(out, "2 streams planned (dry run: nothing applied)") {
		t.Fatalf("migrate --dry-run: exit %d\n%s%s", code, out, errOut)
	}
	t.Logf("migrate --dry-run:\n%s", out)
	var n uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = currentDatabase() AND name IN ('agent_task_event', 'training_data')").Scan(&n); err != nil || n != 0 {
		t.Fatalf("after the dry run: %d stream tables (%v), want 0", n, err)
	}
	code, out, errOut = runCLIErr(t, "migrate", "--config", good)
	if code != exitOK || strings.Count(out, ": applied, recorded as version 1 in stream_migrations") != 2 {
		t.Fatalf("migrate: exit %d\n%s%s", code, out, errOut)
	}
	want = fmt.Sprintf("agent-task-event v1 id %d: create (2 statements)\ntraining-data-pipeline v1 id %d: create (2 statements)\n", agentV1, trainV1)
	if got := history(); got != want {
		t.Fatalf("stream_migrations after migrate:\n%swant\n%s", got, want)
	}
	if err := conn.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = currentDatabase() AND name IN ('agent_task_event', 'training_data', 'v_agent_task_event', 'v_training_data')").Scan(&n); err != nil || n != 4 {
		t.Fatalf("after migrate: %d stream tables and views (%v), want 4", n, err)
	}
	code, out, _ = runCLIErr(t, "migrate", "--config", good)
	if code != exitOK || strings.Count(out, ": version 1: up to date") != 2 {
		t.Fatalf("second migrate: exit %d\n%s", code, out)
	}

	agentV2 := register(agentTopic+"-value", "agent-task-event.v2.avsc")
	code, out, errOut = runCLIErr(t, "migrate", "--config", good, "--dry-run")
	if code != exitOK || !strings.Contains(out, "table agent_task_event: migration 2: add columns priority, reviewer") || !strings.Contains(out, "ALTER TABLE agent_task_event ADD COLUMN `priority` Int32;") ||
		!strings.Contains(out, "ALTER TABLE agent_task_event ADD COLUMN `reviewer` Nullable(String);") {
		t.Fatalf("migrate --dry-run after v2: exit %d\n%s%s", code, out, errOut)
	}
	t.Logf("migrate --dry-run after v2:\n%s", out)
	if code, out, errOut = runCLIErr(t, "migrate", "--config", good); code != exitOK {
		t.Fatalf("migrate after v2: exit %d\n%s%s", code, out, errOut)
	}
	if err := conn.QueryRow(ctx, "SELECT count() FROM system.columns WHERE database = currentDatabase() AND table IN ('agent_task_event', 'v_agent_task_event') AND name IN ('priority', 'reviewer')").Scan(&n); err != nil || n != 4 {
		t.Fatalf("after migrate with v2: %d of priority and reviewer in the table and view (%v), want 4", n, err)
	}
	// Two ADD COLUMNs, then the view dropped and created again.
	want = fmt.Sprintf("agent-task-event v1 id %d: create (2 statements)\nagent-task-event v2 id %d: add columns priority, reviewer (4 statements)\n"+
		"training-data-pipeline v1 id %d: create (2 statements)\n", agentV1, agentV2, trainV1)
	if got := history(); got != want {
		t.Fatalf("stream_migrations after migrate with v2:\n%swant\n%s", got, want)
	}
}
