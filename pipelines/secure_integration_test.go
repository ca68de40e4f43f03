package pipelines_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/IBM/sarama"
	goredis "github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/dlq"
	"github.com/backflowhq/backflow/internal/feast"
	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/internal/secure/securetest"
	"github.com/backflowhq/backflow/pipelines"
	"github.com/backflowhq/backflow/processors/features"
	"github.com/backflowhq/backflow/test/pipelinetest"
	"github.com/backflowhq/backflow/test/proc"
	"github.com/backflowhq/backflow/test/testenv"
	"github.com/backflowhq/backflow/tools/loadgen"
)

// secured is one test's view of the secured stack: its settings, its secrets (to look for
// where they must not be), and the backflow binary it runs the stages with.
type secured struct {
	t       *testing.T
	envFile string
	vals    map[string]string
	cfg     pipelines.Conns
	secrets []string // every secret of the stack, as the files hold them
	bin     string
	loadgen string // the load generator, a binary of its own
}

func newSecured(t *testing.T) *secured {
	t.Helper()
	s := &secured{t: t, vals: testenv.Secure(t), envFile: testenv.SecureEnvFile()}
	cfg, err := pipelines.FromEnv(func(k string) string { return s.vals[k] })
	if err != nil {
		t.Fatalf("secured stack's env file: %v", err)
	}
	s.cfg = cfg
	dir := filepath.Join(filepath.Dir(s.envFile), "secrets")
	files, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.Contains(f.Name(), ".") { // configs that embed a secret, not a secret
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if v := strings.TrimSpace(string(b)); len(v) >= 16 {
			s.secrets = append(s.secrets, v)
		}
	}
	if len(s.secrets) < 6 {
		t.Fatalf("found %d secrets in %s, want the stack's 6 or more", len(s.secrets), dir)
	}
	s.loadgen = testenv.Build(t, "tools/loadgen/cmd/loadgen")
	s.bin = testenv.Build(t, "cmd/backflow")
	return s
}

// leaks returns the secrets (and extra strings) that appear in b.
func (s *secured) leaks(b []byte, extra ...string) []string {
	var found []string
	for _, sec := range append(append([]string{}, s.secrets...), extra...) {
		if sec != "" && bytes.Contains(b, []byte(sec)) {
			found = append(found, sec[:4]+"…")
		}
	}
	return found
}

// start runs `backflow ARGS... --env-file <secured env>` with env on top of this process's
// environment, less every BACKFLOW_* variable (those of the plain stack would win over the file).
// The child is killed when ctx ends, and stopped when the test does.
func (s *secured) start(ctx context.Context, name string, env map[string]string, args ...string) *proc.Proc {
	s.t.Helper()
	bin := s.bin
	if args[0] == "loadgen" { // the load generator is its own binary
		bin, args = s.loadgen, args[1:]
	}
	// Stage commands serve /metrics; a free port each, so stages and parallel runs never collide.
	vars := map[string]string{"BACKFLOW_METRICS_ADDR": "127.0.0.1:0"}
	for k, v := range env {
		vars[k] = v
	}
	p := testenv.Start(s.t, name, bin, proc.Options{Args: append(args, "--env-file", s.envFile), Env: vars, Isolate: true, Stdout: true})
	go func() {
		select {
		case <-ctx.Done():
			p.Kill()
		case <-p.Done():
		}
	}()
	return p
}

// stop sends SIGINT and waits for a clean exit.
func stop(t *testing.T, p *proc.Proc) {
	t.Helper()
	if code, _, err := p.Stop(os.Interrupt, 60*time.Second); err != nil {
		t.Errorf("%s did not stop within 60 s of SIGINT", p.Name)
	} else if code != 0 {
		t.Errorf("%s: exit code %d\n%s", p.Name, code, p.Output())
	}
}

// checkProcs asserts that no secret is in the command line or the environment of the given
// processes, nor in the command line of the secured stack's own services.
func (s *secured) checkProcs(procs ...*proc.Proc) {
	s.t.Helper()
	pids := map[string]int{}
	for _, p := range procs {
		pids[p.Name] = p.Pid()
	}
	runDir := filepath.Join(filepath.Dir(s.envFile), "run")
	files, _ := filepath.Glob(filepath.Join(runDir, "*.pid"))
	for _, f := range files {
		var pid int
		if b, err := os.ReadFile(f); err == nil {
			if _, err := fmt.Sscan(string(b), &pid); err != nil {
				continue
			}
			pids["stack "+strings.TrimSuffix(filepath.Base(f), ".pid")] = pid
		}
	}
	checked := 0
	for name, pid := range pids {
		for _, what := range []string{"cmdline", "environ"} {
			if what == "environ" && strings.HasPrefix(name, "stack ") {
				continue // started by the stack's scripts, checked by their own design (files, not env)
			}
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, what))
			if err != nil {
				s.t.Fatalf("%s (pid %d): %v", name, pid, err)
			}
			if l := s.leaks(b); len(l) > 0 {
				s.t.Errorf("%s (pid %d): /proc/%s shows secrets %v", name, pid, what, l)
			}
			checked++
		}
	}
	if len(files) < 6 {
		s.t.Fatalf("found %d pid files of the secured stack in %s, want 6 (5 services and the registry proxy)", len(files), runDir)
	}
	s.t.Logf("no secret in /proc/*/cmdline of %d processes (and in /proc/*/environ of the %d the test started)", len(pids), len(procs))
}

// TestSecuredPipelineEndToEnd runs the whole pipeline on the secured stack (deploy/local/stack
// --secure up) as the binary an operator runs, configured only by the stack's env file:
// Kafka over SASL_SSL with SCRAM-SHA-512 (franz-go for loadgen and the ClickHouse sink, goka's
// sarama for ingest and the feature sink), the registry over HTTPS with basic auth, ClickHouse
// on its TLS port with a password user, Redis over TLS with an ACL user, and the sensitive-word
// service over HTTPS with its token. loadgen's manifest is the oracle: the ClickHouse views
// hold exactly one row per valid original per slot, every tenant's and model's request_count
// in Redis equals the manifest's, and the DLQ (and its ClickHouse mirror) holds exactly the
// poison. No secret appears in
// the processes' command lines or environments, in their output, or in the DLQ's headers.
func TestSecuredPipelineEndToEnd(t *testing.T) {
	s := newSecured(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	env := pipelinetest.NewEnvOn(t, "sec", s.cfg)
	kcfg, admin, reg, id := env.Kafka, env.Admin, env.Registry, env.ID
	rdb := env.Redis(t, ctx)
	inf, gw, enriched, dlqTopic, control := env.Ingest.InferenceTopic, env.Ingest.GatewayTopic, env.Ingest.EnrichedTopic, env.Ingest.DLQTopic, env.Ingest.ControlTopic
	ingestGroup, chGroup, mirrorGroup, featGroup := env.Ingest.Group, env.SinkGroup, env.MirrorGroup, env.Features.Group
	project := env.Features.Project
	_, conn := env.Database(t, ctx, "")
	env.SourceTopics(t, ctx, 3)

	// Traffic first, through loadgen on the secured listener and registry.
	manifest := filepath.Join(t.TempDir(), "manifest.jsonl")
	lg := s.start(ctx, "loadgen", nil, "loadgen", "--requests", "1000", "--dup-rate", "0.05", "--poison-rate", "0.03",
		"--sensitive-share", "0.2", "--inference-topic", inf, "--gateway-topic", gw, "--run-id", id, "--manifest", manifest, "--no-progress")
	if err := lg.Err(); err != nil {
		t.Fatalf("loadgen: %v\n%s", err, lg.Output())
	}
	mf, err := os.Open(manifest)
	if err != nil {
		t.Fatal(err)
	}
	m, err := loadgen.ParseManifest(mf)
	mf.Close()
	if err != nil {
		t.Fatal(err)
	}

	// The three stages, each its own process.
	storage := t.TempDir()
	ing := s.start(ctx, "ingest", nil, "ingest", "--group", ingestGroup, "--inference-topic", inf, "--gateway-topic", gw,
		"--enriched-topic", enriched, "--dlq-topic", dlqTopic, "--control-topic", control, "--storage-dir", filepath.Join(storage, "ingest"))
	waitCommitted(t, ctx, admin, ingestGroup, ing, inf, gw)
	// The ClickHouse sink shares ingest's DLQ, as in production, and mirrors it into dlq_entries.
	chs := s.start(ctx, "sink-clickhouse", map[string]string{"BACKFLOW_CLICKHOUSE_DATABASE": env.DB}, "sink-clickhouse", "--migrate",
		"--group", chGroup, "--topic", enriched, "--dlq-topic", dlqTopic, "--mirror-dlq-group", mirrorGroup, "--batch-interval", "200ms")
	fs := s.start(ctx, "sink-features", nil, "sink-features", "--group", featGroup, "--enriched-topic", enriched,
		"--dlq-topic", env.Features.DLQTopic, "--project", project, "--storage-dir", filepath.Join(storage, "features"), "--request-ttl", "1h")
	waitCommitted(t, ctx, admin, chGroup, chs, enriched)
	waitCommitted(t, ctx, admin, mirrorGroup, chs, dlqTopic)
	waitCommitted(t, ctx, admin, featGroup, fs, enriched)
	s.checkProcs(ing, chs, fs)

	// The oracle.
	origIDs := map[[2]string]map[string]bool{} // (topic, phase) -> request ids of valid originals
	poison := map[string]string{}              // "topic/partition/offset" -> class
	respAt := map[loadgen.Location]string{}    // RESPONSE originals -> request id
	for _, e := range m.Entries {
		switch e.Kind {
		case loadgen.KindOriginal:
			k := [2]string{e.Topic, e.Phase}
			if origIDs[k] == nil {
				origIDs[k] = map[string]bool{}
			}
			origIDs[k][e.RequestID] = true
			if e.Topic == gw && e.Phase == avro.PhaseResponse {
				respAt[loadgen.Location{Topic: e.Topic, Partition: e.Partition, Offset: e.Offset}] = e.RequestID
			}
		case loadgen.KindPoison:
			poison[fmt.Sprintf("%s/%d/%d", e.Topic, e.Partition, e.Offset)] = e.Class
		}
	}
	if len(origIDs) != 3 || len(poison) == 0 {
		t.Fatalf("manifest: %d slots, %d poison records", len(origIDs), len(poison))
	}

	// ClickHouse: through the deduplicating views, exactly the originals per slot.
	checkClickHouse(t, ctx, conn, origIDs)
	rows, err := conn.Query(ctx, `SELECT origin_topic, origin_partition, origin_offset, class FROM v_dlq_entries`)
	if err != nil {
		t.Fatal(err)
	}
	mirrored := 0
	for rows.Next() {
		var topic, class string
		var p int32
		var off int64
		if err := rows.Scan(&topic, &p, &off, &class); err != nil {
			t.Fatal(err)
		}
		if c, ok := poison[fmt.Sprintf("%s/%d/%d", topic, p, off)]; !ok || c != class {
			t.Fatalf("v_dlq_entries holds %s/%d/%d class %s; manifest: poison %v class %s", topic, p, off, class, ok, c)
		}
		mirrored++
	}
	rows.Close()
	if mirrored != len(poison) {
		t.Fatalf("v_dlq_entries holds %d entries, the manifest %d poison records", mirrored, len(poison))
	}
	t.Logf("ClickHouse DLQ mirror: %d entries = the manifest's poison", mirrored)

	// Redis: every tenant's and model's request_count, from the RESPONSE originals' own fields.
	tenants, models := responseOwners(t, ctx, kcfg, reg, gw, respAt)
	checkFeatures(t, ctx, rdb, project, tenants, models)

	// The DLQ: exactly the poison, with its classes; no header carries a secret.
	var entries int
	if err := dlq.Scan(ctx, kcfg, dlqTopic, func(r *kgo.Record) error {
		e, err := dlq.Decode(r)
		if err != nil {
			return err
		}
		loc := fmt.Sprintf("%s/%d/%d", e.Origin.Topic, e.Origin.Partition, e.Origin.Offset)
		if c, ok := poison[loc]; !ok || c != e.Class {
			return fmt.Errorf("DLQ entry %s class %s; manifest: poison %v class %s", loc, e.Class, ok, c)
		}
		for _, h := range r.Headers {
			if l := s.leaks([]byte(h.Key + "=" + string(h.Value))); len(l) > 0 {
				return fmt.Errorf("DLQ header %s shows secrets %v", h.Key, l)
			}
		}
		entries++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if entries != len(poison) {
		t.Fatalf("DLQ holds %d entries, the manifest %d poison records", entries, len(poison))
	}
	t.Logf("DLQ: %d entries = the manifest's poison, classes equal, no secret in any header", entries)

	for _, p := range []*proc.Proc{fs, chs, ing} {
		stop(t, p)
	}
	for _, p := range []*proc.Proc{lg, ing, chs, fs} {
		out := []byte(p.Output())
		if l := s.leaks(out); len(l) > 0 {
			t.Errorf("%s's output shows secrets %v", p.Name, l)
		}
		if len(out) == 0 && p.Name != "loadgen" {
			t.Errorf("%s wrote no log at all: nothing was checked", p.Name)
		}
	}
	t.Logf("no secret in the output of loadgen, ingest, sink-clickhouse, sink-features (%d, %d, %d, %d bytes)",
		len(lg.Output()), len(ing.Output()), len(chs.Output()), len(fs.Output()))
}

// waitCommitted waits until group has committed every partition of the topics to its end; p is
// the process doing it, reported if it dies first.
func waitCommitted(t *testing.T, ctx context.Context, cl *kgo.Client, group string, p *proc.Proc, topics ...string) {
	t.Helper()
	wctx, cancel := testenv.WhileRunning(ctx, p)
	defer cancel()
	testenv.WaitCommitted(t, wctx, cl, group, topics...)
	t.Logf("%s committed %v to the end", group, topics)
}

func checkClickHouse(t *testing.T, ctx context.Context, conn driver.Conn, want map[[2]string]map[string]bool) {
	t.Helper()
	got := map[[2]string][2]uint64{}
	for _, q := range []string{
		`SELECT source_topic, '', count(), uniqExact(request_id) FROM v_inference_results GROUP BY source_topic`,
		`SELECT source_topic, phase, count(), uniqExact(request_id) FROM v_gateway_logs GROUP BY source_topic, phase`,
	} {
		rows, err := conn.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var topic, phase string
			var n, u uint64
			if err := rows.Scan(&topic, &phase, &n, &u); err != nil {
				t.Fatal(err)
			}
			got[[2]string{topic, phase}] = [2]uint64{n, u}
		}
		rows.Close()
	}
	if len(got) != len(want) {
		t.Fatalf("ClickHouse has slots %v, the manifest %d slots", got, len(want))
	}
	for k, ids := range want {
		if g := got[k]; g[0] != uint64(len(ids)) || g[1] != uint64(len(ids)) {
			t.Fatalf("ClickHouse %v: FINAL count %d, uniqExact %d, manifest originals %d", k, g[0], g[1], len(ids))
		}
		t.Logf("ClickHouse %s %-8s FINAL %d = uniqExact = manifest originals", k[0], k[1], len(ids))
	}
}

// responseOwners decodes the RESPONSE originals to find each one's tenant and model.
func responseOwners(t *testing.T, ctx context.Context, kcfg kafka.Conn, reg *sr.Client, topic string, at map[loadgen.Location]string) (tenants, models map[string]int) {
	t.Helper()
	dec, err := avro.NewDecoder[avro.GatewayLog](reg, avro.GatewayLogSchema, avro.DecoderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kcfg.NewClient(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	tenants, models = map[string]int{}, map[string]int{}
	found := 0
	for found < len(at) {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d RESPONSE originals", found, len(at))
		}
		fetches.EachRecord(func(r *kgo.Record) {
			rid, ok := at[loadgen.Location{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}]
			if !ok {
				return
			}
			g, _, err := dec.Decode(ctx, r.Value)
			if err != nil || g.RequestID != rid {
				t.Fatalf("RESPONSE original %s: %v", rid, err)
			}
			tenants[g.TenantID]++
			models[g.Model]++
			found++
		})
	}
	return tenants, models
}

func checkFeatures(t *testing.T, ctx context.Context, rdb goredis.UniversalClient, project string, tenants, models map[string]int) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		var diffs []string
		check := func(entity string, view string, want map[string]int) {
			for name, n := range want {
				key := feast.RedisKey(project, feast.StringEntity(entity, name))
				got, _, err := testenv.Int64Feature(ctx, rdb, key, view, "request_count") // absent: 0
				if err != nil {
					t.Fatal(err)
				}
				if got != int64(n) {
					diffs = append(diffs, fmt.Sprintf("%s %s: %d, want %d", entity, name, got, n))
				}
			}
		}
		check(features.TenantEntity, features.TenantView, tenants)
		check(features.ModelEntity, features.ModelView, models)
		if len(diffs) == 0 {
			total := 0
			for _, n := range tenants {
				total += n
			}
			t.Logf("Redis: request_count of all %d tenants and %d models equals the manifest (%d requests)", len(tenants), len(models), total)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Redis: %d mismatches, e.g. %v", len(diffs), diffs[:min(5, len(diffs))])
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestSecuredWrongSecretsFailFast: each stage, started with one wrong secret (or a CA that did
// not sign the server's certificate), stops by itself with exit code 1 and a message naming
// the system, its address and the settings to check: it does not retry. Neither the wrong nor
// the right secret appears in what it prints. The deadline only catches a stage that would
// wait forever; it is not a timing assertion.
func TestSecuredWrongSecretsFailFast(t *testing.T) {
	s := newSecured(t)
	wrong := securetest.SecretFile(t, "wrong-secret-0123456789")
	otherCA := securetest.New(t).CAFile
	for _, tt := range []struct {
		name string
		env  map[string]string
		args []string
		want []string // in the output, all of them
	}{
		{"kafka SCRAM password", map[string]string{"BACKFLOW_KAFKA_SASL_PASSWORD_FILE": wrong}, []string{"ingest"},
			[]string{"refused at start-up: kafka at " + s.vals["BACKFLOW_KAFKA_BROKERS"], "SASL_AUTHENTICATION_FAILED", "BACKFLOW_KAFKA_SASL_PASSWORD[_FILE]"}},
		{"kafka CA", map[string]string{"BACKFLOW_KAFKA_TLS_CA_FILE": otherCA}, []string{"sink-features"},
			[]string{"refused at start-up: kafka", "x509", "BACKFLOW_KAFKA_TLS_CA_FILE"}},
		{"registry password", map[string]string{"BACKFLOW_REGISTRY_PASSWORD_FILE": wrong}, []string{"ingest"},
			[]string{"refused at start-up: registry at " + s.vals["BACKFLOW_REGISTRY_URL"], "HTTP 401", "BACKFLOW_REGISTRY_PASSWORD[_FILE]"}},
		{"sensitive-word token", map[string]string{"BACKFLOW_SENSITIVE_WORDS_TOKEN_FILE": wrong}, []string{"ingest"},
			[]string{"refused at start-up: sensitive-words at " + s.vals["BACKFLOW_SENSITIVE_WORDS_URL"], "HTTP 401", "BACKFLOW_SENSITIVE_WORDS_TOKEN[_FILE]"}},
		{"clickhouse password", map[string]string{"BACKFLOW_CLICKHOUSE_PASSWORD_FILE": wrong}, []string{"sink-clickhouse"},
			[]string{"refused at start-up: clickhouse at " + s.vals["BACKFLOW_CLICKHOUSE_ADDR"], "BACKFLOW_CLICKHOUSE_PASSWORD[_FILE]"}},
		{"redis password", map[string]string{"BACKFLOW_REDIS_PASSWORD_FILE": wrong}, []string{"sink-features"},
			[]string{"refused at start-up: redis at " + s.vals["BACKFLOW_REDIS_ADDR"], "WRONGPASS", "BACKFLOW_REDIS_PASSWORD[_FILE]"}},
		{"loadgen kafka password", map[string]string{"BACKFLOW_KAFKA_SASL_PASSWORD_FILE": wrong}, []string{"loadgen", "--requests", "10", "--no-progress"},
			[]string{"refused at start-up: kafka", "SASL_AUTHENTICATION_FAILED"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			args := tt.args
			if args[0] != "loadgen" { // a group of its own, should it get that far
				group := testenv.ID("never-" + strings.ReplaceAll(tt.name, " ", "-") + "-")
				testenv.Groups(t, s.cfg.Kafka, group)
				args = append(args, "--group", group)
			}
			p := s.start(ctx, tt.name, tt.env, args...)
			<-p.Done()
			out := []byte(p.Output())
			if ctx.Err() != nil {
				t.Fatalf("still running after 2 minutes: it retries instead of failing\n%s", out)
			}
			if code := p.ExitCode(); code != 1 {
				t.Fatalf("exit: %v (code %d), want code 1\n%s", p.Err(), code, out)
			}
			for _, w := range tt.want {
				if !bytes.Contains(out, []byte(w)) {
					t.Errorf("output does not mention %q:\n%s", w, out)
				}
			}
			if l := s.leaks(out, "wrong-secret-0123456789"); len(l) > 0 {
				t.Errorf("output shows secrets %v:\n%s", l, out)
			}
			t.Logf("exit 1: %s", strings.TrimSpace(lastLine(out)))
		})
	}
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// TestSecuredKafkaBothMechanismsBothClients: the secured broker knows the stack's user under
// SCRAM-SHA-256 and SCRAM-SHA-512; franz-go and sarama (goka's client) built from the same
// kafka.Conn authenticate with each and read the cluster's metadata.
func TestSecuredKafkaBothMechanismsBothClients(t *testing.T) {
	vals := testenv.Secure(t)
	cfg, err := pipelines.FromEnv(func(k string) string { return vals[k] })
	if err != nil {
		t.Fatal(err)
	}
	for _, mech := range []string{kafka.MechanismSCRAMSHA256, kafka.MechanismSCRAMSHA512} {
		t.Run(mech, func(t *testing.T) {
			k := cfg.Kafka
			k.SASL.Mechanism = mech
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cl, err := k.NewClient()
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			meta, err := kadm.NewClient(cl).BrokerMetadata(ctx)
			if err != nil || len(meta.Brokers) != 1 {
				t.Fatalf("franz-go with %s: %v %v", mech, meta.Brokers, err)
			}
			sc := k.Sarama()
			scl, err := sarama.NewClient(k.Brokers, sc)
			if err != nil {
				t.Fatalf("sarama with %s: %v", mech, err)
			}
			defer scl.Close()
			if bs := scl.Brokers(); len(bs) != 1 {
				t.Fatalf("sarama with %s sees %d brokers", mech, len(bs))
			}
			t.Logf("%s: franz-go and sarama authenticated over TLS; cluster %s", mech, meta.Cluster)
		})
	}
}
