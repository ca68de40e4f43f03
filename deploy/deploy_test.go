// Package deploy_test checks the deployment files structurally, since no container engine or
// cluster runs here: every file parses, and the Dockerfiles, the compose file and the
// Kubernetes manifests agree with each other and with backflow's config reference (the keys,
// variables, stages and ports of package pipelines).
package deploy_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
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
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsyaml "sigs.k8s.io/yaml"

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

// k8sKinds are the kinds the manifests may hold, by apiVersion and kind, each decoded into its
// Kubernetes API type. A PrometheusRule is the Prometheus Operator's custom resource, with no
// type here: TestPrometheusRuleManifest checks it.
var k8sKinds = map[string]func() any{
	"v1 ConfigMap":                            func() any { return new(corev1.ConfigMap) },
	"v1 Secret":                               func() any { return new(corev1.Secret) },
	"v1 Service":                              func() any { return new(corev1.Service) },
	"apps/v1 StatefulSet":                     func() any { return new(appsv1.StatefulSet) },
	"apps/v1 Deployment":                      func() any { return new(appsv1.Deployment) },
	"policy/v1 PodDisruptionBudget":           func() any { return new(policyv1.PodDisruptionBudget) },
	"monitoring.coreos.com/v1 PrometheusRule": nil,
}

var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// strictObjects decodes every document of a manifest into its Kubernetes API type: YAML to
// JSON (a duplicate key fails), then JSON with unknown fields refused, so that a misspelt or
// misplaced field fails here as `kubectl apply` would refuse or, worse, silently drop it.
func strictObjects(t *testing.T, file string) []any {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []any
	for i, part := range docSeparator.Split(string(b), -1) {
		j, err := sigsyaml.YAMLToJSONStrict([]byte(part))
		if err != nil {
			t.Errorf("%s, document %d: %v", file, i+1, err)
			continue
		}
		if s := string(bytes.TrimSpace(j)); s == "null" || s == "" {
			continue // comments only
		}
		var tm metav1.TypeMeta
		if err := json.Unmarshal(j, &tm); err != nil {
			t.Errorf("%s, document %d: %v", file, i+1, err)
			continue
		}
		newObj, known := k8sKinds[tm.APIVersion+" "+tm.Kind]
		if !known {
			t.Errorf("%s, document %d: %s %q is not a kind the manifests use", file, i+1, tm.Kind, tm.APIVersion)
			continue
		}
		if newObj == nil {
			continue
		}
		obj := newObj()
		dec := json.NewDecoder(bytes.NewReader(j))
		dec.DisallowUnknownFields()
		if err := dec.Decode(obj); err != nil {
			t.Errorf("%s, document %d: not a valid %s %s: %v", file, i+1, tm.APIVersion, tm.Kind, err)
			continue
		}
		out = append(out, obj)
	}
	return out
}

func ptrString[T any](p *T) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}

// k8sManifests are the objects of deploy/k8s (or an overlay's files), by kind and name.
type k8sManifests struct {
	configMaps   map[string]*corev1.ConfigMap
	secrets      map[string]*corev1.Secret
	services     map[string]*corev1.Service
	statefulSets map[string]*appsv1.StatefulSet
	deployments  map[string]*appsv1.Deployment
	pdbs         []*policyv1.PodDisruptionBudget
}

func loadManifests(t *testing.T, files ...string) k8sManifests {
	t.Helper()
	m := k8sManifests{
		configMaps:   map[string]*corev1.ConfigMap{},
		secrets:      map[string]*corev1.Secret{},
		services:     map[string]*corev1.Service{},
		statefulSets: map[string]*appsv1.StatefulSet{},
		deployments:  map[string]*appsv1.Deployment{},
	}
	for _, f := range files {
		for _, o := range strictObjects(t, f) {
			switch o := o.(type) {
			case *corev1.ConfigMap:
				m.configMaps[o.Name] = o
			case *corev1.Secret:
				m.secrets[o.Name] = o
			case *corev1.Service:
				m.services[o.Name] = o
			case *appsv1.StatefulSet:
				m.statefulSets[o.Name] = o
			case *appsv1.Deployment:
				m.deployments[o.Name] = o
			case *policyv1.PodDisruptionBudget:
				m.pdbs = append(m.pdbs, o)
			}
		}
	}
	return m
}

// loadK8s loads every manifest of deploy/k8s (the kustomization is not one).
func loadK8s(t *testing.T) k8sManifests {
	t.Helper()
	files, _ := filepath.Glob("k8s/*.yaml")
	files = slices.DeleteFunc(files, func(f string) bool { return filepath.Base(f) == "kustomization.yaml" })
	return loadManifests(t, files...)
}

// configBody is the config file backflow-config holds.
func (m k8sManifests) configBody(t *testing.T) string {
	t.Helper()
	cm := m.configMaps["backflow-config"]
	if cm == nil || cm.Data["backflow.yaml"] == "" {
		t.Fatal("no ConfigMap backflow-config with a backflow.yaml")
	}
	return cm.Data["backflow.yaml"]
}

// Sizing of the table volumes, as the StatefulSets' comments compute it from docs/scaling.md:
// a week of requests at 1,000 requests/s over the source topics' 3 partitions, and the
// bytes per million requests of each stage's whole table (ingest's claims 0.5 GB; the feature
// table 53 MB on each of three pods).
const (
	sizingRequests   = 1000 * 7 * 24 * 3600 // a week at 1,000 requests/s
	sizingPartitions = 3
)

var tableBytesPerMillion = map[string]float64{
	pipelines.StageIngest:       0.5e9,
	pipelines.StageSinkFeatures: 3 * 53e6,
}

// checkTableVolumes: the stateful stages keep their storage_dir on a volume of the pod's own
// (a volumeClaimTemplate, not a pod volume), large enough for the pod's partitions (every
// partition with standby) and one partition taken over; the stateless stage has no claim.
func checkTableVolumes(t *testing.T, cfg pipelines.Loaded, m k8sManifests) {
	t.Helper()
	storage := map[string]string{pipelines.StageIngest: cfg.Config.Ingest.StorageDir, pipelines.StageSinkFeatures: cfg.Config.SinkFeatures.StorageDir}
	standby := map[string]bool{pipelines.StageIngest: cfg.Config.Ingest.Standby, pipelines.StageSinkFeatures: cfg.Config.SinkFeatures.Standby}
	for _, stage := range pipelines.StageNames() {
		ss := m.statefulSets["backflow-"+stage]
		if ss == nil {
			t.Errorf("no StatefulSet backflow-%s", stage)
			continue
		}
		dir := storage[stage]
		if _, table := tableBytesPerMillion[stage]; !table {
			if len(ss.Spec.VolumeClaimTemplates) != 0 {
				t.Errorf("%s keeps no table, yet claims a volume per pod", stage)
			}
			continue
		}
		if dir == "" {
			t.Errorf("%s: storage_dir unset, so its table goes under TMPDIR, not on a volume of its own", stage)
			continue
		}
		if !path.IsAbs(dir) {
			t.Errorf("%s: storage_dir %q is not an absolute path", stage, dir)
			continue
		}
		// The mount the storage_dir is under (the deepest one).
		var mount corev1.VolumeMount
		for _, vm := range ss.Spec.Template.Spec.Containers[0].VolumeMounts {
			if (dir == vm.MountPath || strings.HasPrefix(dir, strings.TrimSuffix(vm.MountPath, "/")+"/")) && len(vm.MountPath) > len(mount.MountPath) {
				mount = vm
			}
		}
		if mount.Name == "" || mount.ReadOnly {
			t.Errorf("%s: storage_dir %s is under no writable volume mount", stage, dir)
			continue
		}
		for _, v := range ss.Spec.Template.Spec.Volumes {
			if v.Name == mount.Name {
				t.Errorf("%s: storage_dir %s is on the pod volume %q, which a new pod loses; mount a volumeClaimTemplate there", stage, dir, v.Name)
			}
		}
		var claim *corev1.PersistentVolumeClaim
		for i := range ss.Spec.VolumeClaimTemplates {
			if ss.Spec.VolumeClaimTemplates[i].Name == mount.Name {
				claim = &ss.Spec.VolumeClaimTemplates[i]
			}
		}
		if claim == nil {
			t.Errorf("%s: storage_dir %s is on %q, not on a volumeClaimTemplate", stage, dir, mount.Name)
			continue
		}
		if !slices.Contains(claim.Spec.AccessModes, corev1.ReadWriteOnce) {
			t.Errorf("%s: volume access modes %v, want ReadWriteOnce (one pod's own disk)", stage, claim.Spec.AccessModes)
		}
		replicas := int32(1)
		if ss.Spec.Replicas != nil {
			replicas = *ss.Spec.Replicas
		}
		whole := tableBytesPerMillion[stage] * sizingRequests / 1e6
		owned := (sizingPartitions + int(replicas) - 1) / int(replicas)
		want := whole * float64(min(owned+1, sizingPartitions)) / sizingPartitions
		if standby[stage] {
			want = whole
		}
		size := claim.Spec.Resources.Requests[corev1.ResourceStorage]
		if float64(size.Value()) < want {
			t.Errorf("%s: volume of %s (%d bytes), want at least %.0f: %d of %d partitions of a week at 1,000 requests/s (standby %v)",
				stage, size.String(), size.Value(), want, min(owned+1, sizingPartitions), sizingPartitions, standby[stage])
		}
		if p := ss.Spec.PersistentVolumeClaimRetentionPolicy; p != nil && (p.WhenScaled != appsv1.RetainPersistentVolumeClaimRetentionPolicyType || p.WhenDeleted != appsv1.RetainPersistentVolumeClaimRetentionPolicyType) {
			t.Errorf("%s: volume retention %+v: a scale-down or a delete would drop the table's disk", stage, *p)
		}
	}
}

// TestKubernetes: every manifest decodes strictly into its Kubernetes API type. A StatefulSet
// per stage (stable pod names: each pod's Kafka instance id, BACKFLOW_KAFKA_INSTANCE_ID from
// metadata.name) with a headless Service of its own, Parallel pod management and rolling
// updates, running `backflow run --stages <stage>` with the ConfigMap's config (which passes
// check-config, and takes the pod name as kafka.instance_id), probes on /healthz and /readyz
// at the config's metrics port, scrape annotations naming that port, a grace period longer
// than shutdown_timeout, secret files the Secret provides, the goka stages' storage_dir on a
// volume per pod sized by docs/scaling.md, only variables backflow knows, a
// PodDisruptionBudget selecting the pods, and every file listed in the kustomization.
func TestKubernetes(t *testing.T) {
	m := loadK8s(t)
	body := m.configBody(t)
	cfg := loadConfig(t, body)
	port := metricsPort(t, cfg)
	secret := m.secrets["backflow-secrets"]
	if secret == nil {
		t.Fatal("no Secret backflow-secrets (secret.example.yaml)")
	}
	for name := range m.deployments {
		t.Errorf("Deployment %s: a stage runs as a StatefulSet, whose pods keep their names (their instance ids) and disks across a rollout", name)
	}
	// The variable the pods set is kafka.instance_id's, and a pod name is a valid id.
	idVar := pipelines.EnvName("kafka.instance_id")
	if idVar != "BACKFLOW_KAFKA_INSTANCE_ID" {
		t.Fatalf("kafka.instance_id's variable is %s", idVar)
	}
	{
		p := filepath.Join(t.TempDir(), "backflow.yaml")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		vars := secretVars(t, body)
		vars[idVar] = "backflow-sink-features-12"
		l, err := pipelines.Load(p, func(k string) string { return vars[k] })
		if err != nil {
			t.Fatalf("with a pod name as instance id: %v", err)
		}
		if l.Config.Kafka.InstanceID != "backflow-sink-features-12" || !l.Config.Kafka.Static() {
			t.Errorf("kafka.instance_id %q from %s", l.Config.Kafka.InstanceID, idVar)
		}
	}

	for _, stage := range pipelines.StageNames() {
		t.Run(stage, func(t *testing.T) {
			ss := m.statefulSets["backflow-"+stage]
			if ss == nil {
				t.Fatalf("no StatefulSet backflow-%s", stage)
			}
			spec := ss.Spec.Template.Spec
			labels := ss.Spec.Template.Labels
			if ss.Spec.Selector == nil || !maps.Equal(ss.Spec.Selector.MatchLabels, labels) || labels["app.kubernetes.io/component"] != stage {
				t.Errorf("selector %v, pod labels %v", ss.Spec.Selector, labels)
			}
			if ss.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
				t.Errorf("podManagementPolicy %q, want Parallel: a group's members need no start order", ss.Spec.PodManagementPolicy)
			}
			if ss.Spec.UpdateStrategy.Type != appsv1.RollingUpdateStatefulSetStrategyType {
				t.Errorf("updateStrategy %q, want RollingUpdate", ss.Spec.UpdateStrategy.Type)
			}
			// The headless Service the StatefulSet names its pods by.
			if svc := m.services[ss.Spec.ServiceName]; svc == nil {
				t.Errorf("serviceName %q: no such Service", ss.Spec.ServiceName)
			} else if svc.Spec.ClusterIP != corev1.ClusterIPNone || !maps.Equal(svc.Spec.Selector, labels) {
				t.Errorf("Service %s: clusterIP %q, selector %v; want a headless Service (None) selecting %v", svc.Name, svc.Spec.ClusterIP, svc.Spec.Selector, labels)
			}
			ann := ss.Spec.Template.Annotations
			if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != strconv.Itoa(port) || ann["prometheus.io/path"] != "/metrics" {
				t.Errorf("scrape annotations %v, want port %d and /metrics", ann, port)
			}
			if g := spec.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= cfg.Config.ShutdownTimeout {
				t.Errorf("terminationGracePeriodSeconds %s is not above shutdown_timeout %v", ptrString(g), cfg.Config.ShutdownTimeout)
			}
			if len(spec.Containers) != 1 {
				t.Fatalf("%d containers, want backflow alone", len(spec.Containers))
			}
			c := spec.Containers[0]
			mounts := map[string]string{} // volume name -> mount path
			for _, vm := range c.VolumeMounts {
				mounts[vm.Name] = vm.MountPath
			}
			volumes := map[string]corev1.Volume{}
			for _, v := range spec.Volumes {
				volumes[v.Name] = v
			}
			for _, pvc := range ss.Spec.VolumeClaimTemplates {
				if _, dup := volumes[pvc.Name]; dup {
					t.Errorf("volume %q is both a pod volume and a volumeClaimTemplate", pvc.Name)
				}
				volumes[pvc.Name] = corev1.Volume{Name: pvc.Name}
			}
			for name := range mounts {
				if _, ok := volumes[name]; !ok {
					t.Errorf("volumeMount %q names no volume", name)
				}
			}
			// The config file: --config is the ConfigMap's key under its mount.
			var cfgVol, secVol string
			for name, v := range volumes {
				if v.ConfigMap != nil && v.ConfigMap.Name == "backflow-config" {
					cfgVol = name
				}
				if v.Secret != nil && v.Secret.SecretName == "backflow-secrets" {
					secVol = name
				}
			}
			wantArgs := []string{"run", "--config", path.Join(mounts[cfgVol], "backflow.yaml"), "--stages", stage}
			if !slices.Equal(c.Args, wantArgs) {
				t.Errorf("args %v, want %v", c.Args, wantArgs)
			}
			if !strings.HasPrefix(c.Image, "backflow:") {
				t.Errorf("image %q, want the backflow image the Dockerfile builds", c.Image)
			}
			// Probes at the metrics port.
			if len(c.Ports) == 0 || c.Ports[0].Name != "metrics" || int(c.Ports[0].ContainerPort) != port {
				t.Errorf("container ports %v, want metrics %d", c.Ports, port)
			}
			for name, tc := range map[string]struct {
				p    *corev1.Probe
				want string
			}{"livenessProbe": {c.LivenessProbe, "/healthz"}, "readinessProbe": {c.ReadinessProbe, "/readyz"}, "startupProbe": {c.StartupProbe, "/healthz"}} {
				if tc.p == nil || tc.p.HTTPGet == nil || tc.p.HTTPGet.Path != tc.want || tc.p.HTTPGet.Port.String() != "metrics" {
					t.Errorf("%s %+v, want %s on metrics", name, tc.p, tc.want)
				}
			}
			// Secrets: each *_file key names a key of the Secret under its mount.
			files := secretFiles(t, body)
			if len(files) == 0 {
				t.Error("the config names no secret file")
			}
			for _, f := range files {
				if dir, key := path.Split(f); path.Clean(dir) != mounts[secVol] || secret.StringData[key] == "" {
					t.Errorf("secret file %s: not a key of backflow-secrets mounted at %s", f, mounts[secVol])
				}
			}
			// The instance id is the pod's name; every other variable is one backflow reads.
			var idFrom string
			for _, e := range c.Env {
				if e.Name == idVar && e.Value == "" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
					idFrom = e.ValueFrom.FieldRef.FieldPath
				}
				if strings.HasPrefix(e.Name, "BACKFLOW_") && !knownVariable(e.Name) {
					t.Errorf("variable %s is not one backflow reads", e.Name)
				}
			}
			if idFrom != "metadata.name" {
				t.Errorf("%s from %q, want the pod's name (fieldRef metadata.name)", idVar, idFrom)
			}
			// A PDB selects exactly these pods.
			found := false
			for _, pdb := range m.pdbs {
				if pdb.Spec.Selector != nil && maps.Equal(pdb.Spec.Selector.MatchLabels, labels) && pdb.Spec.MaxUnavailable != nil {
					found = true
				}
			}
			if !found {
				t.Errorf("no PodDisruptionBudget selects %v", labels)
			}
		})
	}
	checkTableVolumes(t, cfg, m)

	kust := docs(t, "k8s/kustomization.yaml")[0]
	res := strs(kust["resources"])
	files, _ := filepath.Glob("k8s/*.yaml")
	for _, f := range files {
		b := filepath.Base(f)
		if b != "kustomization.yaml" && b != "secret.example.yaml" && !slices.Contains(res, b) {
			t.Errorf("%s is not in kustomization.yaml", b)
		}
	}
	for _, r := range res {
		if _, err := os.Stat(filepath.Join("k8s", r)); err != nil {
			t.Errorf("kustomization.yaml lists %s: %v", r, err)
		}
	}
	// The README names files that exist (a renamed manifest is renamed there too).
	readme, err := os.ReadFile("k8s/README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile("`([a-z0-9./-]+\\.yaml)`").FindAllStringSubmatch(string(readme), -1) {
		f := m[1]
		if f == "backflow.yaml" { // the ConfigMap's key
			continue
		}
		_, err1 := os.Stat(filepath.Join("k8s", f))
		_, err2 := os.Stat(filepath.Join("k8s/cluster", f))
		_, err3 := os.Stat(filepath.Join("..", f))
		if err1 != nil && err2 != nil && err3 != nil {
			t.Errorf("k8s/README.md names %s, which does not exist", f)
		}
	}
}

// TestCompose: the stack's services, a backflow service per stage running its stage with the
// compose config (which passes check-config and points at the services by name and port),
// the metrics port published, secrets that exist, a stop grace period longer than
// shutdown_timeout, an instance id of its own per stage, and the goka stages' storage_dir on a
// named volume.
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
	ids := map[string]string{} // instance id -> service
	volumes, _ := c["volumes"].(map[string]any)
	storage := map[string]string{pipelines.StageIngest: cfg.Config.Ingest.StorageDir, pipelines.StageSinkFeatures: cfg.Config.SinkFeatures.StorageDir}
	for _, stage := range pipelines.StageNames() {
		s := svcs["backflow-"+stage]
		if s == nil {
			t.Errorf("no service backflow-%s", stage)
			continue
		}
		// A stable instance id of its own (one container per stage).
		id := str(at(s, "environment", pipelines.EnvName("kafka.instance_id")))
		if id == "" || ids[id] != "" {
			t.Errorf("backflow-%s: instance id %q, want one of its own (taken by %q)", stage, id, ids[id])
		}
		ids[id] = stage
		// The table storage on a named volume, kept when the container is re-created.
		if dir := storage[stage]; dir != "" {
			found := false
			for _, v := range strs(at(s, "volumes")) {
				src, dst, _ := strings.Cut(v, ":")
				if _, named := volumes[src]; named && strings.HasPrefix(dir, dst+"/") {
					found = true
				}
			}
			if !found {
				t.Errorf("backflow-%s: storage_dir %s is on no named volume", stage, dir)
			}
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
	body := loadK8s(t).configBody(t)
	p := filepath.Join(t.TempDir(), "backflow.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := pipelines.Load(p, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "cannot read the secret") {
		t.Fatalf("online, the pod's secret files are missing here and must be reported: %v", err)
	}
	l, err := pipelines.LoadOffline(p, nil)
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
	if _, err := pipelines.LoadOffline(p, nil); err == nil || !strings.Contains(err.Error(), "sink_clickhouse.batch_rows") {
		t.Fatalf("--offline missed a real mistake: %v", err)
	}
}

// TestKubernetesClusterOverlay: deploy/k8s/cluster replaces the ConfigMap's backflow.yaml with
// one for a ClickHouse cluster and a Redis Cluster, and patches nothing else: its StatefulSets
// are the base's. The patch decodes strictly as a ConfigMap; its config passes check-config
// (with the pod's secrets, and --offline), sets both cluster modes, keeps the goka stages'
// storage_dir on the base StatefulSets' volumes per pod, and differs from the base file in
// the clickhouse and redis sections only, so that the two do not drift apart.
func TestKubernetesClusterOverlay(t *testing.T) {
	overlay := docs(t, "k8s/cluster/kustomization.yaml")[0]
	if res := fmt.Sprint(at(overlay, "resources")); res != "[../]" || fmt.Sprint(at(overlay, "patches")) != "[map[path:configmap.yaml]]" {
		t.Fatalf("kustomization: resources %s, patches %v; want the base with its ConfigMap patched alone", res, at(overlay, "patches"))
	}
	patch := loadManifests(t, "k8s/cluster/configmap.yaml")
	if len(patch.configMaps) != 1 || len(patch.statefulSets)+len(patch.services)+len(patch.deployments)+len(patch.pdbs)+len(patch.secrets) != 0 {
		t.Fatalf("the patch holds %d ConfigMaps and other objects; want the ConfigMap backflow-config alone", len(patch.configMaps))
	}
	body := patch.configBody(t)
	l := loadConfig(t, body)
	base := loadK8s(t)
	checkTableVolumes(t, l, base)
	if c := l.Config.Conns; c.ClickHouse.Cluster != "backflow" || c.Redis.Mode != "cluster" || len(c.Redis.Addrs) != 3 || c.Redis.Addr != "" {
		t.Errorf("cluster modes: clickhouse %+v, redis %+v", c.ClickHouse, c.Redis)
	}
	p := filepath.Join(t.TempDir(), "backflow.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := pipelines.LoadOffline(p, nil); err != nil {
		t.Errorf("check-config --offline: %v", err)
	}

	var baseCfg, cluster map[string]any
	if err := yaml.Unmarshal([]byte(base.configBody(t)), &baseCfg); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(body), &cluster); err != nil {
		t.Fatal(err)
	}
	for _, section := range []string{"clickhouse", "redis"} {
		if reflect.DeepEqual(baseCfg[section], cluster[section]) {
			t.Errorf("the %s section is the base's", section)
		}
		delete(baseCfg, section)
		delete(cluster, section)
	}
	if !reflect.DeepEqual(baseCfg, cluster) {
		t.Errorf("outside clickhouse and redis, the cluster config differs from deploy/k8s/configmap.yaml's:\nbase    %v\ncluster %v", baseCfg, cluster)
	}
}
