package pipelines

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/moderation"
	"github.com/backflowhq/backflow/sinks/clickhouse"
	"github.com/backflowhq/backflow/sinks/features"
)

// CheckResult is what one system answered.
type CheckResult struct {
	System  string        // "kafka", "registry", "clickhouse", "redis", "sensitive-words"
	Address string        // where it was asked
	Detail  string        // what it said about itself (version, broker count), when it answered
	Err     error         // nil when it answered
	Took    time.Duration // round trip of the check
}

// Check asks every system in c for a real answer, concurrently, and returns one result per
// system in a fixed order. Each check is bounded by ctx.
func Check(ctx context.Context, c Config) []CheckResult {
	checks := []struct {
		system, addr string
		run          func(context.Context) (string, error)
	}{
		{"kafka", c.Kafka.Endpoint(), func(ctx context.Context) (string, error) { return checkKafka(ctx, c) }},
		{"registry", c.Registry.Endpoint(), func(ctx context.Context) (string, error) { return checkRegistry(ctx, c) }},
		{"clickhouse", c.ClickHouse.Endpoint(), func(ctx context.Context) (string, error) { return checkClickHouse(ctx, c) }},
		{"redis", c.Redis.Endpoint(), func(ctx context.Context) (string, error) { return checkRedis(ctx, c) }},
		{"sensitive-words", c.Moderation.URL, func(ctx context.Context) (string, error) { return checkModeration(ctx, c) }},
	}
	out := make([]CheckResult, len(checks))
	var wg sync.WaitGroup
	for i, ch := range checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			detail, err := ch.run(ctx)
			out[i] = CheckResult{System: ch.system, Address: ch.addr, Detail: detail, Err: err, Took: time.Since(start)}
		}()
	}
	wg.Wait()
	return out
}

func checkKafka(ctx context.Context, c Config) (string, error) {
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

func checkRegistry(ctx context.Context, c Config) (string, error) {
	cl, err := avro.NewRegistryClient(c.Registry)
	if err != nil {
		return "", err
	}
	subjects, err := cl.Subjects(ctx)
	if err != nil {
		return "", fmt.Errorf("avro: registry: %w", err)
	}
	return fmt.Sprintf("%d subject(s)", len(subjects)), nil
}

func checkClickHouse(ctx context.Context, c Config) (string, error) {
	conn, err := clickhouse.Open(ctx, c.ClickHouse)
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

func checkRedis(ctx context.Context, c Config) (string, error) {
	rdb, err := features.Open(ctx, c.Redis)
	if err != nil {
		return "", err
	}
	defer rdb.Close()
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return "", fmt.Errorf("features: redis info: %w", err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return "Redis " + v, nil
		}
	}
	return "Redis", nil
}

func checkModeration(ctx context.Context, c Config) (string, error) {
	cl, err := moderation.New(c.Moderation)
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
