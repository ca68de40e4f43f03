package pipelines

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestExampleStreamsLoad: deploy/streams/streams.yaml declares its two streams, with the
// defaults filled in and their stages selectable.
func TestExampleStreamsLoad(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "deploy", "streams", "streams.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(path, append([]byte("stages: [stream-agent-task-event, stream-training-data-pipeline]\n"), src...), 0o600)
	l, err := Load(path, env(stackAddrs))
	if err != nil {
		t.Fatal(err)
	}
	s := l.Config.Streams
	if len(s) != 2 {
		t.Fatalf("%d streams", len(s))
	}
	a, tr := s[0].WithDefaults(), s[1].WithDefaults()
	if a.Subject != "agent-task-event-value" || a.Table != "agent_task_event" || a.Group != "backflow-stream-agent-task-event" || a.DedupeKey != "event_id" {
		t.Errorf("agent stream %+v", a)
	}
	if tr.Table != "training_data" || tr.DedupeWindow != 24*time.Hour || tr.Rename["user_tenant"] != "tenant_id" || len(tr.Exclude) != 1 {
		t.Errorf("training stream %+v", tr)
	}
	if got := l.Config.needs(); strings.Join(got, ",") != "kafka,registry,clickhouse,sensitive-words" { // training screens a text field
		t.Errorf("needs %v", got)
	}
}

// TestStreamErrorsAtTheirKeys: each problem of a stream is reported at its key path with its line.
func TestStreamErrorsAtTheirKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(path, []byte(`stages: [stream-a, stream-nope]
streams:
  - name: a
    topic: t1
  - name: b
    topic: t2
    dedupe_key: "x..y"
    dedupe_window: 1h
  - name: a
    topic: t3
    group: backflow-ingest
    colour: red
`), 0o600)
	_, err := Load(path, env(stackAddrs))
	if err == nil {
		t.Fatal("no error")
	}
	got := err.Error()
	for _, want := range []string{
		`stages (line 1): stage "stream-nope": no stream of that name is declared in streams`,
		"streams[2].colour (line 12): unknown key",
		`streams[1].dedupe_key (line 7): "x..y" is not an Avro field path`,
		"streams[1].dedupe_window (line 8): dedupe window: 1h0m0s without an event_time",
		`streams[2].name (line 9): name "a" is streams[0]'s too`,
		`streams[2].group (line 11): group "backflow-ingest" is a built-in stage's`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("errors lack %q:\n%s", want, got)
		}
	}
}
