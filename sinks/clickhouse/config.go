// Package clickhouse is backflow's ClickHouse sink. Start with Sink (a consumer group over the
// enriched topic that writes rows, a ledger, then commits) and Migrate (the numbered DDL in
// migrations/, tracked in backflow_migrations). Conn says where ClickHouse is; Config what
// the sink reads and how it batches. Rows are versioned by Version, so re-writes collapse in
// the ReplacingMergeTree tables and the v_* views (FINAL) show one row per key.
//
// clickhouse-go v2 is used over the native protocol only, because the HTTP protocol fails
// against ClickHouse 18.16 ("Unknown setting client_protocol_version"). Against 18.16, an INSERT
// must name its columns and go through PrepareBatch (conn.Exec of an INSERT hangs); DDL must do
// without TTL, Map, DateTime64 and ADD COLUMN IF NOT EXISTS.
package clickhouse

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/backflowhq/backflow/internal/secure"
)

// DefaultAddr is the local stack's ClickHouse native-protocol address.
const DefaultAddr = "127.0.0.1:19000"

// Conn says how to reach ClickHouse.
type Conn struct {
	// Addr is host:port of the native protocol (9000 on a stock server). Default: DefaultAddr.
	Addr string
	// Database is the database backflow's tables live in. Default: "default".
	Database string
	// User and Password authenticate. Password comes from the environment
	// (BACKFLOW_CLICKHOUSE_PASSWORD) or PasswordFile, never a flag or a config file.
	// Default user: "default" with no password.
	User     string
	Password string `yaml:"-"`
	// PasswordFile is a file holding the password (trailing newline ignored), read when the
	// connection is opened. Set Password or PasswordFile, not both. Default: none.
	PasswordFile string `yaml:"password_file"`
	// DialTimeout bounds one connection attempt. Default: 5s.
	DialTimeout time.Duration
	// TLS encrypts the native protocol; point Addr at the server's secure native port
	// (tcp_port_secure, 9440 on a stock server). Default: off.
	TLS secure.TLS `yaml:"tls"`
}

func (c Conn) withDefaults() Conn {
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.Database == "" {
		c.Database = "default"
	}
	if c.User == "" {
		c.User = "default"
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = 5 * time.Second
	}
	return c
}

// Validate reports the first bad field by name.
func (c Conn) Validate() error {
	c = c.withDefaults()
	if host, port, ok := strings.Cut(c.Addr, ":"); !ok || host == "" || port == "" {
		return fmt.Errorf("clickhouse: addr: %q is not host:port", c.Addr)
	}
	if c.DialTimeout < 0 {
		return fmt.Errorf("clickhouse: dial timeout: %v is negative", c.DialTimeout)
	}
	if _, err := secure.ReadSecret("clickhouse: password", c.Password, c.PasswordFile); err != nil {
		return err
	}
	return c.TLS.Validate("clickhouse: tls")
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
	tc, err := c.TLS.Config("clickhouse: tls")
	if err != nil {
		return nil, err
	}
	conn, err := ch.Open(&ch.Options{
		Protocol:    ch.Native,
		Addr:        []string{c.Addr},
		Auth:        ch.Auth{Database: c.Database, Username: c.User, Password: pw},
		DialTimeout: c.DialTimeout,
		TLS:         tc,
	})
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

// Sink defaults.
const (
	DefaultGroup         = "backflow-sink-clickhouse"
	DefaultTopic         = "backflow.enriched"
	DefaultBatchRows     = 10000
	DefaultBatchInterval = time.Second
)

// Config says what the sink consumes and how it batches. Where it writes is Conn.
type Config struct {
	// Group is the Kafka consumer group; it also names the group in sink_ledger.
	// Default: DefaultGroup ("backflow-sink-clickhouse").
	Group string
	// Topic is the enriched topic to consume. Default: DefaultTopic ("backflow.enriched").
	Topic string
	// DLQTopic receives records that do not decode or that ClickHouse rejects, with stage
	// "sink-clickhouse". Default: "backflow.dlq".
	DLQTopic string
	// BatchRows flushes once this many records are buffered; it is also the cap on buffered
	// records (polling asks for at most the room left). Default: DefaultBatchRows (10000).
	BatchRows int
	// BatchInterval flushes a non-empty buffer this long after its first record arrived.
	// Default: DefaultBatchInterval (1s).
	BatchInterval time.Duration
	// InsertTimeout bounds one attempt of one INSERT; a timed-out attempt is retried.
	// Default: 30s.
	InsertTimeout time.Duration
	// BackoffMin and BackoffMax bound the exponential backoff (full jitter) between attempts
	// of a failed flush or a registry outage. Defaults: 100ms and 10s.
	BackoffMin time.Duration
	BackoffMax time.Duration
	// FromStart makes a new group (no committed offsets) read the topic from its start rather
	// than its end. Default false here; the command sets it true: nothing written before the
	// sink first started is skipped.
	FromStart bool
}

func (c Config) withDefaults() Config {
	if c.Group == "" {
		c.Group = DefaultGroup
	}
	if c.Topic == "" {
		c.Topic = DefaultTopic
	}
	if c.DLQTopic == "" {
		c.DLQTopic = "backflow.dlq"
	}
	if c.BatchRows == 0 {
		c.BatchRows = DefaultBatchRows
	}
	if c.BatchInterval == 0 {
		c.BatchInterval = DefaultBatchInterval
	}
	if c.InsertTimeout == 0 {
		c.InsertTimeout = 30 * time.Second
	}
	if c.BackoffMin == 0 {
		c.BackoffMin = 100 * time.Millisecond
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = 10 * time.Second
	}
	return c
}

var kafkaName = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// Validate reports the first bad field by name, with its value.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case !kafkaName.MatchString(c.Group):
		return fmt.Errorf("clickhouse sink: group: %q is not a valid group name (letters, digits, '.', '_', '-')", c.Group)
	case !kafkaName.MatchString(c.Topic):
		return fmt.Errorf("clickhouse sink: topic: %q is not a valid Kafka topic name", c.Topic)
	case !kafkaName.MatchString(c.DLQTopic):
		return fmt.Errorf("clickhouse sink: dlq topic: %q is not a valid Kafka topic name", c.DLQTopic)
	case c.DLQTopic == c.Topic:
		return fmt.Errorf("clickhouse sink: dlq topic: %q is the topic the sink reads", c.DLQTopic)
	case c.BatchRows < 1 || c.BatchRows > 1_000_000:
		return fmt.Errorf("clickhouse sink: batch rows: %d, want 1..1000000", c.BatchRows)
	case c.BatchInterval < time.Millisecond:
		return fmt.Errorf("clickhouse sink: batch interval: %v, want 1ms or more", c.BatchInterval)
	case c.InsertTimeout < 0:
		return fmt.Errorf("clickhouse sink: insert timeout: %v is negative", c.InsertTimeout)
	case c.BackoffMin < 0 || c.BackoffMax < c.BackoffMin:
		return fmt.Errorf("clickhouse sink: backoff: min %v max %v, want 0 <= min <= max", c.BackoffMin, c.BackoffMax)
	}
	return nil
}
