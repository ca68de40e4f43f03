package deploy_test

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/backflowhq/backflow/test/testenv"
)

var updateRule = flag.Bool("update", false, "rewrite k8s/prometheusrule.yaml from prometheus/rules.yaml")

// ruleFile is the part of a Prometheus rule file the tests read.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func readRules(t *testing.T) ruleFile {
	t.Helper()
	b, err := os.ReadFile("prometheus/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.Unmarshal(b, &rf); err != nil {
		t.Fatal(err)
	}
	return rf
}

// headingAnchors are the anchors GitHub gives the headings of a Markdown file.
func headingAnchors(t *testing.T, file string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	drop := regexp.MustCompile(`[^a-z0-9 _-]`)
	out := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if h, ok := strings.CutPrefix(line, "#"); ok {
			h = strings.TrimLeft(h, "#")
			out[strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(strings.TrimSpace(h)), ""), " ", "-")] = true
		}
	}
	return out
}

// TestPrometheusRules: deploy/prometheus/rules.yaml passes `promtool check rules`, and its unit
// tests (rules_test.yaml, synthetic series) pass `promtool test rules`. Every alert has a for:,
// a severity, a summary naming what it is about, a runbook that is a heading of
// docs/operations.md, and at least one test case where it fires and one where it stays silent.
func TestPrometheusRules(t *testing.T) {
	_, promtool := testenv.PrometheusBins(t)
	rf := readRules(t)
	var alerts []string
	anchors := headingAnchors(t, "../docs/operations.md")
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			if r.Alert == "" {
				t.Errorf("group %s: a rule that is not an alert: %q", g.Name, r.Expr)
				continue
			}
			if r.For == "" {
				t.Errorf("%s: no for:", r.Alert)
			}
			if s := r.Labels["severity"]; s != "critical" && s != "warning" {
				t.Errorf("%s: severity %q, want critical or warning", r.Alert, s)
			}
			if !strings.Contains(r.Annotations["summary"], "{{ $labels.") {
				t.Errorf("%s: the summary names none of the alert's labels: %q", r.Alert, r.Annotations["summary"])
			}
			if want := "docs/operations.md#" + strings.ToLower(r.Alert); r.Annotations["runbook"] != want {
				t.Errorf("%s: runbook %q, want %q", r.Alert, r.Annotations["runbook"], want)
			} else if !anchors[strings.ToLower(r.Alert)] {
				t.Errorf("%s: docs/operations.md has no heading %s for the runbook", r.Alert, r.Alert)
			}
		}
	}
	if len(alerts) < 8 {
		t.Fatalf("%d alerts in prometheus/rules.yaml, want the 8 or more the operations guide describes", len(alerts))
	}

	out, err := exec.Command(promtool, "check", "rules", "prometheus/rules.yaml").CombinedOutput()
	if want := fmt.Sprintf("SUCCESS: %d rules found", len(alerts)); err != nil || !strings.Contains(string(out), want) {
		t.Fatalf("promtool check rules: %v, want %q:\n%s", err, want, out)
	}
	out, err = exec.Command(promtool, "test", "rules", "prometheus/rules_test.yaml").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}

	// Every alert is tested both ways.
	b, err := os.ReadFile("prometheus/rules_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var tf struct {
		RuleFiles []string `yaml:"rule_files"`
		Tests     []struct {
			Name  string `yaml:"name"`
			Cases []struct {
				Alert     string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal(b, &tf); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(tf.RuleFiles, []string{"rules.yaml"}) {
		t.Errorf("rules_test.yaml tests %v, want [rules.yaml]", tf.RuleFiles)
	}
	fires, silent := map[string]int{}, map[string]int{}
	for _, tc := range tf.Tests {
		for _, c := range tc.Cases {
			if len(c.ExpAlerts) > 0 {
				fires[c.Alert]++
			} else {
				silent[c.Alert]++
			}
		}
	}
	for _, a := range alerts {
		if fires[a] == 0 || silent[a] == 0 {
			t.Errorf("%s: %d test cases where it fires, %d where it stays silent; want at least one of each", a, fires[a], silent[a])
		}
	}
}

const prometheusRuleHeader = `# Generated from deploy/prometheus/rules.yaml by
#   go test ./deploy -run TestPrometheusRuleManifest -update
# Do not edit: change rules.yaml and regenerate. Needs the Prometheus Operator's CRDs; its
# Prometheus must select rules with the label below (spec.ruleSelector).
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: backflow
  labels:
    app.kubernetes.io/name: backflow
spec:
`

// TestPrometheusRuleManifest: the PrometheusRule in the Kubernetes manifests holds the same
// groups as deploy/prometheus/rules.yaml.
func TestPrometheusRuleManifest(t *testing.T) {
	src, err := os.ReadFile("prometheus/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if *updateRule {
		var b strings.Builder
		b.WriteString(prometheusRuleHeader)
		_, body, ok := strings.Cut(string(src), "\ngroups:\n")
		if !ok {
			t.Fatal("prometheus/rules.yaml has no top-level groups:")
		}
		b.WriteString("  groups:\n")
		for _, line := range strings.SplitAfter(body, "\n") {
			if strings.TrimSpace(line) != "" {
				b.WriteString("  ")
			}
			b.WriteString(line)
		}
		if err := os.WriteFile("k8s/prometheusrule.yaml", []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var want, got map[string]any
	if err := yaml.Unmarshal(src, &want); err != nil {
		t.Fatal(err)
	}
	d := docs(t, "k8s/prometheusrule.yaml")
	if len(d) != 1 {
		t.Fatalf("k8s/prometheusrule.yaml holds %d documents, want 1", len(d))
	}
	got = d[0]
	if str(got["kind"]) != "PrometheusRule" || str(got["apiVersion"]) != "monitoring.coreos.com/v1" {
		t.Errorf("kind %v, apiVersion %v", got["kind"], got["apiVersion"])
	}
	if !reflect.DeepEqual(at(got, "spec", "groups"), want["groups"]) {
		t.Errorf("k8s/prometheusrule.yaml's groups differ from prometheus/rules.yaml's; run: go test ./deploy -run TestPrometheusRuleManifest -update")
	}
}
