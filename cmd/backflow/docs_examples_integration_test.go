package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/envfile"
	"github.com/backflowhq/backflow/test/pipelinetest"
	"github.com/backflowhq/backflow/test/testenv"
)

// withoutStack is env without the variables of the stack's env file: a fresh shell's, where an
// example reaches the stack only through --env-file .stack/env.
func withoutStack(t *testing.T, env []string) []string {
	vars, err := envfile.Load(testenv.EnvFile())
	must(t, err)
	var out []string
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); vars[k] == "" {
			out = append(out, kv)
		}
	}
	return out
}

// runDocExamples runs the examples of README.md and docs/*.md (docExamples) in dir, the folder
// TestHelpExamplesRun pastes in, as a reader would after make demo: in a shell with none of the
// stack's variables, so an example that does not name the env file fails. A console session
// must print what its page shows, once d's names are put back as the page has them.
//
// The page's names are d's: replace rewrites a command line, and the streams of
// deploy/streams/streams.yaml read private topics; agent-task-event's subject and table are
// there already, as make demo leaves them.
func runDocExamples(t *testing.T, ctx context.Context, d *pipelinetest.Data, dir string, env []string, replace *strings.Replacer, extra func(example) string) {
	env = withoutStack(t, env)
	var fresh []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "BACKFLOW_") || strings.HasPrefix(kv, "BACKFLOW_CLICKHOUSE_DATABASE=") {
			fresh = append(fresh, kv)
		}
	}
	loadgenBin := testenv.Build(t, "tools/loadgen/cmd/loadgen")
	must(t, os.Symlink(loadgenBin, filepath.Join(dir, "bin", "loadgen")))
	agent, train := "agent-"+d.ID, "train-"+d.ID
	streams := filepath.Join(dir, "deploy", "streams")
	must(t, os.MkdirAll(streams, 0o755))
	ex, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "deploy", "streams", "streams.yaml"))
	must(t, err)
	private := strings.NewReplacer("topic: agent-task-event", "topic: "+agent, "topic: training-data-pipeline", "topic: "+train).Replace(string(ex))
	must(t, os.WriteFile(filepath.Join(streams, "streams.yaml"), []byte(private), 0o600))
	avscs, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "deploy", "streams", "*.avsc"))
	must(t, err)
	for _, f := range avscs {
		must(t, os.Symlink(f, filepath.Join(streams, filepath.Base(f))))
	}
	// What make demo leaves: agent-task-event's schema registered and its table made.
	b, err := os.ReadFile(filepath.Join(streams, "agent-task-event.avsc"))
	must(t, err)
	enc, err := avro.NewTextEncoder[any](d.Registry, string(b), agent+"-value")
	must(t, err)
	if _, err := enc.ID(ctx); err != nil {
		t.Fatal(err)
	}
	agentOnly := filepath.Join(dir, "agent-only.yaml")
	must(t, os.WriteFile(agentOnly, []byte(private[:strings.Index(private, "  - name: training-data-pipeline")]), 0o600))
	if code, out := runExample(t, ctx, dir, env, "bin/backflow migrate --env-file .stack/env --config "+agentOnly, byItself); code != 0 {
		t.Fatalf("migrate agent-task-event's table: exit %d\n%s", code, out)
	}
	back := strings.NewReplacer(agent, "agent-task-event", train, "training-data-pipeline", d.DB, "default")

	examples := docExamples(t, testenv.RepoRoot())
	for _, e := range examples {
		lines := make([]string, len(e.cmds))
		for i, c := range e.cmds {
			line, x := replace.Replace(c), extra(example{line: strings.TrimPrefix(c, "bin/")})
			if j := strings.IndexAny(line, "|>;"); j >= 0 {
				line = strings.TrimSpace(line[:j]) + x + " " + line[j:]
			} else {
				line += x
			}
			lines[i] = line
		}
		runEnv := env
		if e.out != nil {
			runEnv = fresh // a session prints what the page shows: none of the test's names but its database
		}
		t.Run(e.file+": "+strings.Join(e.cmds, "; "), func(t *testing.T) {
			code, out := runExample(t, ctx, dir, runEnv, strings.Join(lines, "\n"), stopOf(example{line: strings.Join(e.cmds, "\n")}))
			if code != 0 {
				t.Fatalf("ran as:\n%s\nexit %d:\n%s", strings.Join(lines, "\n"), code, out)
			}
			if e.out == nil {
				return
			}
			if diff := matchOutput(e.out, back.Replace(out)); diff != "" {
				t.Errorf("ran as:\n%s\n%s\nall it printed:\n%s", strings.Join(lines, "\n"), diff, back.Replace(out))
			}
		})
	}
	t.Logf("%d examples of the pages ran", len(examples))
}
