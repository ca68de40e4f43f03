package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	goredis "github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/processors/ingest"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
	"github.com/backflowhq/backflow/sinks/redis"
	"github.com/backflowhq/backflow/test/faultproxy"
	"github.com/backflowhq/backflow/test/stackclean"
	"github.com/backflowhq/backflow/tools/loadgen"
)

// Stack is where the services are: the values of the stack's env file (.stack/env or
// .stack/secure/env), keyed by variable name.
type Stack map[string]string

// Get returns the value of key, or "".
func (s Stack) Get(key string) string { return s[key] }

// Env is one scenario's private pipeline on the shared stack: its own topics, consumer groups,
// ClickHouse database, Feast project and sensitive-word service, with a fault proxy in front
// of ClickHouse, Redis, the registry and the sensitive-word service. The stages run as child
// processes (Start). Close removes everything it made.
type Env struct {
	ID                                                 string
	Inf, GW, Enriched, DLQ, Control                    string
	IngestGroup, SinkGroup, MirrorGroup, FeaturesGroup string
	DB, Project                                        string
	Replication                                        int16 // of every topic it creates: 3 on a 3-broker cluster
	// StreamGroups are the consumer groups of the declared streams a scenario runs, with the
	// topic each reads (scenarios_streams.go): counted in Groups, so in the lag too.
	StreamGroups map[string][]string

	Stack    Stack
	Kafka    kafka.Conn
	Admin    *kgo.Client
	CH       driver.Conn // on the real ClickHouse, the private database
	Redis    goredis.UniversalClient
	Registry *sr.Client // the real registry (loadgen registers its schemas here)

	// The proxies the stages connect through.
	CHProxy, RedisProxy, RegistryProxy, SensitiveProxy *faultproxy.Proxy
	Sensitive                                          *Service // the private sensitive-word service

	Dir  string // configs, storage and logs
	Bins Bins
	Logf func(format string, args ...any)

	mu      sync.Mutex
	procs   []*Proc
	sampler *rssSampler
	cleanup []func()
}

// EnvOptions tune NewEnv.
type EnvOptions struct {
	Stack Stack
	Bins  Bins
	Dir   string // a folder of its own; created
	Logf  func(format string, args ...any)
	// NoProxies connects the stages to the services directly (the secured stack: the proxies
	// would pass TLS through, but the scenario has no use for them).
	NoProxies bool
}

// NewEnv makes a private pipeline. Close it.
func NewEnv(ctx context.Context, o EnvOptions) (_ *Env, err error) {
	id := stackclean.ID("c")
	e := &Env{ID: id, Inf: "inf-" + id, GW: "gw-" + id, Enriched: "enriched-" + id, DLQ: "dlq-" + id, Control: "control-" + id,
		IngestGroup: "ingest-" + id, SinkGroup: "sinkch-" + id, MirrorGroup: "mirror-" + id, FeaturesGroup: "features-" + id,
		DB: "chaos_" + id, Project: "p" + id, Stack: o.Stack, Dir: o.Dir, Bins: o.Bins, Logf: o.Logf, Replication: 1}
	if e.Logf == nil {
		e.Logf = func(string, ...any) {}
	}
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	if err := os.MkdirAll(e.Dir, 0o755); err != nil {
		return nil, err
	}
	e.Kafka, err = kafkaConfig(o.Stack, "chaos")
	if err != nil {
		return nil, err
	}
	if len(e.Kafka.Brokers) >= 3 {
		e.Replication = 3
	}
	if e.Admin, err = e.Kafka.NewClient(); err != nil {
		return nil, err
	}
	e.onClose(e.Admin.Close)
	chCfg, err := clickhouseConfig(o.Stack, "")
	if err != nil {
		return nil, err
	}
	admin, err := chschema.Open(ctx, chCfg)
	if err != nil {
		return nil, fmt.Errorf("clickhouse: %w", err)
	}
	e.onClose(func() {
		admin.Close()
		if e.CH != nil {
			e.CH.Close()
		}
		if e.Redis != nil {
			e.Redis.Close()
		}
	})
	// Registered before anything is made, and run before the connections close: what a
	// half-made env made is removed too.
	e.onClose(func() { e.sweep(admin) })
	if err := admin.Exec(ctx, "CREATE DATABASE "+e.DB); err != nil {
		return nil, fmt.Errorf("create database: %w", err)
	}
	chCfg.Database = e.DB
	if e.CH, err = chschema.Open(ctx, chCfg); err != nil {
		return nil, err
	}
	rcfg, err := redisConfig(o.Stack)
	if err != nil {
		return nil, err
	}
	if e.Redis, err = redis.Open(ctx, rcfg); err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	regCfg, err := registryConfig(o.Stack)
	if err != nil {
		return nil, err
	}
	if e.Registry, err = avro.NewRegistryClient(regCfg); err != nil {
		return nil, err
	}

	if e.Sensitive, err = StartSensitive(ctx, e.Bins.Sensitive, filepath.Join(e.Dir, "sensitive")); err != nil {
		return nil, err
	}
	e.onClose(e.Sensitive.Stop)
	if !o.NoProxies {
		for _, px := range []struct {
			p      **faultproxy.Proxy
			target string
		}{
			{&e.CHProxy, chCfg.Addr}, {&e.RedisProxy, rcfg.Addr},
			{&e.RegistryProxy, hostPort(regCfg.URL)}, {&e.SensitiveProxy, hostPort(e.Sensitive.URL)},
		} {
			if *px.p, err = faultproxy.New(faultproxy.Config{Target: px.target}); err != nil {
				return nil, err
			}
			p := *px.p
			e.onClose(func() { p.Close() })
		}
	}
	e.sampler = newRSSSampler()
	go e.sampler.run()
	e.onClose(e.sampler.stop)
	return e, nil
}

func (e *Env) onClose(f func()) { e.cleanup = append(e.cleanup, f) }

// Close stops every child process and removes what NewEnv made. The children get SIGTERM
// first (SIGKILL 10 s later), so that they leave their consumer groups and those can be
// deleted at once.
func (e *Env) Close() {
	e.mu.Lock()
	procs := e.procs
	e.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(func() { p.Terminate(10 * time.Second) })
	}
	wg.Wait()
	for i := len(e.cleanup) - 1; i >= 0; i-- {
		e.cleanup[i]()
	}
	e.cleanup = nil
}

// sweep removes everything on the stack whose name holds the env's ID: its topics (the stages'
// own too), consumer groups (waiting out the session of a member that was killed), registry
// subjects, ClickHouse database and Redis keys.
func (e *Env) sweep(ch driver.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := stackclean.Stack{Kafka: e.Admin, Registry: e.Registry, CH: ch, Redis: e.Redis}
	if _, err := stackclean.Sweep(ctx, s, stackclean.Match{Contains: e.ID}); err != nil {
		e.Logf("removing what %s made: %v", e.ID, err)
	}
}

// Groups are the pipeline's consumer groups with the topics each reads.
func (e *Env) Groups() map[string][]string {
	icfg := ingest.Config{Group: e.IngestGroup}
	out := map[string][]string{
		e.IngestGroup:            {e.Inf, e.GW, icfg.LoopTopic()},
		e.SinkGroup:              {e.Enriched},
		e.MirrorGroup:            {e.DLQ},
		e.SinkGroup + "-rollups": {e.Enriched + "-rollups"},
		e.FeaturesGroup:          {e.Enriched, e.FeaturesGroup + "-loop"},
	}
	for g, topics := range e.StreamGroups {
		out[g] = topics
	}
	return out
}

// CreateSourceTopics creates the two source topics (3 partitions) before the stages start.
func (e *Env) CreateSourceTopics(ctx context.Context) error {
	return loadgen.EnsureTopics(ctx, e.Admin, 3, e.Replication, e.Inf, e.GW)
}

// Vars are the BACKFLOW_* variables of a child: the stack's connection settings, through the
// proxies where there are some.
func (e *Env) Vars() map[string]string {
	v := map[string]string{}
	for k, val := range e.Stack {
		if strings.HasPrefix(k, "BACKFLOW_") && k != "BACKFLOW_KAFKA_TOOL" && k != "BACKFLOW_KAFKA_TOOL_CONFIG" && k != "BACKFLOW_CLICKHOUSE_HTTP_ADDR" {
			v[k] = val
		}
	}
	v["BACKFLOW_CLICKHOUSE_DATABASE"] = e.DB
	// Without proxies (the secured stack) the stages use the stack's own sensitive-word
	// service, which speaks HTTPS with a token; the private one serves the fault scenarios.
	if e.CHProxy != nil {
		v["BACKFLOW_CLICKHOUSE_ADDR"] = e.CHProxy.Addr()
		v["BACKFLOW_REDIS_ADDR"] = e.RedisProxy.Addr()
		v["BACKFLOW_REGISTRY_URL"] = strings.Replace(e.Stack.Get("BACKFLOW_REGISTRY_URL"), hostPort(e.Stack.Get("BACKFLOW_REGISTRY_URL")), e.RegistryProxy.Addr(), 1)
		v["BACKFLOW_SENSITIVE_WORDS_URL"] = "http://" + e.SensitiveProxy.Addr()
	}
	return v
}

// Config writes a config file for stages (comma-separated) with every name private. extra
// adds keys to sections ("ingest" -> "policy: pass, batch_size: 10"); extra["shutdown_timeout"]
// replaces the default 30s, extra["log_level"] the default info (debug also brings goka's
// table recovery lines), extra["streams"] is the streams list (YAML flow style).
func (e *Env) Config(name, stages string, extra map[string]string) (string, error) {
	sec := func(section, keys string) string {
		return section + ": {" + mergeKeys(keys, extra[section]) + "}\n"
	}
	shutdown := extra["shutdown_timeout"]
	if shutdown == "" {
		shutdown = "30s"
	}
	level := extra["log_level"]
	if level == "" {
		level = "info"
	}
	dir := filepath.Join(e.Dir, name)
	y := "stages: [" + stages + "]\n" +
		"shutdown_timeout: " + shutdown + "\n" +
		"log: {format: json, level: " + level + "}\n" +
		sec("metrics", `addr: "127.0.0.1:0", lag_interval: 2s, ready_timeout: 2s`) +
		sec("kafka", fmt.Sprintf("client_id: %s, table_replication: %d", name, e.Replication)) +
		sec("sensitive_words", "timeout: 5s") +
		sec("ingest", fmt.Sprintf("group: %s, inference_topic: %s, gateway_topic: %s, enriched_topic: %s, dlq_topic: %s, control_topic: %s, storage_dir: %q, batch_linger: 20ms, backoff_max: 2s, breaker_open: 3s",
			e.IngestGroup, e.Inf, e.GW, e.Enriched, e.DLQ, e.Control, filepath.Join(dir, "ingest"))) +
		sec("sink_clickhouse", fmt.Sprintf("group: %s, topic: %s, dlq_topic: %s, mirror_dlq_group: %s, rollup_topic: %s, rollup_group: %s, migrate: true, batch_interval: 500ms, backoff_max: 2s",
			e.SinkGroup, e.Enriched, e.DLQ, e.MirrorGroup, e.Enriched+"-rollups", e.SinkGroup+"-rollups")) +
		sec("sink_features", fmt.Sprintf("group: %s, enriched_topic: %s, dlq_topic: %s, project: %s, storage_dir: %q, request_ttl: 2h",
			e.FeaturesGroup, e.Enriched, e.DLQ, e.Project, filepath.Join(dir, "features")))
	if streams := extra["streams"]; streams != "" {
		y += "streams: " + streams + "\n"
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, fmt.Sprintf("backflow-%d.yaml", time.Now().UnixNano()))
	return path, os.WriteFile(path, []byte(y), 0o600)
}

// StorageDir is where the named child keeps a stage's local table storage (see Config).
func (e *Env) StorageDir(name, stage string) string { return filepath.Join(e.Dir, name, stage) }

// Load sends cfg's traffic to the private source topics with the real registry and returns
// its manifest. The run id is the env's, plus suffix (a second load in one scenario needs its
// own).
func (e *Env) Load(ctx context.Context, cfg loadgen.Config, suffix string) (*loadgen.Manifest, loadgen.Stats, error) {
	cfg.InferenceTopic, cfg.GatewayTopic = e.Inf, e.GW
	return e.load(ctx, suffix, func(prod *kgo.Client, opts loadgen.Options) (loadgen.Stats, error) {
		return loadgen.Run(ctx, cfg, prod, e.Registry, opts)
	})
}

// load runs one loadgen send with a producer of its own, under the env's run id plus suffix,
// and returns the manifest it wrote; a record the brokers did not acknowledge is an error.
func (e *Env) load(ctx context.Context, suffix string, send func(*kgo.Client, loadgen.Options) (loadgen.Stats, error)) (*loadgen.Manifest, loadgen.Stats, error) {
	prod, err := e.Kafka.NewClient(loadgen.ProducerOpts()...)
	if err != nil {
		return nil, loadgen.Stats{}, err
	}
	defer prod.Close()
	var buf bytes.Buffer
	st, err := send(prod, loadgen.Options{RunID: e.ID + suffix, Manifest: &buf})
	if err == nil && st.Failed != 0 {
		err = fmt.Errorf("loadgen: %d records not acknowledged", st.Failed)
	}
	if err != nil {
		return nil, st, err
	}
	m, err := loadgen.ParseManifest(&buf)
	return m, st, err
}

// Loaded is what LoadAsync delivers.
type Loaded struct {
	Manifest *loadgen.Manifest
	Stats    loadgen.Stats
	Err      error
}

// LoadAsync is Load in the background.
func (e *Env) LoadAsync(ctx context.Context, cfg loadgen.Config, suffix string) <-chan Loaded {
	ch := make(chan Loaded, 1)
	go func() {
		m, st, err := e.Load(ctx, cfg, suffix)
		ch <- Loaded{m, st, err}
	}()
	return ch
}

// Lag is how far each group is behind: the sum over its partitions of end minus committed.
func (e *Env) Lag(ctx context.Context) (map[string]int64, error) {
	adm := kadm.NewClient(e.Admin)
	out := map[string]int64{}
	for g, topics := range e.Groups() {
		ends, err := adm.ListEndOffsets(ctx, topics...)
		if err != nil {
			return nil, err
		}
		offs, err := adm.FetchOffsets(ctx, g)
		if err != nil {
			return nil, err
		}
		var lag int64
		var perr error
		ends.Each(func(lo kadm.ListedOffset) {
			if errors.Is(lo.Err, kerr.UnknownTopicOrPartition) {
				return // not created yet (a loop topic before its stage started): nothing to read
			}
			if lo.Err != nil {
				// A partition without a leader (a broker killed) is not "no lag": say so,
				// and the caller asks again.
				perr = fmt.Errorf("end offset of %s/%d: %w", lo.Topic, lo.Partition, lo.Err)
				return
			}
			at := int64(0)
			if c, ok := offs.Lookup(lo.Topic, lo.Partition); ok && c.At >= 0 {
				at = c.At
			}
			lag += lo.Offset - at
		})
		if perr != nil {
			return nil, perr
		}
		out[g] = lag
	}
	return out, nil
}

// WaitCaughtUp polls until every group has lag 0 (and the source topics hold records), or
// timeout passes. It returns how long it waited.
func (e *Env) WaitCaughtUp(ctx context.Context, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	var last map[string]int64
	var lastErr error
	for {
		lag, err := e.Lag(ctx)
		lastErr = err
		if err == nil {
			last = lag
			total := int64(0)
			for _, l := range lag {
				total += l
			}
			if total == 0 {
				return time.Since(start), nil
			}
		}
		if time.Since(start) > timeout || ctx.Err() != nil {
			return time.Since(start), fmt.Errorf("not caught up after %v: lag %v %v", timeout, last, errors.Join(lastErr, ctx.Err()))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// Committed returns group's committed offset per "topic/partition".
func (e *Env) Committed(ctx context.Context, group string) (map[string]int64, error) {
	offs, err := kadm.NewClient(e.Admin).FetchOffsets(ctx, group)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	offs.Each(func(o kadm.OffsetResponse) { out[fmt.Sprintf("%s/%d", o.Topic, o.Partition)] = o.At })
	return out, nil
}

func hostPort(url string) string {
	s := url
	if i := strings.Index(s, "://"); i >= 0 {
		s = s[i+3:]
	}
	if i := strings.IndexByte(s, '/'); i >= 0 {
		s = s[:i]
	}
	return s
}

// mergeKeys joins two "k: v, k: v" lists; a key of extra replaces the same key of base.
func mergeKeys(base, extra string) string {
	var keys []string
	vals := map[string]string{}
	for _, list := range []string{base, extra} {
		for _, kv := range strings.Split(list, ", ") {
			k, v, ok := strings.Cut(kv, ": ")
			if !ok {
				continue
			}
			if _, seen := vals[k]; !seen {
				keys = append(keys, k)
			}
			vals[k] = v
		}
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k + ": " + vals[k]
	}
	return strings.Join(out, ", ")
}
