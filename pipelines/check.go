package pipelines

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/internal/moderation"
	"github.com/backflowhq/backflow/sinks/clickhouse"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
	"github.com/backflowhq/backflow/sinks/redis"
)

// CheckResult is what one system answered.
type CheckResult struct {
	System  string        // "kafka", "registry", "clickhouse", "redis", "sensitive-words"
	Address string        // where it was asked
	Detail  string        // what it said about itself (version, broker count), when it answered
	Err     error         // nil when it answered
	Took    time.Duration // round trip of the check
}

// The systems Check asks, by the names CheckResult.System carries.
const (
	SystemKafka          = "kafka"
	SystemRegistry       = "registry"
	SystemClickHouse     = "clickhouse"
	SystemRedis          = "redis"
	SystemSensitiveWords = "sensitive-words"
)

// Check asks every system in c for a real answer, concurrently, and returns one result per
// system in a fixed order. Each check is bounded by ctx.
func Check(ctx context.Context, c Conns) []CheckResult {
	return CheckSystems(ctx, c, SystemKafka, SystemRegistry, SystemClickHouse, SystemRedis, SystemSensitiveWords)
}

// CheckSystems is Check for the named systems only, in the order given. An unknown name gets a
// result with an error, and a system whose address is not given one matching ErrConfig (see
// Conns.Require), without being asked.
func CheckSystems(ctx context.Context, c Conns, systems ...string) []CheckResult {
	type check struct {
		addr string
		run  func(context.Context) (string, error)
	}
	all := map[string]check{
		SystemKafka:          {c.Kafka.Endpoint(), func(ctx context.Context) (string, error) { return checkKafka(ctx, c) }},
		SystemRegistry:       {c.Registry.Endpoint(), func(ctx context.Context) (string, error) { return checkRegistry(ctx, c) }},
		SystemClickHouse:     {c.ClickHouse.Endpoint(), func(ctx context.Context) (string, error) { return checkClickHouse(ctx, c) }},
		SystemRedis:          {c.Redis.Endpoint(), func(ctx context.Context) (string, error) { return checkRedis(ctx, c) }},
		SystemSensitiveWords: {c.SensitiveWords.URL, func(ctx context.Context) (string, error) { return checkSensitiveWords(ctx, c) }},
	}
	out := make([]CheckResult, len(systems))
	var wg sync.WaitGroup
	for i, name := range systems {
		ch, ok := all[name]
		if !ok {
			out[i] = CheckResult{System: name, Err: fmt.Errorf("pipelines: unknown system %q", name)}
			continue
		}
		if !c.IsSet(name) {
			out[i] = CheckResult{System: name, Err: c.Require(name)}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			detail, err := checkAddressed(ctx, c, name, ch.run)
			out[i] = CheckResult{System: name, Address: ch.addr, Detail: detail, Err: err, Took: time.Since(start)}
		}()
	}
	wg.Wait()
	return out
}

// ErrMisaddressed: a system answered, but not as the system it should be: a registry URL whose
// path is wrong answers 404 to its subject list; ClickHouse's address at its HTTP port, or
// Kafka's at Redis', answers as an HTTP server or as Redis (checkAddressed). Waiting does not
// fix it, so Preflight refuses to start (ErrRefused) and ping shows it as MISADDRESSED, naming
// the setting to check.
var ErrMisaddressed = errors.New("pipelines: not the expected service at this address")

// ErrRefused marks a Preflight failure: a system refused our credentials, or the TLS
// handshake with it failed. No retry fixes that; the operator does.
var ErrRefused = errors.New("pipelines: refused at start-up")

// DefaultPreflightTimeout bounds Preflight when the caller gives no timeout.
const DefaultPreflightTimeout = 15 * time.Second

// Preflight is how a stage starts: it asks each of the named systems once, concurrently,
// within timeout (DefaultPreflightTimeout when 0), and fails with ErrRefused when one of them
// refused our credentials (Kafka SASL, registry or service 401/403, ClickHouse or Redis
// authentication) or the TLS handshake failed. The error names the system, its address and
// the settings to check, and never the secret.
//
// This is the fail-fast half of the rule for authentication errors. The other half is that
// once a stage runs, a 401 or a refused connection is retried like an outage (credentials
// may be rotated under it; records wait and are never dead-lettered for it). A system that is
// merely down at start-up is not an error here either: it is returned in the results, and
// the stage waits for it as it always does.
func Preflight(ctx context.Context, c Conns, timeout time.Duration, systems ...string) ([]CheckResult, error) {
	if timeout <= 0 {
		timeout = DefaultPreflightTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	results := CheckSystems(ctx, c, systems...)
	var errs []error
	for _, r := range results {
		switch {
		case r.Err != nil && errors.Is(r.Err, ErrMisaddressed):
			errs = append(errs, fmt.Errorf("%w: %s at %s: %w (check %s)", ErrRefused, r.System, r.Address, r.Err, addressOf(r.System)))
		case r.Err != nil && isRefusal(r.System, r.Err):
			errs = append(errs, fmt.Errorf("%w: %s at %s: %w (check %s)", ErrRefused, r.System, r.Address, r.Err, settingsOf(r.System)))
		}
	}
	return results, errors.Join(errs...)
}

// StartUp is how a process meets its systems: Preflight, then one warning for each system that
// is only down, which the caller then waits for as it does mid-run. It returns Preflight's
// refusal, if any.
func StartUp(ctx context.Context, c Conns, log *slog.Logger, systems ...string) error {
	checked, err := Preflight(ctx, c, 0, systems...)
	if err != nil {
		return err
	}
	for _, r := range checked {
		if r.Err != nil {
			log.Warn("not answering at start-up; waiting for it", "system", r.System, "address", r.Address, "error", r.Err)
		}
	}
	return nil
}

// isRefusal asks the system's own package whether err is an authentication or TLS failure.
func isRefusal(system string, err error) bool {
	switch system {
	case SystemKafka:
		return kafka.IsAuthError(err)
	case SystemRegistry:
		return avro.IsAuthError(err)
	case SystemClickHouse:
		return clickhouse.IsAuthError(err)
	case SystemRedis:
		return redis.IsAuthError(err)
	case SystemSensitiveWords:
		return moderation.IsAuthError(err)
	}
	return false
}

// sectionOf is the config section of each system's connection.
var sectionOf = map[string]string{SystemKafka: "kafka", SystemRegistry: "registry", SystemClickHouse: "clickhouse",
	SystemRedis: "redis", SystemSensitiveWords: "sensitive_words"}

// addressOf names the variable of the system's address: its key addr, brokers or url.
func addressOf(system string) string {
	for _, k := range KeysUnder(sectionOf[system]) {
		if _, name, _ := strings.Cut(k.Path, "."); name == "addr" || name == "brokers" || name == "url" {
			return k.Env
		}
	}
	return sectionOf[system]
}

// settingsOf names the variables an operator checks after a refusal by system: the user and
// SASL keys of its section, its secret (or the file holding it), and its CA file.
func settingsOf(system string) string {
	var out []string
	for _, k := range KeysUnder(sectionOf[system]) {
		_, name, _ := strings.Cut(k.Path, ".")
		switch {
		case k.Secret != "":
			out = append(out, k.Secret+"[_FILE]")
		case slices.Contains([]string{"sasl_mechanism", "sasl_username", "sasl_oauth_token_url", "sasl_oauth_token_file", "username", "user", "tls_ca_file"}, name):
			out = append(out, k.Env)
		}
	}
	return strings.Join(out, ", ")
}

func checkKafka(ctx context.Context, c Conns) (string, error) {
	cl, err := c.Kafka.NewClient()
	if err != nil {
		return "", err
	}
	defer cl.Close()
	meta, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	if err != nil {
		return "", fmt.Errorf("kafka: metadata: %w", err)
	}
	return fmt.Sprintf("cluster %s, %d broker(s), controller %d", meta.Cluster, len(meta.Brokers), meta.Controller), nil
}

func checkRegistry(ctx context.Context, c Conns) (string, error) {
	cl, err := avro.NewRegistryClient(c.Registry)
	if err != nil {
		return "", err
	}
	subjects, err := cl.Subjects(ctx)
	if err != nil {
		var re *sr.ResponseError
		if errors.As(err, &re) && re.StatusCode == http.StatusNotFound {
			return "", fmt.Errorf("%w: registry: HTTP 404 for its subject list: no Confluent-compatible API under this URL (is the path right? Apicurio serves it under /apis/ccompat/v7): %w", ErrMisaddressed, err)
		}
		if errors.As(err, &re) {
			return "", fmt.Errorf("avro: registry: HTTP %d: %w", re.StatusCode, err)
		}
		return "", fmt.Errorf("avro: registry: %w", err)
	}
	return fmt.Sprintf("%d subject(s)", len(subjects)), nil
}

func checkClickHouse(ctx context.Context, c Conns) (string, error) {
	conn, err := chschema.Open(ctx, c.ClickHouse)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	v, err := conn.ServerVersion()
	if err != nil {
		return "", fmt.Errorf("clickhouse: server version: %w", err)
	}
	return "ClickHouse " + v.Version.String(), nil
}

func checkRedis(ctx context.Context, c Conns) (string, error) {
	rdb, err := redis.Open(ctx, c.Redis)
	if err != nil {
		return "", err
	}
	defer rdb.Close()
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return "", fmt.Errorf("features: redis info: %w", err)
	}
	name := "Redis"
	if c.Redis.Mode == redis.ModeCluster {
		slots, err := rdb.ClusterSlots(ctx).Result()
		if err != nil {
			return "", fmt.Errorf("features: redis cluster slots: %w", err)
		}
		masters := map[string]bool{}
		for _, s := range slots {
			if len(s.Nodes) > 0 {
				masters[s.Nodes[0].Addr] = true
			}
		}
		name = fmt.Sprintf("Redis Cluster of %d masters,", len(masters))
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return name + " " + v, nil
		}
	}
	return name, nil
}

func checkSensitiveWords(ctx context.Context, c Conns) (string, error) {
	cl, err := moderation.New(c.SensitiveWords)
	if err != nil {
		return "", err
	}
	defer cl.Close()
	res, err := cl.Check(ctx, []moderation.Item{{ID: "ping", Text: "backflow ping"}})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("checked 1 text: %s", res[0].Verdict), nil
}
