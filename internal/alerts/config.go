package alerts

import (
	"fmt"
	"net/url"
	"time"

	"github.com/backflowhq/backflow/internal/conf"
)

// Conn says where Prometheus is. Each field's default is its default tag (none: the zero
// value); the tags declare the keys of the config file's prometheus section.
type Conn struct {
	// URL is the server's base URL (its API is URL + "/api/v1/"). Default "": no Prometheus,
	// so no alerts are shown.
	URL string `key:"url" doc:"base URL of the Prometheus that evaluates backflow's alerting rules (deploy/prometheus/rules.yaml); backflow dashboard shows its firing alerts. Empty: none shown"`
	// Timeout bounds one request. Default: 5s.
	Timeout time.Duration `key:"timeout" default:"5s" doc:"bound on one request to Prometheus"`
}

func (c Conn) withDefaults() Conn {
	conf.FillDefaults(&c)
	return c
}

// Validate reports a URL that is not an http(s) URL with a host, or a bad timeout, each a
// conf.FieldError naming the field.
func (c Conn) Validate() error {
	c = c.withDefaults()
	if c.URL != "" {
		u, err := url.Parse(c.URL)
		switch {
		case err != nil:
			return conf.Field("URL", fmt.Errorf("url: %w", err))
		case u.Scheme != "http" && u.Scheme != "https":
			return conf.Errorf("URL", "url: %q, want an http:// or https:// URL", u.Redacted())
		case u.Host == "":
			return conf.Errorf("URL", "url: %q has no host", u.Redacted())
		}
	}
	if c.Timeout < 0 {
		return conf.Errorf("Timeout", "timeout: %v is negative", c.Timeout)
	}
	return nil
}
