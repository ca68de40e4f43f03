package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/envfile"
	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/pipelines"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
	"github.com/backflowhq/backflow/sinks/redis"
)

// LoadStack reads the env file the stack script wrote (<repo>/.stack/env, or .stack/secure/env
// for the secured stack). With envWins, variables set in the process environment win, as in
// the tests (testenv).
func LoadStack(path string, envWins bool) (Stack, error) {
	vals, err := envfile.Load(path)
	if err != nil {
		return nil, fmt.Errorf("chaos: the stack's env file (run deploy/local/stack up): %w", err)
	}
	if envWins {
		for k := range vals {
			if v, ok := os.LookupEnv(k); ok {
				vals[k] = v
			}
		}
	}
	return Stack(vals), nil
}

func connConfig(s Stack) (pipelines.Conns, error) { return pipelines.FromEnv(s.Get) }

func kafkaConfig(s Stack, clientID string) (kafka.Conn, error) {
	c, err := connConfig(s)
	c.Kafka.ClientID = clientID
	return c.Kafka, err
}

func clickhouseConfig(s Stack, db string) (chschema.Conn, error) {
	c, err := connConfig(s)
	if db != "" {
		c.ClickHouse.Database = db
	}
	return c.ClickHouse, err
}

func redisConfig(s Stack) (redis.Conn, error) {
	c, err := connConfig(s)
	return c.Redis, err
}

func registryConfig(s Stack) (avro.RegistryConn, error) {
	c, err := connConfig(s)
	return c.Registry, err
}

// StackScript runs deploy/local/stack: the means to stop, kill and restart the stack's
// services (the scripts record each service's pid in .stack/run/NAME.pid).
type StackScript struct {
	Repo   string   // the repository root
	Args   []string // e.g. --secure
	Logf   func(format string, args ...any)
	Secure bool
}

// Run runs the script with args and returns its output.
func (s StackScript) Run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(s.Repo, "deploy/local/stack"), append(append([]string{}, s.Args...), args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("deploy/local/stack %s: %w\n%s", strings.Join(args, " "), err, tail(string(out), 2000))
	}
	return string(out), nil
}

// Pid is the recorded pid of a running service ("clickhouse", "redis", "kafka-2", ...).
func (s StackScript) Pid(name string) (int, error) {
	dir := filepath.Join(s.Repo, ".stack", "run")
	if d := os.Getenv("BACKFLOW_STACK_DIR"); d != "" {
		dir = filepath.Join(d, "run")
	}
	if s.Secure {
		dir = filepath.Join(filepath.Dir(dir), "secure", "run")
	}
	b, err := os.ReadFile(filepath.Join(dir, name+".pid"))
	if err != nil {
		return 0, fmt.Errorf("pid of %s: %w", name, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || syscall.Kill(pid, 0) != nil {
		return 0, fmt.Errorf("%s is not running (pid file %q)", name, strings.TrimSpace(string(b)))
	}
	return pid, nil
}

// Kill sends SIGKILL to a service and waits until it is gone.
func (s StackScript) Kill(name string) error {
	pid, err := s.Pid(name)
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return err
	}
	for i := 0; i < 200 && syscall.Kill(pid, 0) == nil; i++ {
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// Down stops services gracefully (the script's down).
func (s StackScript) Down(ctx context.Context, services ...string) error {
	_, err := s.Run(ctx, append([]string{"down"}, services...)...)
	return err
}

// Up starts services again and waits until they answer (the script's up).
func (s StackScript) Up(ctx context.Context, services ...string) error {
	_, err := s.Run(ctx, append([]string{"up"}, services...)...)
	return err
}

// Leader returns the broker id leading partition p of topic.
func Leader(ctx context.Context, adm *kadm.Client, topic string, p int32) (int32, error) {
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return -1, err
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil {
		return -1, fmt.Errorf("topic %s: %v", topic, errors.Join(td.Err, errors.New("not in the metadata")))
	}
	pd, ok := td.Partitions[p]
	if !ok {
		return -1, fmt.Errorf("topic %s has no partition %d", topic, p)
	}
	return pd.Leader, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
