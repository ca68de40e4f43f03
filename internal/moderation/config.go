package moderation

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/backflowhq/backflow/internal/conf"
	"github.com/backflowhq/backflow/internal/secure"
)

// Conn says where the sensitive-word service is and how to call it. Each field's default is
// its default tag (none: the zero value); the tags declare the keys of the config file's
// sensitive section.
type Conn struct {
	// URL is the service's base URL; Check posts to URL + "/v1/check". It must not carry
	// credentials: use Token. No default: the local stack's is in the env file it writes.
	URL string `key:"url" example:"http://sensitive-words:8090" doc:"base URL of the sensitive-word service"`
	// Token is the bearer token the service was started with (--token-file), or "" when it
	// runs without one. Take it from the environment or TokenFile, never from a flag (flags
	// show in ps) or a config file.
	Token string `doc:"the service's bearer token"`
	// TokenFile is a file holding the token (trailing newline ignored), read when the client
	// is built. Set Token or TokenFile, not both.
	TokenFile string `key:"token_file" secret:"Token" doc:"file holding the service's bearer token"`
	// Timeout bounds one Check call, from sending to the last byte of the reply; a call that
	// takes longer fails with ErrUnavailable.
	Timeout time.Duration `key:"timeout" default:"5s" doc:"bound on one check call"`
	// MaxItems is the most items Check sends at once; more is ErrTooManyItems before any
	// request. Keep it at most the service's --max-items (default 1000).
	MaxItems int `key:"max_items" default:"100" doc:"most texts per call; at most the service's --max-items"`
	// TLS checks the service's certificate (CAFile, ServerName) and can present a client
	// certificate. It applies to an https URL, which uses the system roots when TLS is unset
	// (so there is no tls switch). Default: unset.
	TLS secure.TLS `key:",squash,omit=tls"`
}

func (c Conn) withDefaults() Conn {
	conf.FillDefaults(&c)
	return c
}

// Validate reports every bad field, each a conf.FieldError naming the field and its value
// (never the token's).
func (c Conn) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(field, format string, a ...any) { errs = append(errs, conf.Errorf(field, format, a...)) }
	if u, err := url.Parse(c.URL); c.URL == "" {
		errs = append(errs, conf.Errorf("URL", "url: %w; want the service's base URL (e.g. http://sensitive-words:8090)", conf.ErrNotSet))
	} else if err != nil {
		errs = append(errs, conf.Field("URL", fmt.Errorf("url: %w", err)))
	} else {
		switch {
		case u.Scheme != "http" && u.Scheme != "https":
			bad("URL", "url: %q, want an http:// or https:// URL", u.Redacted())
		case u.Host == "":
			bad("URL", "url: %q has no host", u.Redacted())
		case u.User != nil:
			bad("URL", "url: %q carries credentials; put the token in Token", u.Redacted())
		case u.RawQuery != "" || u.Fragment != "":
			bad("URL", "url: %q, want no query or fragment", u.Redacted())
		case c.TLS.On() && u.Scheme != "https":
			bad("TLS", "tls: set, but the url %q is not https", u.Redacted())
		}
	}
	if c.Timeout < 0 {
		bad("Timeout", "timeout: %v, want > 0", c.Timeout)
	}
	if c.MaxItems < 1 {
		bad("MaxItems", "max items: %d, want at least 1", c.MaxItems)
	}
	if _, err := secure.ReadSecret("token", c.Token, c.TokenFile); err != nil {
		errs = append(errs, conf.Field("TokenFile", err))
	}
	errs = append(errs, conf.Nest("TLS", "", c.TLS.Validate()))
	return conf.Nest("", "moderation: ", errors.Join(errs...))
}
