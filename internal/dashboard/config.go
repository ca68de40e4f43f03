package dashboard

import (
	"github.com/backflowhq/backflow/internal/conf"

	"fmt"
	"net/url"
	"strings"
	"time"
)

// DefaultAddr is where `backflow dashboard` listens by default: loopback, on a port that keeps
// clear of the local stack's (and of theirs shifted by a multiple of 1000).
const DefaultAddr = "127.0.0.1:18400"

// DefaultGroups are the consumer groups whose lag the health strip shows: the pipeline's stages
// with their default names.
var DefaultGroups = []string{"backflow-ingest", "backflow-sink-clickhouse", "backflow-sink-clickhouse-dlq", "backflow-features"}

// Config says where the dashboard listens and what it shows. Connections (ClickHouse, Kafka)
// come separately, in Deps.
type Config struct {
	// Addr is host:port to listen on. Default: DefaultAddr (127.0.0.1:18400).
	Addr string
	// Refresh is the page's auto-refresh period when it opens (the page can change it).
	// Default: 10s.
	Refresh time.Duration
	// Range is the time range the page opens with. Default: 30m (the last 30 minutes).
	Range time.Duration
	// Groups are the consumer groups whose lag the health strip shows. Default: DefaultGroups.
	Groups []string
	// BreakerURL is the Prometheus /metrics URL of the ingest stage, scraped for the gauge
	// backflow_moderation_breaker_state and the table restore gauges. Default "": the breaker
	// shows as unknown, and no restore is shown.
	BreakerURL string
	// QueryTimeout bounds one panel's query, and the health strip's calls. Default: 10s.
	QueryTimeout time.Duration
	// MaxRows caps the rows one panel returns; the answer says when it was cut. Default: 5000.
	MaxRows int
	// Parallel caps the panel queries running at once against ClickHouse. Default: 4.
	Parallel int
	// Auth is the HTTP basic auth of every route but /healthz. Without a password Addr must
	// be a loopback address, unless Auth.InsecureNoAuth is set.
	Auth Auth
}

func (c Config) withDefaults() Config {
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.Refresh == 0 {
		c.Refresh = 10 * time.Second
	}
	if c.Range == 0 {
		c.Range = 30 * time.Minute
	}
	if len(c.Groups) == 0 {
		c.Groups = DefaultGroups
	}
	if c.QueryTimeout == 0 {
		c.QueryTimeout = 10 * time.Second
	}
	if c.MaxRows == 0 {
		c.MaxRows = 5000
	}
	if c.Parallel == 0 {
		c.Parallel = 4
	}
	return c
}

// Validate reports the first bad field by name, with its value.
func (c Config) Validate() error {
	c = c.withDefaults()
	if err := conf.CheckHostPort(c.Addr, true, true); err != nil {
		return fmt.Errorf("dashboard: addr: %w", err)
	}
	if err := c.Auth.Validate(); err != nil {
		return err
	}
	if pw, _ := c.Auth.password(); pw == "" && !c.Auth.InsecureNoAuth && !IsLoopback(c.Addr) {
		return conf.Errorf("Auth", "dashboard: addr: %s: %w; set dashboard.password_file (BACKFLOW_DASHBOARD_PASSWORD_FILE) or BACKFLOW_DASHBOARD_PASSWORD, or allow it with dashboard.insecure_no_auth (--insecure-no-auth)", c.Addr, ErrNoAuth)
	}
	switch {
	case c.Refresh < time.Second:
		return fmt.Errorf("dashboard: refresh: %v, want 1s or more", c.Refresh)
	case c.Range < MinInterval || c.Range > 31*24*time.Hour:
		return fmt.Errorf("dashboard: range: %v, want 1m to 31 days", c.Range)
	case c.QueryTimeout < 0:
		return fmt.Errorf("dashboard: query timeout: %v is negative", c.QueryTimeout)
	case c.MaxRows < 1:
		return fmt.Errorf("dashboard: max rows: %d, want at least 1", c.MaxRows)
	case c.Parallel < 1:
		return fmt.Errorf("dashboard: parallel: %d, want at least 1", c.Parallel)
	}
	for _, g := range c.Groups {
		if strings.TrimSpace(g) == "" {
			return fmt.Errorf("dashboard: groups: %q holds an empty group name", c.Groups)
		}
	}
	if c.BreakerURL != "" {
		u, err := url.Parse(c.BreakerURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("dashboard: breaker url: %q is not an http(s) URL", c.BreakerURL)
		}
	}
	return nil
}
