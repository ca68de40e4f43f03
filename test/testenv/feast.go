package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// FeastSetup runs deploy/feast/setup.sh (a venv with the pinned Feast, feast apply against the
// stack's Redis) and returns the venv's python and the applied repo. A venv that cannot be
// built fails the test. project "" keeps the yaml's; repoDir "" renders into the stack folder;
// env is added to the script's environment (a Redis Cluster's mode and seeds).
func FeastSetup(t testing.TB, project, repoDir string, env ...string) (python, repo string) {
	t.Helper()
	stack := os.Getenv("BACKFLOW_STACK_DIR")
	if stack == "" {
		stack = filepath.Join(RepoRoot(), ".stack")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(RepoRoot(), "deploy", "feast", "setup.sh"))
	cmd.Env = append(os.Environ(), "BACKFLOW_REDIS_ADDR="+Get(RedisAddr))
	if project != "" {
		cmd.Env = append(cmd.Env, "BACKFLOW_FEAST_PROJECT="+project)
	}
	if repoDir != "" {
		cmd.Env = append(cmd.Env, "BACKFLOW_FEAST_REPO_DIR="+repoDir)
	}
	cmd.Env = append(cmd.Env, env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("deploy/feast/setup.sh failed (%v) after %v:\n%s", err, time.Since(start), stderr.String())
	}
	t.Logf("setup.sh took %v", time.Since(start).Round(time.Millisecond))
	return filepath.Join(stack, "feast-venv", "bin", "python"), string(bytes.TrimSpace(out))
}

// FeastReadOnline reads feats for rows through Feast's own SDK (get_online_features, by
// deploy/feast/read_online.py) from the repo FeastSetup applied: feature name → one value per row.
func FeastReadOnline(t testing.TB, python, repo string, feats []string, rows []map[string]any) map[string][]any {
	t.Helper()
	req, _ := json.Marshal(map[string]any{"features": feats, "entity_rows": rows})
	cmd := exec.Command(python, filepath.Join(RepoRoot(), "deploy", "feast", "read_online.py"), repo)
	cmd.Stdin = bytes.NewReader(req)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("read_online.py: %v\n%s", err, stderr.String())
	}
	var got map[string][]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("read_online.py output %q: %v", out, err)
	}
	return got
}
