package moderation

import (
	"fmt"
	"net/url"
	"time"

	"github.com/backflowhq/backflow/internal/secure"
)

// Defaults of Config.
const (
	DefaultTimeout  = 5 * time.Second
	DefaultMaxItems = 100
)

// Conn says where the sensitive-word service is and how to call it.
type Conn struct {
	// URL is the service's base URL; Check posts to URL + "/v1/check". Required. On the local
	// stack it is BACKFLOW_SENSITIVE_URL, http://127.0.0.1:18090. It must not carry
	// credentials: use Token.
	URL string
	// Token is the bearer token the service was started with (--token-file), or "" when it
	// runs without one. Take it from the environment (BACKFLOW_SENSITIVE_TOKEN) or TokenFile,
	// never from a flag (flags show in ps) or a config file. Default: none.
	Token string `yaml:"-"`
	// TokenFile is a file holding the token (trailing newline ignored), read when the client
	// is built. Set Token or TokenFile, not both. Default: none.
	TokenFile string `yaml:"token_file"`
	// TLS checks the service's certificate (CAFile, ServerName) and can present a client
	// certificate. It applies to an https URL, which uses the system roots when TLS is unset.
	// Default: unset.
	TLS secure.TLS `yaml:"tls"`
	// Timeout bounds one Check call, from sending to the last byte of the reply; a call that
	// takes longer fails with ErrUnavailable. Default: DefaultTimeout (5 s).
	Timeout time.Duration
	// MaxItems is the most items Check sends at once; more is ErrTooManyItems before any
	// request. Keep it at most the service's --max-items (default 1000). Default:
	// DefaultMaxItems (100).
	MaxItems int
}

func (c Conn) withDefaults() Conn {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxItems == 0 {
		c.MaxItems = DefaultMaxItems
	}
	return c
}

// Validate reports the first bad field by name, with its value (never the token's).
func (c Conn) Validate() error {
	c = c.withDefaults()
	if c.URL == "" {
		return fmt.Errorf("moderation: url: empty, want the service's base URL (e.g. http://127.0.0.1:18090)")
	}
	u, err := url.Parse(c.URL)
	if err != nil {
		return fmt.Errorf("moderation: url: %w", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("moderation: url: %q, want an http:// or https:// URL", u.Redacted())
	case u.Host == "":
		return fmt.Errorf("moderation: url: %q has no host", u.Redacted())
	case u.User != nil:
		return fmt.Errorf("moderation: url: %q carries credentials; put the token in Token", u.Redacted())
	case u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("moderation: url: %q, want no query or fragment", u.Redacted())
	case c.Timeout < 0:
		return fmt.Errorf("moderation: timeout: %v, want > 0", c.Timeout)
	case c.MaxItems < 1:
		return fmt.Errorf("moderation: max items: %d, want at least 1", c.MaxItems)
	case c.TLS.On() && u.Scheme != "https":
		return fmt.Errorf("moderation: tls: set, but the url %q is not https", u.Redacted())
	}
	if _, err := secure.ReadSecret("moderation: token", c.Token, c.TokenFile); err != nil {
		return err
	}
	return c.TLS.Validate("moderation: tls")
}
