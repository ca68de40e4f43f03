package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/backflowhq/backflow/test/pipelinetest"
	"github.com/backflowhq/backflow/test/testenv"
	"github.com/backflowhq/backflow/tools/loadgen"
)

// example is one command line of a --help text.
type example struct {
	cmd  string // the command whose help shows it ("backflow replay status")
	line string // as printed, continuation lines joined, the trailing comment dropped
}

// helpExamples returns every example line of every command's --help (its Example, and the
// root's "Where to start" lines), in the order of the tree.
func helpExamples(root *cobra.Command) []example {
	var out []example
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		text := c.Example
		if c == root {
			_, start, _ := strings.Cut(c.Long, "Where to start:\n")
			text, _, _ = strings.Cut(start, "\n\n")
		}
		for _, l := range joinContinuations(text) {
			out = append(out, example{cmd: c.CommandPath(), line: l})
		}
		for _, sub := range c.Commands() {
			if sub.Name() != "help" && sub.Name() != "completion" {
				walk(sub)
			}
		}
	}
	walk(root)
	return out
}

var trailingComment = regexp.MustCompile(`\s{2,}#.*$|\s{3,}[a-z?].*$`) // "  # dry run", or the root's aligned description

func joinContinuations(text string) []string {
	var out []string
	cur := ""
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		if cont, ok := strings.CutSuffix(l, `\`); ok {
			cur += cont
			continue
		}
		cur += l
		out = append(out, strings.TrimSpace(trailingComment.ReplaceAllString(cur, "")))
		cur = ""
	}
	return out
}

// TestHelpExamplesRun runs every example of every --help against the stack, as an operator
// would paste it, and wants each to exit 0; an example that names --env-file runs without the
// stack's variables in its environment, so the file must be enough. Then it runs the examples
// of README.md and docs/*.md (runDocExamples). Regression: the first example of replay --help
// named a group that does not exist, and failed; the dlq tail and redrive examples, and
// docs/streams.md's migrate --dry-run, failed when pasted in a fresh shell.
//
// The examples name production's topics, groups and project; the test gives them its own
// pipeline instead (made by pipelinetest.Run: traffic with poison through ingest and the
// ClickHouse sink), by replacing those names in the line and setting the stage keys'
// variables, and frees the ports the examples listen on. Commands that run until a signal
// (the stages, dashboard, dlq tail) are stopped with SIGTERM after a few seconds and must exit
// 0 then, as their help promises.
func TestHelpExamplesRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	d := pipelinetest.Run(t, ctx, loadgen.Config{Requests: 400, Seed: 7, PoisonRate: 0.2})
	bin := testenv.Build(t, "cmd/backflow")
	// The feature sink's group, as if it had consumed everything: replay --reset-state's
	// example needs a group that exists, and the group table the sink's first run creates.
	// The sink-features examples run after replay's (the tree is in name order), and the
	// stages in run's example may be stopped before they made it.
	adm := kadm.NewClient(d.Admin)
	ends, err := adm.ListEndOffsets(ctx, d.Features.EnrichedTopic)
	must(t, err)
	compact := "compact"
	if resp, err := adm.CreateTopic(ctx, int32(len(ends[d.Features.EnrichedTopic])), 1,
		map[string]*string{"cleanup.policy": &compact}, d.Features.TableTopic()); err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v %v", d.Features.TableTopic(), err, resp.Err)
	}
	var offs kadm.Offsets
	ends.Each(func(o kadm.ListedOffset) {
		offs.Add(kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: o.Offset, LeaderEpoch: -1})
	})
	if resp, err := adm.CommitOffsets(ctx, d.Features.Group, offs); err != nil || resp.Error() != nil {
		t.Fatalf("commit %s: %v %v", d.Features.Group, err, resp.Error())
	}

	// A folder to paste the examples in: backflow on PATH, the stack's env file at .stack/env,
	// the file /etc/backflow/backflow.yaml stands for, and the configmap's backflow.yaml.
	dir := t.TempDir()
	binDir := filepath.Join(dir, "bin")
	must(t, os.MkdirAll(binDir, 0o755))
	must(t, os.Symlink(bin, filepath.Join(binDir, "backflow")))
	must(t, os.MkdirAll(filepath.Join(dir, ".stack"), 0o755))
	must(t, os.Symlink(testenv.EnvFile(), filepath.Join(dir, ".stack", "env")))
	must(t, os.MkdirAll(filepath.Join(dir, "deploy"), 0o755))
	must(t, os.Symlink(filepath.Join(testenv.RepoRoot(), "deploy", "config.example.yaml"), filepath.Join(dir, "deploy", "config.example.yaml")))
	conf := filepath.Join(dir, "backflow.yaml")
	must(t, os.WriteFile(conf, []byte("stages: [ingest, sink-clickhouse]\nlog: {level: info}\n"), 0o600))
	cm := filepath.Join(dir, "configmap-backflow.yaml")
	must(t, os.WriteFile(cm, configMapData(t), 0o600))

	pairs := []string{
		"backflow-sink-clickhouse", d.SinkGroup,
		"backflow-ingest", d.Ingest.Group,
		"backflow-features", d.Features.Group,
		"model-inference-result", d.Ingest.InferenceTopic,
		"gateway-log", d.Ingest.GatewayTopic,
		"--group g ", "--group " + d.Ingest.Group + " ",
		"--topic t:0,2", "--topic " + d.Ingest.InferenceTopic + ":0,2",
		"/etc/backflow/backflow.yaml", conf,
		"kubectl get cm backflow-config -o jsonpath='{.data.backflow\\.yaml}'", "cat " + cm,
		"kafka-1:9092", d.Stack.Kafka.Endpoint(),
		"0.0.0.0:18400", fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)),
		"127.0.0.1:9464", fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)),
		"127.0.0.1:9465", fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)),
		"127.0.0.1:9466", fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)),
	}
	// Implicit defaults that name production's: the dlq and replay commands' topics, and
	// replay --reset-state's project, enriched topic and storage; and the dashboard's port.
	dashAddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	extra := func(e example) string {
		switch {
		case strings.Contains(e.line, "backflow dashboard") && !strings.Contains(e.line, "--addr"):
			return " --addr " + dashAddr // its default port may be taken by make demo's dashboard
		case strings.Contains(e.line, "backflow dlq "):
			return " --topic " + d.Ingest.DLQTopic
		case strings.Contains(e.line, "replay") && strings.Contains(e.line, "--reset-state"):
			return fmt.Sprintf(" --control-topic %s --project %s --enriched-topic %s --storage-dir %s", d.Ingest.ControlTopic, d.Features.Project,
				d.Features.EnrichedTopic, filepath.Join(dir, "features-storage"))
		case strings.Contains(e.line, "backflow replay") || strings.Contains(e.line, "backflow offsets"):
			return " --control-topic " + d.Ingest.ControlTopic
		}
		return ""
	}
	env := append(os.Environ(), "PATH="+binDir+":"+os.Getenv("PATH"), "BACKFLOW_METRICS_ADDR=127.0.0.1:0",
		"BACKFLOW_CLICKHOUSE_DATABASE="+d.DB,
		"BACKFLOW_INGEST_GROUP="+d.Ingest.Group, "BACKFLOW_INGEST_INFERENCE_TOPIC="+d.Ingest.InferenceTopic,
		"BACKFLOW_INGEST_GATEWAY_TOPIC="+d.Ingest.GatewayTopic, "BACKFLOW_INGEST_ENRICHED_TOPIC="+d.Ingest.EnrichedTopic,
		"BACKFLOW_INGEST_DLQ_TOPIC="+d.Ingest.DLQTopic, "BACKFLOW_INGEST_CONTROL_TOPIC="+d.Ingest.ControlTopic,
		"BACKFLOW_INGEST_STORAGE_DIR="+filepath.Join(dir, "ingest-storage"),
		"BACKFLOW_SINK_CLICKHOUSE_GROUP="+d.SinkGroup, "BACKFLOW_SINK_CLICKHOUSE_TOPIC="+d.Ingest.EnrichedTopic,
		"BACKFLOW_SINK_CLICKHOUSE_DLQ_TOPIC="+d.SinkDLQ, "BACKFLOW_SINK_CLICKHOUSE_MIRROR_DLQ_GROUP="+d.MirrorGroup,
		"BACKFLOW_SINK_FEATURES_GROUP="+d.Features.Group, "BACKFLOW_SINK_FEATURES_ENRICHED_TOPIC="+d.Features.EnrichedTopic,
		"BACKFLOW_SINK_FEATURES_DLQ_TOPIC="+d.Features.DLQTopic, "BACKFLOW_SINK_FEATURES_PROJECT="+d.Features.Project,
		"BACKFLOW_SINK_FEATURES_STORAGE_DIR="+filepath.Join(dir, "features-storage"),
	)
	if _, err := exec.LookPath("jq"); err != nil { // the examples pipe JSON lines to jq; python reads them as well
		pairs = append(pairs, "jq -r .message", `python3 -c 'import sys,json; [print(json.loads(l)["message"]) for l in sys.stdin]'`)
	}
	replace := strings.NewReplacer(pairs...)

	bare := withoutStack(t, env)
	examples := helpExamples(newRootCmd())
	if len(examples) < 30 {
		t.Fatalf("found %d examples; the parser lost some", len(examples))
	}
	for _, e := range examples {
		line, x := replace.Replace(e.line), extra(e)
		if i := strings.IndexAny(line, "|>"); i >= 0 { // the extra flags go before a pipe or a redirect
			line = strings.TrimSpace(line[:i]) + x + " " + line[i:]
		} else {
			line += x
		}
		runEnv := env
		if strings.Contains(e.line, "--env-file") {
			runEnv = bare // the env file must be enough
		}
		t.Run(e.cmd+": "+e.line, func(t *testing.T) {
			code, out := runExample(t, ctx, dir, runEnv, line, stopOf(e))
			if code != 0 {
				t.Errorf("%s\nran as: %s\nexit %d:\n%s", e.line, line, code, out)
			}
		})
	}
	t.Logf("%d examples ran", len(examples))
	runDocExamples(t, ctx, d, dir, env, replace, extra)
}

// How an example ends.
type stop int

const (
	byItself  stop = iota // exits when done
	bySignal              // runs until SIGTERM
	byCatchUp             // replay status --watch: until the lag is 0, or SIGTERM
)

func stopOf(e example) stop {
	if strings.Contains(e.line, "--watch") {
		return byCatchUp
	}
	for _, s := range []string{"backflow run", "backflow ingest", "backflow sink-", "backflow dashboard", "backflow dlq tail"} {
		if strings.Contains(e.line, s) {
			return bySignal
		}
	}
	return byItself
}

// runExample runs line with bash in dir. One that runs until a signal gets SIGTERM after 5 s
// (it must still be running then, unless it waits for a catch-up that came) and must exit
// within a minute of it.
func runExample(t *testing.T, ctx context.Context, dir string, env []string, line string, how stop) (int, string) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", "-c", line)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	limit := 2 * time.Minute
	if how != byItself {
		select {
		case err := <-done:
			if how == byCatchUp {
				return exitCode(err), out.String()
			}
			return -1, fmt.Sprintf("exited (%v) before it was stopped:\n%s", err, out.String())
		case <-time.After(5 * time.Second):
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		limit = time.Minute
	}
	select {
	case err := <-done:
		return exitCode(err), out.String()
	case <-time.After(limit):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return -1, "did not exit within " + limit.String() + ":\n" + out.String()
	}
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// configMapData is the backflow.yaml of deploy/k8s/configmap.yaml, as kubectl's jsonpath
// prints it.
func configMapData(t *testing.T) []byte {
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "deploy", "k8s", "configmap.yaml"))
	must(t, err)
	_, body, ok := strings.Cut(string(raw), "backflow.yaml: |\n")
	if !ok {
		t.Fatal("deploy/k8s/configmap.yaml has no backflow.yaml: | block")
	}
	var b strings.Builder
	for _, l := range strings.Split(body, "\n") {
		if l != "" && !strings.HasPrefix(l, "    ") {
			break
		}
		b.WriteString(strings.TrimPrefix(l, "    ") + "\n")
	}
	return []byte(b.String())
}
