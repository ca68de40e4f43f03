// Package redis is backflow's feature-store sink: it writes rows in Feast's Redis online-store
// layout (internal/feast) to Redis. Start with Writer, which batches, coalesces and retries the
// rows the feature processor submits, and Conn with Open, which reach Redis.
package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/backflowhq/backflow/internal/conf"
	"github.com/backflowhq/backflow/internal/secure"
)

// The modes of Conn.Mode.
const (
	// ModeSingle is one Redis server (or a primary behind one address) at Conn.Addr.
	ModeSingle = "single"
	// ModeCluster is a Redis Cluster reached through the seed addresses Conn.Addrs: the
	// client learns the slot map from any seed and sends each key to the master of its slot.
	ModeCluster = "cluster"
)

// Conn says how to reach Redis. Each field's default is its default tag (none: the zero
// value); the tags declare the keys of the config file's redis section.
type Conn struct {
	// Mode is ModeSingle (Addr, the default) or ModeCluster (Addrs).
	Mode string `key:"mode" default:"single" doc:"single: one Redis at addr; cluster: a Redis Cluster reached through the seeds in addrs"`
	// Addr is host:port, in single mode. No default: the local stack's is in the env file it
	// writes.
	Addr string `key:"addr" example:"redis:6379" doc:"host:port (single mode)"`
	// Addrs are the seed addresses, host:port, in cluster mode: any reachable one gives the
	// client the whole slot map, so two or three are enough. No default: the cluster stack's
	// are in the env file it writes.
	Addrs []string `key:"addrs" example:"redis-1:6379,redis-2:6379,redis-3:6379" doc:"seed addresses host:port of a Redis Cluster (cluster mode)"`
	// DB is the Redis database number. A Redis Cluster has only database 0.
	DB int `key:"db,zero" doc:"database number (single mode; a cluster has only 0)"`
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
	switch c.Mode {
	case ModeSingle:
		if err := conf.CheckHostPort(c.Addr, false, false); err != nil {
			errs = append(errs, conf.Errorf("Addr", "addr: %w", err))
		}
		if len(c.Addrs) > 0 {
			errs = append(errs, conf.Errorf("Addrs", "addrs: %q are cluster seeds, but mode is %q (set mode: cluster, or addr)", c.Addrs, c.Mode))
		}
		if c.DB < 0 {
			errs = append(errs, conf.Errorf("DB", "db: %d is negative", c.DB))
		}
	case ModeCluster:
		if len(c.Addrs) == 0 {
			errs = append(errs, conf.Errorf("Addrs", "addrs: empty; cluster mode needs at least one seed host:port"))
		}
		for _, a := range c.Addrs {
			if err := conf.CheckHostPort(a, false, false); err != nil {
				errs = append(errs, conf.Errorf("Addrs", "addrs: %w", err))
			}
		}
		if c.Addr != "" {
			errs = append(errs, conf.Errorf("Addr", "addr: %q is a single server's address, but mode is %q (give the seeds in addrs)", c.Addr, c.Mode))
		}
		if c.DB != 0 {
			errs = append(errs, conf.Errorf("DB", "db: %d, but a Redis Cluster has only database 0", c.DB))
		}
	default:
		errs = append(errs, conf.Errorf("Mode", "mode: %q, want %q or %q", c.Mode, ModeSingle, ModeCluster))
	}
	if _, err := secure.ReadSecret("password", c.Password, c.PasswordFile); err != nil {
		errs = append(errs, conf.Field("PasswordFile", err))
	}
	errs = append(errs, conf.Nest("TLS", "", c.TLS.Validate()))
	return conf.Nest("", "redis: ", errors.Join(errs...))
}

// Open validates c, connects and pings Redis. In cluster mode the client is a
// goredis.ClusterClient: it loads the slot map from the seeds, sends each command to the master
// of its key's slot (a pipeline is split per node), and follows MOVED and ASK redirections,
// so a failover or a resharding is transparent. The caller closes the returned client.
func Open(ctx context.Context, c Conn) (goredis.UniversalClient, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	routeClientLogs()
	var cl goredis.UniversalClient
	if c.withDefaults().Mode == ModeCluster {
		opts, err := c.ClusterOptions()
		if err != nil {
			return nil, err
		}
		cc := goredis.NewClusterClient(opts)
		// Ping reaches one node; the cluster's own health (every slot served) is what
		// writes need, so check it at start-up where a misconfiguration is cheap to report.
		if err := cc.Ping(ctx).Err(); err != nil {
			cc.Close()
			return nil, fmt.Errorf("redis: ping redis cluster %s: %w", c.Endpoint(), err)
		}
		info, err := cc.ClusterInfo(ctx).Result()
		if err != nil {
			cc.Close()
			return nil, fmt.Errorf("redis: cluster info from %s: %w", c.Endpoint(), err)
		}
		if !strings.Contains(info, "cluster_state:ok") {
			cc.Close()
			return nil, fmt.Errorf("redis cluster %s: %w", c.Endpoint(), ErrClusterDown)
		}
		cl = cc
	} else {
		opts, err := c.Options()
		if err != nil {
			return nil, err
		}
		cl = goredis.NewClient(opts)
		if err := cl.Ping(ctx).Err(); err != nil {
			cl.Close()
			return nil, fmt.Errorf("redis: ping redis %s: %w", c.Endpoint(), err)
		}
	}
	return cl, nil
}

// ClusterOptions validates c (cluster mode) and returns the go-redis cluster options for it.
func (c Conn) ClusterOptions() (*goredis.ClusterOptions, error) {
	o, err := c.Options()
	if err != nil {
		return nil, err
	}
	c = c.withDefaults()
	if c.Mode != ModeCluster {
		return nil, fmt.Errorf("redis: cluster options for mode %q", c.Mode)
	}
	return &goredis.ClusterOptions{
		Addrs:               c.Addrs,
		DialTimeout:         o.DialTimeout,
		MaxRetries:          o.MaxRetries,
		TLSConfig:           o.TLSConfig,
		Username:            o.Username,
		Password:            o.Password,
		CredentialsProvider: o.CredentialsProvider,
	}, nil
}

// Options validates c and returns the go-redis options for it (single mode; in cluster mode,
// see ClusterOptions), for callers that build their own client (tests, tools). Open is the
// usual way in.
func (c Conn) Options() (*goredis.Options, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c = c.withDefaults()
	tc, err := c.TLS.Config()
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	// In cluster mode these options are the per-node ones ClusterOptions copies; Addr is unused.
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

// Endpoint says where c points, defaults applied: the address, or the seeds joined by commas.
func (c Conn) Endpoint() string {
	c = c.withDefaults()
	if c.Mode == ModeCluster {
		return strings.Join(c.Addrs, ",")
	}
	return c.Addr
}
