package chschema

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/backflowhq/backflow/internal/conf"
	"github.com/backflowhq/backflow/internal/secure"
)

// Conn says how to reach ClickHouse. Each field's default is its default tag (none: the zero
// value); the tags declare the keys of the config file's clickhouse section.
type Conn struct {
	// Addr is host:port of the native protocol (9000 on a stock server). No default: the
	// local stack's is in the env file it writes.
	Addr string `key:"addr" example:"clickhouse:9000" doc:"host:port of the native protocol"`
	// Database is the database backflow's tables live in.
	Database string `key:"database" default:"default" doc:"database of backflow's tables"`
	// User and Password authenticate. Password comes from the environment or PasswordFile,
	// never a flag or a config file.
	User     string `key:"user" default:"default" doc:"user"`
	Password string `doc:"the user's password"`
	// PasswordFile is a file holding the password (trailing newline ignored), read when the
	// connection is opened. Set Password or PasswordFile, not both.
	PasswordFile string `key:"password_file" secret:"Password" doc:"file holding the user's password"`
	// DialTimeout bounds one connection attempt.
	DialTimeout time.Duration `key:"dial_timeout" default:"5s" doc:"bound on one connection attempt"`
	// TLS encrypts the native protocol; point Addr at the server's secure native port
	// (tcp_port_secure, 9440 on a stock server). Default: off.
	TLS secure.TLS `key:",squash"`
	// Cluster names the ClickHouse cluster (a <remote_servers> entry) backflow's tables live
	// on. Empty (the default): one server with plain tables. Set: migrations run ON CLUSTER
	// and create, for each table, a replicated <table>_local on every shard and a Distributed
	// <table> over them (cluster.go); Addr is the server backflow connects to, and inserts go
	// through the Distributed tables synchronously (insert_distributed_sync). docs/scaling.md.
	Cluster string `key:"cluster" doc:"ClickHouse cluster (<remote_servers>) of backflow's tables; empty: one server"`
	// ZooKeeperPath is each replicated table's path in ZooKeeper, in cluster mode: {shard} is
	// ClickHouse's macro, {database} and {table} are filled in by backflow (18.16 has no such
	// macros). Default DefaultZooKeeperPath.
	ZooKeeperPath string `key:"zookeeper_path" default:"/clickhouse/tables/{shard}/{database}/{table}" doc:"ZooKeeper path of each replicated table in cluster mode ({shard}: the server's macro; {database}, {table}: filled in)"`
}

var clusterName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (c Conn) withDefaults() Conn {
	conf.FillDefaults(&c)
	return c
}

// Validate reports every bad field, each a conf.FieldError naming the field and its value.
func (c Conn) Validate() error {
	c = c.withDefaults()
	var errs []error
	if err := conf.CheckHostPort(c.Addr, false, false); err != nil {
		errs = append(errs, conf.Errorf("Addr", "addr: %w", err))
	}
	if c.DialTimeout < 0 {
		errs = append(errs, conf.Errorf("DialTimeout", "dial timeout: %v is negative", c.DialTimeout))
	}
	if _, err := secure.ReadSecret("password", c.Password, c.PasswordFile); err != nil {
		errs = append(errs, conf.Field("PasswordFile", err))
	}
	errs = append(errs, conf.Nest("TLS", "", c.TLS.Validate()))
	if c.Cluster != "" && !clusterName.MatchString(c.Cluster) {
		errs = append(errs, conf.Errorf("Cluster", "cluster: %q is not a cluster name (letters, digits, '_')", c.Cluster))
	}
	if c.Cluster != "" {
		switch {
		case !strings.HasPrefix(c.ZooKeeperPath, "/"):
			errs = append(errs, conf.Errorf("ZooKeeperPath", "zookeeper path: %q does not start with /", c.ZooKeeperPath))
		case !strings.Contains(c.ZooKeeperPath, "{shard}") || !strings.Contains(c.ZooKeeperPath, "{table}"):
			// Without {shard} the shards would replicate one another; without {table} the
			// tables would share one path.
			errs = append(errs, conf.Errorf("ZooKeeperPath", "zookeeper path: %q lacks {shard} or {table}", c.ZooKeeperPath))
		case strings.ContainsAny(c.ZooKeeperPath, "' \\"):
			errs = append(errs, conf.Errorf("ZooKeeperPath", "zookeeper path: %q holds a quote, a space or a backslash", c.ZooKeeperPath))
		}
	}
	return conf.Nest("", "clickhouse: ", errors.Join(errs...))
}

// Open validates c, connects over the native protocol and pings the server, so a wrong
// address or password fails here with a clear error rather than on the first insert.
// The caller closes the returned connection.
func Open(ctx context.Context, c Conn) (driver.Conn, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c = c.withDefaults()
	pw, err := secure.ReadSecret("clickhouse: password", c.Password, c.PasswordFile)
	if err != nil {
		return nil, err
	}
	tc, err := c.TLS.Config()
	if err != nil {
		return nil, fmt.Errorf("clickhouse: %w", err)
	}
	opts := &ch.Options{
		Protocol:    ch.Native,
		Addr:        []string{c.Addr},
		Auth:        ch.Auth{Database: c.Database, Username: c.User, Password: pw},
		DialTimeout: c.DialTimeout,
		TLS:         tc,
	}
	if c.Cluster != "" {
		opts.Settings = clusterSettings()
	}
	conn, err := ch.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("clickhouse: open %s: %w", c.Addr, err)
	}
	if err := conn.Ping(ctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("clickhouse: ping %s: %w", c.Addr, err)
	}
	return conn, nil
}

// Endpoint says where c points, defaults applied.
func (c Conn) Endpoint() string { return c.withDefaults().Addr }

// DatabaseName is the database of backflow's tables, the default applied.
func (c Conn) DatabaseName() string { return c.withDefaults().Database }
