// Package redis is backflow's feature-store sink: it writes rows in Feast's Redis online-store
// layout (internal/feast) to Redis. Start with Writer, which batches, coalesces and retries the
// rows the feature processor submits, and Conn with Open, which reach Redis.
package redis

import (
	"context"
	"errors"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/backflowhq/backflow/internal/conf"
	"github.com/backflowhq/backflow/internal/secure"
)

// Conn says how to reach Redis. Each field's default is its default tag (none: the zero
// value); the tags declare the keys of the config file's redis section.
type Conn struct {
	// Addr is host:port. No default: the local stack's is in the env file it writes.
	Addr string `key:"addr" example:"redis:6379" doc:"host:port"`
	// DB is the Redis database number.
	DB int `key:"db,zero" doc:"database number"`
	// Username and Password authenticate (Redis 6+ ACL user; a password alone authenticates
	// as the default user). Password comes from the environment or PasswordFile, never a
	// flag or a config file.
	Username string `key:"username" doc:"ACL user; empty: the default user"`
	Password string `doc:"the password"`
	// PasswordFile is a file holding the password (trailing newline ignored), read on every
	// new connection, so a rotated file is picked up. Set Password or PasswordFile, not both.
	PasswordFile string `key:"password_file" secret:"Password" doc:"file holding the password (read on each new connection)"`
	// DialTimeout bounds one connection attempt.
	DialTimeout time.Duration `key:"dial_timeout" default:"5s" doc:"bound on one connection attempt"`
	// TLS encrypts the connection (Redis's tls-port). Default: off.
	TLS secure.TLS `key:",squash"`
}

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
	if c.DB < 0 {
		errs = append(errs, conf.Errorf("DB", "db: %d is negative", c.DB))
	}
	if _, err := secure.ReadSecret("password", c.Password, c.PasswordFile); err != nil {
		errs = append(errs, conf.Field("PasswordFile", err))
	}
	errs = append(errs, conf.Nest("TLS", "", c.TLS.Validate()))
	return conf.Nest("", "redis: ", errors.Join(errs...))
}

// Open validates c, connects and pings Redis. The caller closes the returned client.
func Open(ctx context.Context, c Conn) (*goredis.Client, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	routeClientLogs()
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
	tc, err := c.TLS.Config()
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
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
