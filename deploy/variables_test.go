package deploy_test

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/backflowhq/backflow/pipelines"
)

// TestDeployFilesNameOnlyVariablesBackflowReads: deploy/grafana named BACKFLOW_CLICKHOUSE_HOST
// and _PORT, which backflow never reads (its variable is BACKFLOW_CLICKHOUSE_ADDR), so an
// operator copying them configured nothing. Every BACKFLOW_* name in the deployment files
// (Grafana, Kubernetes, compose, Prometheus) must be a variable of a config key or secret.
// The local stack's script has port variables of its own and is left out.
func TestDeployFilesNameOnlyVariablesBackflowReads(t *testing.T) {
	known := map[string]bool{}
	for _, path := range pipelines.Keys() {
		k, _ := pipelines.KeyInfo(path)
		known[k.Env] = true
		if k.Secret != "" {
			known[k.Secret] = true
		}
	}
	if len(known) < 50 {
		t.Fatalf("only %d variables known: the key listing is not what it should be", len(known))
	}
	name := regexp.MustCompile(`\bBACKFLOW_[A-Z0-9_]*[A-Z0-9]`)
	seen := 0
	var bad []string
	for _, dir := range []string{"grafana", "k8s", "compose", "prometheus"} {
		filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range name.FindAllString(string(b), -1) {
				seen++
				// A secret's *_FILE twin is read too.
				if !known[v] && !known[strings.TrimSuffix(v, "_FILE")] {
					bad = append(bad, path+": "+v)
				}
			}
			return nil
		})
	}
	if seen == 0 {
		t.Fatal("no BACKFLOW_* variable in the deployment files: is the test in the right folder?")
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Errorf("%s is not a variable backflow reads", b)
	}
}
