// Package redis is backflow's feature-store sink: it writes rows in Feast's Redis online-store
// layout (internal/feast) to Redis. Start with Writer, which batches, coalesces and retries the
// rows the feature processor submits, and Config with Open, which reach Redis.
package redis

import (
	"context"
	"fmt"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/backflowhq/backflow/internal/secure"
)

// DefaultAddr is the local stack's Redis address.
const DefaultAddr = "127.0.0.1:16379"

// Conn says how to reach Redis.
type Conn struct {
	// Addr is host:port. Default: DefaultAddr.
	Addr string
	// DB is the Redis database number. Default: 0.
	DB int
	// Username and Password authenticate (Redis 6+ ACL user; a password alone authenticates
	// as the default user). Password comes from the environment (BACKFLOW_REDIS_PASSWORD) or
	// PasswordFile, never a flag or a config file. Default: none.
	Username string
	Password string `yaml:"-"`
	// PasswordFile is a file holding the password (trailing newline ignored), read on every
	// new connection, so a rotated file is picked up. Set Password or PasswordFile, not both.
	// Default: none.
	PasswordFile string `yaml:"password_file"`
	// DialTimeout bounds one connection attempt. Default: 5s.
	DialTimeout time.Duration
	// TLS encrypts the connection (Redis's tls-port). Default: off.
	TLS secure.TLS `yaml:"tls"`
}

func (c Conn) withDefaults() Conn {
	if c.Addr == "" {
		c.Addr = DefaultAddr
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
		return fmt.Errorf("redis: addr: %q is not host:port", c.Addr)
	}
	if c.DB < 0 {
		return fmt.Errorf("redis: db: %d is negative", c.DB)
	}
	if _, err := secure.ReadSecret("redis: password", c.Password, c.PasswordFile); err != nil {
		return err
	}
	return c.TLS.Validate("redis: tls")
}

// Open validates c, connects and pings Redis. The caller closes the returned client.
func Open(ctx context.Context, c Conn) (*goredis.Client, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	opts, err := c.Options()
	if err != nil {
		return nil, err
	}
	cl := goredis.NewClient(opts)
	if err := cl.Ping(ctx).Err(); err != nil {
		cl.Close()
		return nil, fmt.Errorf("redis: ping redis %s: %w", c.Endpoint(), err)
	}
	return cl, nil
}

// Options validates c and returns the go-redis options for it, for callers that build their
// own client (tests, tools). Open is the usual way in.
func (c Conn) Options() (*goredis.Options, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c = c.withDefaults()
	tc, err := c.TLS.Config("redis: tls")
	if err != nil {
		return nil, err
	}
	opts := &goredis.Options{
		Addr:        c.Addr,
		DB:          c.DB,
		DialTimeout: c.DialTimeout,
		MaxRetries:  1,
		TLSConfig:   tc,
	}
	if c.PasswordFile == "" {
		opts.Username, opts.Password = c.Username, c.Password
	} else {
		user, file := c.Username, c.PasswordFile
		opts.CredentialsProvider = func() (string, string) {
			// Validate has read the file; if it vanished since, an empty password fails AUTH
			// with WRONGPASS, which names the problem.
			pw, _ := secure.ReadSecret("redis: password", "", file)
			return user, pw
		}
	}
	return opts, nil
}

// IsAuthError reports whether err means Redis refused who we are (WRONGPASS, NOAUTH, NOPERM)
// or the TLS handshake failed. At start-up a stage stops on these with the settings to check;
// mid-run the writer retries them like an outage (an operator fixes the ACL, nothing is
// dropped).
func IsAuthError(err error) bool {
	return goredis.IsAuthError(err) || goredis.HasErrorPrefix(err, "NOPERM") || secure.IsTLSError(err)
}

// Endpoint says where c points, defaults applied.
func (c Conn) Endpoint() string { return c.withDefaults().Addr }
