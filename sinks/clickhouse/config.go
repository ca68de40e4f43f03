// Package clickhouse is backflow's ClickHouse sink. This first part holds the connection:
// Config and Open. clickhouse-go v2 is used over the native protocol only, because the HTTP
// protocol fails against ClickHouse 18.16 ("Unknown setting client_protocol_version").
package clickhouse

import (
	"context"
	"fmt"
	"strings"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// DefaultAddr is the local stack's ClickHouse native-protocol address.
const DefaultAddr = "127.0.0.1:19000"

// Config says how to reach ClickHouse.
type Config struct {
	// Addr is host:port of the native protocol (9000 on a stock server). Default: DefaultAddr.
	Addr string
	// Database is the database backflow's tables live in. Default: "default".
	Database string
	// User and Password authenticate; Password comes from env or a file, never a flag.
	// Default user: "default" with no password.
	User     string
	Password string
	// DialTimeout bounds one connection attempt. Default: 5s.
	DialTimeout time.Duration
}

func (c Config) withDefaults() Config {
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
func (c Config) Validate() error {
	c = c.withDefaults()
	if host, port, ok := strings.Cut(c.Addr, ":"); !ok || host == "" || port == "" {
		return fmt.Errorf("clickhouse: addr: %q is not host:port", c.Addr)
	}
	if c.DialTimeout < 0 {
		return fmt.Errorf("clickhouse: dial timeout: %v is negative", c.DialTimeout)
	}
	return nil
}

// Open validates c, connects over the native protocol and pings the server, so a wrong
// address or password fails here with a clear error rather than on the first insert.
// The caller closes the returned connection.
func Open(ctx context.Context, c Config) (driver.Conn, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c = c.withDefaults()
	conn, err := ch.Open(&ch.Options{
		Protocol:    ch.Native,
		Addr:        []string{c.Addr},
		Auth:        ch.Auth{Database: c.Database, Username: c.User, Password: c.Password},
		DialTimeout: c.DialTimeout,
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
func (c Config) Endpoint() string { return c.withDefaults().Addr }
