// Package deploy_test checks the deployment files structurally, since no container engine or
// cluster runs here: every file parses, and the Dockerfiles, the compose file and the
// Kubernetes manifests agree with each other and with backflow's config reference (the keys,
// variables, stages and ports of package pipelines).
package deploy_test

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/backflowhq/backflow/internal/ops"
	"github.com/backflowhq/backflow/pipelines"
)

// docs parses every YAML document of a file into generic values.
func docs(t *testing.T, file string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var out []map[string]any
	for {
		var d map[string]any
		err := dec.Decode(&d)
		if err != nil {
			if err.Error() == "EOF" {
				return out
			}
			t.Fatalf("%s: %v", file, err)
		}
		if d != nil {
			out = append(out, d)
		}
	}
}

// at walks a generic YAML value by keys (string) and indexes (int).
func at(v any, p ...any) any {
	for _, k := range p {
		switch k := k.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func str(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

func strs(v any) []string {
	l, _ := v.([]any)
	out := make([]string, len(l))
	for i, x := range l {
		out[i] = str(x)
	}
	return out
}

// knownVariable reports whether name is a variable backflow reads: a key's, a secret's, or
// one FromEnv reads.
func knownVariable(name string) bool {
	for _, k := range pipelines.Keys() {
		if pipelines.EnvName(k) == name {
			return true
		}
	}
	known := false
	pipelines.FromEnv(func(k string) string {
		if k == name {
			known = true
		}
		return ""
	})
	return known
}

// secretFiles maps the variable of every secret whose *_file key the config sets to the file
// that key names.
func secretFiles(t *testing.T, body string) map[string]string {
	t.Helper()
	var c map[string]any
	if err := yaml.Unmarshal([]byte(body), &c); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, path := range pipelines.Keys() {
		k, _ := pipelines.KeyInfo(path)
		section, key, _ := strings.Cut(path, ".")
		if f := at(c, section, key); k.Secret != "" && f != nil {
			files[k.Secret] = str(f)
		}
	}
	return files
}

// secretVars sets the variable of every secret whose *_file key the config sets: a secret's
// variable wins over its file, so the files (which live in a container) are not read.
func secretVars(t *testing.T, body string) map[string]string {
	t.Helper()
	vars := map[string]string{}
	for v := range secretFiles(t, body) {
		vars[v] = "x"
	}
	return vars
}

// loadConfig checks a config file with pipelines.Load, as backflow check-config does.
func loadConfig(t *testing.T, body string) pipelines.Loaded {
	t.Helper()
	p := filepath.Join(t.TempDir(), "backflow.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	vars := secretVars(t, body)
	l, err := pipelines.Load(p, func(k string) string { return vars[k] })
	if err != nil {
		t.Fatalf("the config does not pass check-config:\n%v", err)
	}
	return l
}

func metricsPort(t *testing.T, l pipelines.Loaded) int {
	t.Helper()
	_, p, err := net.SplitHostPort(l.Config.Metrics.Addr)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	if n == 0 {
		t.Fatalf("metrics.addr %q: a container needs a fixed port", l.Config.Metrics.Addr)
	}
	if strings.HasPrefix(l.Config.Metrics.Addr, "127.") {
		t.Fatalf("metrics.addr %q listens on loopback only: probes and Prometheus cannot reach it", l.Config.Metrics.Addr)
	}
	return n
}

func TestEveryFileParses(t *testing.T) {
	files, _ := filepath.Glob("k8s/*.yaml")
	more, _ := filepath.Glob("compose/*.yaml")
	files = append(append(files, more...), "config.example.yaml")
	if len(files) < 9 {
		t.Fatalf("found only %v", files)
	}
	for _, f := range files {
		if len(docs(t, f)) == 0 {
			t.Errorf("%s holds no YAML document", f)
		}
	}
}

type k8sObjects struct {
	byKind map[string][]map[string]any
}

func loadK8s(t *testing.T) k8sObjects {
	t.Helper()
	o := k8sObjects{byKind: map[string][]map[string]any{}}
	files, _ := filepath.Glob("k8s/*.yaml")
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		for _, d := range docs(t, f) {
			o.byKind[str(d["kind"])] = append(o.byKind[str(d["kind"])], d)
		}
	}
	return o
}

func (o k8sObjects) named(kind, name string) map[string]any {
	for _, d := range o.byKind[kind] {
		if str(at(d, "metadata", "name")) == name {
			return d
		}
	}
	return nil
}

// TestKubernetes: a Deployment per stage running `backflow run --stages <stage>` with the
// ConfigMap's config (which passes check-config), probes on /healthz and /readyz at the
// config's metrics port, scrape annotations naming that port, a grace period longer than
// shutdown_timeout, secret files the Secret provides, goka storage on a writable volume, only
// variables backflow knows, a PodDisruptionBudget selecting the pods, and every file listed in
// the kustomization.
func TestKubernetes(t *testing.T) {
	o := loadK8s(t)
	cm := o.named("ConfigMap", "backflow-config")
	if cm == nil {
		t.Fatal("no ConfigMap backflow-config")
	}
	cfg := loadConfig(t, str(at(cm, "data", "backflow.yaml")))
	port := metricsPort(t, cfg)
	secret := o.named("Secret", "backflow-secrets")
	if secret == nil {
		t.Fatal("no Secret backflow-secrets (secret.example.yaml)")
	}
	secretKeys := at(secret, "stringData").(map[string]any)

	for _, stage := range pipelines.StageNames() {
		t.Run(stage, func(t *testing.T) {
			d := o.named("Deployment", "backflow-"+stage)
			if d == nil {
				t.Fatalf("no Deployment backflow-%s", stage)
			}
			spec := at(d, "spec", "template", "spec")
			labels := at(d, "spec", "template", "metadata", "labels").(map[string]any)
			if sel := at(d, "spec", "selector", "matchLabels").(map[string]any); fmt.Sprint(sel) != fmt.Sprint(labels) || str(labels["app.kubernetes.io/component"]) != stage {
				t.Errorf("selector %v, pod labels %v", sel, labels)
			}
			ann := at(d, "spec", "template", "metadata", "annotations").(map[string]any)
			if str(ann["prometheus.io/scrape"]) != "true" || str(ann["prometheus.io/port"]) != strconv.Itoa(port) || str(ann["prometheus.io/path"]) != "/metrics" {
				t.Errorf("scrape annotations %v, want port %d and /metrics", ann, port)
			}
			if g, _ := at(spec, "terminationGracePeriodSeconds").(int); time.Duration(g)*time.Second <= cfg.Config.ShutdownTimeout {
				t.Errorf("terminationGracePeriodSeconds %d is not above shutdown_timeout %v", g, cfg.Config.ShutdownTimeout)
			}
			c := at(spec, "containers", 0)
			mounts := map[string]string{} // volume name -> mount path
			for i := 0; at(c, "volumeMounts", i) != nil; i++ {
				mounts[str(at(c, "volumeMounts", i, "name"))] = str(at(c, "volumeMounts", i, "mountPath"))
			}
			volumes := map[string]any{}
			for i := 0; at(spec, "volumes", i) != nil; i++ {
				volumes[str(at(spec, "volumes", i, "name"))] = at(spec, "volumes", i)
			}
			// The config file: --config is the ConfigMap's key under its mount.
			var cfgVol string
			for name, v := range volumes {
				if str(at(v, "configMap", "name")) == "backflow-config" {
					cfgVol = name
				}
			}
			wantArgs := []string{"run", "--config", path.Join(mounts[cfgVol], "backflow.yaml"), "--stages", stage}
			if args := strs(at(c, "args")); !slices.Equal(args, wantArgs) {
				t.Errorf("args %v, want %v", args, wantArgs)
			}
			if img := str(at(c, "image")); !strings.HasPrefix(img, "backflow:") {
				t.Errorf("image %q, want the backflow image the Dockerfile builds", img)
			}
			// Probes at the metrics port.
			if p := at(c, "ports", 0); str(at(p, "name")) != "metrics" || at(p, "containerPort") != port {
				t.Errorf("container port %v, want metrics %d", p, port)
			}
			for probe, want := range map[string]string{"livenessProbe": "/healthz", "readinessProbe": "/readyz"} {
				if str(at(c, probe, "httpGet", "path")) != want || str(at(c, probe, "httpGet", "port")) != "metrics" {
					t.Errorf("%s %v, want %s on metrics", probe, at(c, probe), want)
				}
			}
			// Secrets: each *_file key names a key of the Secret under its mount.
			var secVol string
			for name, v := range volumes {
				if str(at(v, "secret", "secretName")) == "backflow-secrets" {
					secVol = name
				}
			}
			files := secretFiles(t, str(at(cm, "data", "backflow.yaml")))
			if len(files) == 0 {
				t.Error("the config names no secret file")
			}
			for _, f := range files {
				if dir, key := path.Split(f); path.Clean(dir) != mounts[secVol] || secretKeys[key] == nil {
					t.Errorf("secret file %s: not a key of backflow-secrets mounted at %s", f, mounts[secVol])
				}
			}
			// goka storage on the writable data volume (the root filesystem is read-only).
			storage := map[string]string{"ingest": cfg.Config.Ingest.StorageDir, "sink-features": cfg.Config.SinkFeatures.StorageDir}[stage]
			if storage != "" && !strings.HasPrefix(storage, mounts["data"]+"/") {
				t.Errorf("storage_dir %s is not on the data volume (%s)", storage, mounts["data"])
			}
			for i := 0; at(c, "env", i) != nil; i++ {
				if name := str(at(c, "env", i, "name")); strings.HasPrefix(name, "BACKFLOW_") && !knownVariable(name) {
					t.Errorf("variable %s is not one backflow reads", name)
				}
			}
			// A PDB selects exactly these pods.
			found := false
			for _, pdb := range o.byKind["PodDisruptionBudget"] {
				if fmt.Sprint(at(pdb, "spec", "selector", "matchLabels")) == fmt.Sprint(labels) && at(pdb, "spec", "maxUnavailable") != nil {
					found = true
				}
			}
			if !found {
				t.Errorf("no PodDisruptionBudget selects %v", labels)
			}
		})
	}
	kust := docs(t, "k8s/kustomization.yaml")[0]
	res := strs(kust["resources"])
	files, _ := filepath.Glob("k8s/*.yaml")
	for _, f := range files {
		b := filepath.Base(f)
		if b != "kustomization.yaml" && b != "secret.example.yaml" && !slices.Contains(res, b) {
			t.Errorf("%s is not in kustomization.yaml", b)
		}
	}
}

// TestCompose: the stack's services, a backflow service per stage running its stage with the
// compose config (which passes check-config and points at the services by name and port),
// the metrics port published, secrets that exist, and a stop grace period longer than
// shutdown_timeout.
func TestCompose(t *testing.T) {
	c := docs(t, "compose/docker-compose.yaml")[0]
	svcs := c["services"].(map[string]any)
	for _, s := range []string{"kafka", "registry", "clickhouse", "redis", "sensitive-words"} {
		if svcs[s] == nil {
			t.Errorf("no service %s", s)
		}
	}
	b, err := os.ReadFile("compose/backflow.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := loadConfig(t, string(b))
	port := metricsPort(t, cfg)
	// The config's addresses are services of this file, on the ports they listen on.
	hostPort := func(addr string) (string, string) {
		addr = strings.TrimPrefix(strings.TrimPrefix(addr, "http://"), "https://")
		addr, _, _ = strings.Cut(addr, "/")
		h, p, _ := net.SplitHostPort(addr)
		return h, p
	}
	listens := map[string]string{"kafka": "9092", "registry": "8080", "clickhouse": "9000", "redis": "6379"}
	if args := strings.Join(strs(at(svcs, "sensitive-words", "command")), " "); strings.Contains(args, "--addr 0.0.0.0:") {
		listens["sensitive-words"] = strings.Fields(strings.SplitN(args, "--addr 0.0.0.0:", 2)[1])[0]
	}
	if adv := str(at(svcs, "kafka", "environment", "KAFKA_ADVERTISED_LISTENERS")); !strings.Contains(adv, "kafka:9092") {
		t.Errorf("kafka advertises %q, the config dials kafka:9092", adv)
	}
	for _, addr := range append(append([]string{}, cfg.Config.Kafka.Brokers...), cfg.Config.Registry.URL, cfg.Config.ClickHouse.Addr, cfg.Config.Redis.Addr, cfg.Config.SensitiveWords.URL) {
		h, p := hostPort(addr)
		if svcs[h] == nil || listens[h] != p {
			t.Errorf("config address %s: service %q listens on %q", addr, h, listens[h])
		}
	}
	secrets := c["secrets"].(map[string]any)
	if f := secretFiles(t, string(b))["BACKFLOW_SENSITIVE_WORDS_TOKEN"]; secrets[path.Base(f)] == nil || path.Dir(f) != "/run/secrets" {
		t.Errorf("sensitive_words.token_file %s is not a compose secret", f)
	}
	for _, stage := range pipelines.StageNames() {
		s := svcs["backflow-"+stage]
		if s == nil {
			t.Errorf("no service backflow-%s", stage)
			continue
		}
		want := []string{"run", "--config", "/etc/backflow/backflow.yaml", "--stages", stage}
		if got := strs(at(s, "command")); !slices.Equal(got, want) {
			t.Errorf("backflow-%s command %v, want %v", stage, got, want)
		}
		if vols := strs(at(s, "volumes")); !slices.Contains(vols, "./backflow.yaml:/etc/backflow/backflow.yaml:ro") {
			t.Errorf("backflow-%s does not mount the config: %v", stage, vols)
		}
		if ports := strings.Join(strs(at(s, "ports")), " "); !strings.HasSuffix(ports, ":"+strconv.Itoa(port)) {
			t.Errorf("backflow-%s publishes %q, not the metrics port %d", stage, ports, port)
		}
		if g, err := time.ParseDuration(str(at(s, "stop_grace_period"))); err != nil || g <= cfg.Config.ShutdownTimeout {
			t.Errorf("backflow-%s stop_grace_period %v is not above shutdown_timeout %v", stage, at(s, "stop_grace_period"), cfg.Config.ShutdownTimeout)
		}
		for _, sec := range strs(at(s, "secrets")) {
			if secrets[sec] == nil {
				t.Errorf("backflow-%s uses secret %s, which is not defined", stage, sec)
			}
		}
		env, _ := at(s, "environment").(map[string]any)
		for name := range env {
			if strings.HasPrefix(name, "BACKFLOW_") && !knownVariable(name) {
				t.Errorf("backflow-%s sets %s, which backflow does not read", stage, name)
			}
		}
		if str(at(s, "image")) != "backflow:latest" || str(at(s, "build", "dockerfile")) != "deploy/Dockerfile" {
			t.Errorf("backflow-%s image %v is not the one deploy/Dockerfile builds", stage, at(s, "image"))
		}
	}
	// What is not the product runs from its own image: the stand-in sensitive-word service
	// builds it, loadgen uses it.
	if str(at(svcs, "sensitive-words", "image")) != "backflow-tools:latest" || str(at(svcs, "sensitive-words", "build", "dockerfile")) != "deploy/tools.Dockerfile" ||
		str(at(svcs, "loadgen", "image")) != "backflow-tools:latest" {
		t.Errorf("sensitive-words %v (%v) and loadgen %v: want the image deploy/tools.Dockerfile builds", at(svcs, "sensitive-words", "image"),
			at(svcs, "sensitive-words", "build", "dockerfile"), at(svcs, "loadgen", "image"))
	}
}

// TestDockerfile: two images, each multi-stage, the builder on go.mod's Go version, no cgo, a
// static final image as a non-root user, and only files that exist copied. deploy/Dockerfile
// is the product, backflow alone (its entrypoint, the default metrics port exposed);
// deploy/tools.Dockerfile what is not the product and compose runs beside it: the stand-in
// sensitive-word service and the load generator.
func TestDockerfile(t *testing.T) {
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goVer := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(string(mod))[1]
	_, dport, _ := net.SplitHostPort(ops.DefaultAddr)
	for _, tc := range []struct {
		file          string
		want, refused []string
	}{
		{"Dockerfile", []string{"./cmd/backflow", "EXPOSE " + dport, `ENTRYPOINT ["/usr/local/bin/backflow"]`}, []string{"./tools/", "/src/tools/"}},
		{"tools.Dockerfile", []string{"./tools/sensitive-words/cmd/sensitive-words", "./tools/loadgen/cmd/loadgen", "sample.tsv"}, []string{"./cmd/backflow"}},
	} {
		b, err := os.ReadFile(tc.file)
		if err != nil {
			t.Fatal(err)
		}
		df := string(b)
		var froms []string
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) > 1 && f[0] == "FROM" {
				froms = append(froms, f[1])
			}
		}
		if len(froms) < 2 {
			t.Fatalf("%s: FROM lines %v: want a multi-stage build", tc.file, froms)
		}
		if !strings.HasPrefix(froms[0], "golang:"+goVer) {
			t.Errorf("%s: builder %s, want golang:%s (go.mod)", tc.file, froms[0], goVer)
		}
		if last := froms[len(froms)-1]; !strings.Contains(last, "distroless/static") && last != "scratch" {
			t.Errorf("%s: final image %s is not a static-only base", tc.file, last)
		}
		for _, want := range append([]string{"CGO_ENABLED=0", "USER nonroot"}, tc.want...) {
			if !strings.Contains(df, want) {
				t.Errorf("%s lacks %q", tc.file, want)
			}
		}
		for _, refused := range tc.refused {
			if strings.Contains(df, refused) {
				t.Errorf("%s builds or copies %q, which belongs in the other image", tc.file, refused)
			}
		}
		for _, m := range regexp.MustCompile(`COPY --from=build[^ ]* /src/(\S+)`).FindAllStringSubmatch(df, -1) {
			if _, err := os.Stat(filepath.Join("..", m[1])); err != nil {
				t.Errorf("%s copies %s, which does not exist", tc.file, m[1])
			}
		}
	}
}

// TestBuildsWithoutCgo: the Dockerfiles build with CGO_ENABLED=0 for static binaries on
// distroless images; every package backflow and the sensitive-word service import must then
// still have Go files to build (a dependency that needs cgo would leave a package empty).
// go list resolves the whole graph under those settings without compiling it.
func TestBuildsWithoutCgo(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if .Incomplete}}{{.ImportPath}}: {{.Error}}{{end}}{{if .CgoFiles}}{{.ImportPath}} needs cgo{{end}}",
		"github.com/backflowhq/backflow/cmd/backflow", "github.com/backflowhq/backflow/tools/sensitive-words/cmd/sensitive-words",
		"github.com/backflowhq/backflow/tools/loadgen/cmd/loadgen")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Fatalf("with CGO_ENABLED=0: %v\n%s", err, out)
	}
}

// TestConfigMapPassesOfflineCheck: the Kubernetes README's recipe, check-config on the
// ConfigMap, always failed off-cluster on the secret files that exist only in the pod. With
// --offline (pipelines.LoadOffline) the ConfigMap as shipped passes, and a real mistake in it
// is still found.
func TestConfigMapPassesOfflineCheck(t *testing.T) {
	cm := loadK8s(t).named("ConfigMap", "backflow-config")
	if cm == nil {
		t.Fatal("no ConfigMap backflow-config")
	}
	body := str(at(cm, "data", "backflow.yaml"))
	p := filepath.Join(t.TempDir(), "backflow.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := pipelines.Load(p, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "cannot read the secret") {
		t.Fatalf("online, the pod's secret files are missing here and must be reported: %v", err)
	}
	l, err := pipelines.LoadOffline(p)
	if err != nil {
		t.Fatalf("the shipped ConfigMap fails check-config --offline:\n%v", err)
	}
	if l.Config.Ingest.Group == "" || len(l.Config.Stages) == 0 {
		t.Fatalf("loaded config %+v", l.Config)
	}
	bad := strings.Replace(body, "sink_clickhouse:", "sink_clickhouse:\n  batch_rows: 0", 1)
	if bad == body {
		t.Fatal("the ConfigMap has no sink_clickhouse section to break")
	}
	if err := os.WriteFile(p, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := pipelines.LoadOffline(p); err == nil || !strings.Contains(err.Error(), "sink_clickhouse.batch_rows") {
		t.Fatalf("--offline missed a real mistake: %v", err)
	}
}

// TestKubernetesClusterOverlay: deploy/k8s/cluster replaces the ConfigMap's backflow.yaml with
// one for a ClickHouse cluster and a Redis Cluster. It passes check-config (with the pod's
// secrets, and --offline), sets both cluster modes, and differs from the base file in the
// clickhouse and redis sections only, so that the two do not drift apart.
func TestKubernetesClusterOverlay(t *testing.T) {
	overlay := docs(t, "k8s/cluster/kustomization.yaml")[0]
	if res := fmt.Sprint(at(overlay, "resources")); res != "[../]" || !strings.Contains(fmt.Sprint(at(overlay, "patches")), "configmap.yaml") {
		t.Fatalf("kustomization: resources %s, patches %v", res, at(overlay, "patches"))
	}
	cm := docs(t, "k8s/cluster/configmap.yaml")[0]
	if str(at(cm, "kind")) != "ConfigMap" || str(at(cm, "metadata", "name")) != "backflow-config" {
		t.Fatalf("the patch is not the ConfigMap backflow-config: %v", cm["metadata"])
	}
	body := str(at(cm, "data", "backflow.yaml"))
	l := loadConfig(t, body)
	if c := l.Config.Conns; c.ClickHouse.Cluster != "backflow" || c.Redis.Mode != "cluster" || len(c.Redis.Addrs) != 3 || c.Redis.Addr != "" {
		t.Errorf("cluster modes: clickhouse %+v, redis %+v", c.ClickHouse, c.Redis)
	}
	p := filepath.Join(t.TempDir(), "backflow.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := pipelines.LoadOffline(p); err != nil {
		t.Errorf("check-config --offline: %v", err)
	}

	var base, cluster map[string]any
	if err := yaml.Unmarshal([]byte(str(at(loadK8s(t).named("ConfigMap", "backflow-config"), "data", "backflow.yaml"))), &base); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(body), &cluster); err != nil {
		t.Fatal(err)
	}
	for _, section := range []string{"clickhouse", "redis"} {
		if reflect.DeepEqual(base[section], cluster[section]) {
			t.Errorf("the %s section is the base's", section)
		}
		delete(base, section)
		delete(cluster, section)
	}
	if !reflect.DeepEqual(base, cluster) {
		t.Errorf("outside clickhouse and redis, the cluster config differs from deploy/k8s/configmap.yaml's:\nbase    %v\ncluster %v", base, cluster)
	}
}
