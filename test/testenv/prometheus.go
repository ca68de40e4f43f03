package testenv

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backflowhq/backflow/internal/alerts"
	"github.com/backflowhq/backflow/test/proc"
)

var (
	promOnce sync.Once
	promErr  error
)

// PrometheusBins returns the paths of Debian's prometheus and promtool. When they are missing
// it installs the package with the local stack's own installer (deploy/local/lib/prometheus.sh,
// apt-get), once per test process, and fails t if that fails. Under -short it installs nothing:
// it skips t instead, saying why.
func PrometheusBins(t testing.TB) (prometheus, promtool string) {
	t.Helper()
	look := func() (string, string, error) {
		p, err := exec.LookPath("prometheus")
		if err != nil {
			return "", "", err
		}
		pt, err := exec.LookPath("promtool")
		return p, pt, err
	}
	if p, pt, err := look(); err == nil {
		return p, pt
	}
	if testing.Short() {
		t.Skip("prometheus and promtool are not installed (Debian package prometheus); -short installs nothing")
	}
	promOnce.Do(func() {
		lib := filepath.Join(RepoRoot(), "deploy", "local", "lib")
		cmd := exec.Command("bash", "-c", `. "$0/common.sh" && . "$0/prometheus.sh" && prometheus_install`, lib)
		out, err := cmd.CombinedOutput()
		if err != nil {
			promErr = fmt.Errorf("installing Debian's prometheus package: %v\n%s", err, out)
		}
	})
	if promErr != nil {
		t.Fatal(promErr)
	}
	p, pt, err := look()
	if err != nil {
		t.Fatalf("prometheus installed, but not on PATH: %v", err)
	}
	return p, pt
}

// PrometheusOptions is what StartPrometheus runs.
type PrometheusOptions struct {
	// Rules is the rule file to load.
	Rules string
	// Targets maps a scrape job's name to its host:port targets.
	Targets map[string][]string
	// Interval is both the scrape and the rule evaluation interval. Default: 1s.
	Interval time.Duration
}

// Prometheus is a private Prometheus server of a test.
type Prometheus struct {
	URL  string
	Proc *proc.Proc
}

// StartPrometheus runs a private Prometheus (Debian's, see PrometheusBins) on a free loopback
// port with its data in a temporary folder, waits until it is ready with its rules loaded, and
// stops it when the test ends.
func StartPrometheus(t testing.TB, o PrometheusOptions) *Prometheus {
	t.Helper()
	bin, promtool := PrometheusBins(t)
	if o.Interval == 0 {
		o.Interval = time.Second
	}
	dir := t.TempDir()
	port := FreePort(t)
	var b strings.Builder
	fmt.Fprintf(&b, "global: {scrape_interval: %s, evaluation_interval: %s}\nrule_files: [%q]\nscrape_configs:\n", o.Interval, o.Interval, o.Rules)
	for job, targets := range o.Targets {
		q := make([]string, len(targets))
		for i, tg := range targets {
			q[i] = fmt.Sprintf("%q", tg)
		}
		fmt.Fprintf(&b, "  - job_name: %q\n    static_configs: [{targets: [%s]}]\n", job, strings.Join(q, ", "))
	}
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "config", cfg).CombinedOutput(); err != nil {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	p := Start(t, "prometheus", bin, proc.Options{Args: []string{"--config.file=" + cfg,
		"--storage.tsdb.path=" + filepath.Join(dir, "data"), "--web.listen-address=" + addr}})
	pr := &Prometheus{URL: "http://" + addr, Proc: p}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		if resp, err := http.Get(pr.URL + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return pr
			}
		}
		if !p.Running() {
			t.Fatalf("prometheus exited:\n%s", p.Tail(30))
		}
		select {
		case <-ctx.Done():
			t.Fatalf("prometheus not ready after a minute:\n%s", p.Tail(30))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Alerts is a client of its /api/v1/alerts.
func (p *Prometheus) Alerts(t testing.TB) *alerts.Client {
	t.Helper()
	c, err := alerts.New(alerts.Conn{URL: p.URL})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
