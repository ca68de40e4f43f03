// Package features is backflow's feature-store sink: Redis laid out as Feast's Redis online
// store. This first part holds the connection: Config and Open.
package features

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultAddr is the local stack's Redis address.
const DefaultAddr = "127.0.0.1:16379"

// Config says how to reach Redis.
type Config struct {
	// Addr is host:port. Default: DefaultAddr.
	Addr string
	// DB is the Redis database number. Default: 0.
	DB int
	// Username and Password authenticate (Redis ACL); Password comes from env or a file,
	// never a flag. Default: none.
	Username string
	Password string
	// DialTimeout bounds one connection attempt. Default: 5s.
	DialTimeout time.Duration
}

func (c Config) withDefaults() Config {
	if c.Addr == "" {
		c.Addr = DefaultAddr
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
		return fmt.Errorf("features: addr: %q is not host:port", c.Addr)
	}
	if c.DB < 0 {
		return fmt.Errorf("features: db: %d is negative", c.DB)
	}
	return nil
}

// Open validates c, connects and pings Redis. The caller closes the returned client.
func Open(ctx context.Context, c Config) (*redis.Client, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c = c.withDefaults()
	cl := redis.NewClient(&redis.Options{
		Addr:        c.Addr,
		DB:          c.DB,
		Username:    c.Username,
		Password:    c.Password,
		DialTimeout: c.DialTimeout,
		MaxRetries:  1,
	})
	if err := cl.Ping(ctx).Err(); err != nil {
		cl.Close()
		return nil, fmt.Errorf("features: ping redis %s: %w", c.Addr, err)
	}
	return cl, nil
}

// Endpoint says where c points, defaults applied.
func (c Config) Endpoint() string { return c.withDefaults().Addr }
