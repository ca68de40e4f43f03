// Package avro holds backflow's record contracts and their wire format: Avro bodies in the
// Confluent framing (magic byte 0, 4-byte big-endian schema id, body), with schemas kept in a
// Confluent-API schema registry. This first part is the registry connection: RegistryConn
// and NewRegistryClient (franz-go's sr client).
package avro

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/backflowhq/backflow/internal/conf"
	"github.com/backflowhq/backflow/internal/secure"
)

// RegistryConn says how to reach the schema registry. Each field's default is its default tag
// (none: the zero value); the tags declare the keys of the config file's registry section.
type RegistryConn struct {
	// URL is the base of the Confluent-compatible API. No default: the local stack's
	// (Apicurio's Confluent-compatible API) is in the env file it writes.
	URL string `key:"url" example:"http://schema-registry:8081" doc:"base URL of the Confluent-compatible API"`
	// Username and Password enable HTTP basic auth. Password comes from the environment or
	// PasswordFile, never a flag or a config file.
	Username string `key:"username" doc:"basic-auth user; empty: no auth"`
	Password string `doc:"basic-auth password"`
	// PasswordFile is a file holding the basic-auth password (trailing newline ignored), read
	// when the client is built. Set Password or PasswordFile, not both.
	PasswordFile string `key:"password_file" secret:"Password" doc:"file holding the basic-auth password"`
	// Token is a bearer token sent with every request, from the environment (the variable of
	// token_file without _FILE); a config file never carries it inline.
	Token string `doc:"bearer token"`
	// TokenFile is a file holding a bearer token (an OIDC access token that the platform
	// rotates), read at every request, so a rotated token is used without a restart. Set
	// Token or TokenFile, not both, and not with Username. Default: none.
	TokenFile string `key:"token_file" secret:"Token" doc:"file holding a bearer token, read at every request (a rotated token is used without a restart); not with username"`
	// Timeout bounds one HTTP request.
	Timeout time.Duration `key:"timeout" default:"10s" doc:"bound on one HTTP request"`
	// TLS checks the registry's certificate (CAFile, ServerName) and can present a client
	// certificate. It applies to an https URL, which uses the system roots when TLS is unset
	// (so there is no tls switch). Default: unset.
	TLS secure.TLS `key:",squash,omit=tls"`
}

func (c RegistryConn) withDefaults() RegistryConn {
	conf.FillDefaults(&c)
	return c
}

// Validate reports every bad field, each a conf.FieldError naming the field and its value.
func (c RegistryConn) Validate() error {
	c = c.withDefaults()
	var errs []error
	u, err := url.Parse(c.URL)
	if c.URL == "" {
		errs = append(errs, conf.Errorf("URL", "url: %w", conf.ErrNotSet))
	} else if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, conf.Errorf("URL", "url: %q is not an http(s) URL", c.URL))
	} else if c.TLS.On() && u.Scheme != "https" {
		errs = append(errs, conf.Errorf("TLS", "tls: set, but the url %q is not https", c.URL))
	}
	if pw, err := secure.ReadSecret("password", c.Password, c.PasswordFile); err != nil {
		errs = append(errs, conf.Field("PasswordFile", err))
	} else if pw != "" && c.Username == "" {
		field := "Password"
		if c.PasswordFile != "" {
			field = "PasswordFile"
		}
		errs = append(errs, conf.Errorf(field, "username: empty while a password is set"))
	}
	if tok, err := c.bearer(); err != nil {
		errs = append(errs, conf.Field("TokenFile", err))
	} else if tok != "" && c.Username != "" {
		errs = append(errs, conf.Errorf("Username", "username: set with a bearer token; set one of basic auth and the token"))
	}
	if c.Timeout < 0 {
		errs = append(errs, conf.Errorf("Timeout", "timeout: %v is negative", c.Timeout))
	}
	errs = append(errs, conf.Nest("TLS", "", c.TLS.Validate()))
	return conf.Nest("", "avro: registry ", errors.Join(errs...))
}

// NewRegistryClient validates c and returns a registry client. It does not contact the
// registry; PingRegistry does.
func NewRegistryClient(c RegistryConn) (*sr.Client, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c = c.withDefaults()
	tc, err := c.TLS.Config()
	if err != nil {
		return nil, fmt.Errorf("avro: registry %w", err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if tc != nil {
		tr.TLSClientConfig = tc
	}
	opts := []sr.ClientOpt{
		sr.URLs(c.URL),
		sr.HTTPClient(&http.Client{Timeout: c.Timeout, Transport: tr}),
		sr.UserAgent("backflow"),
	}
	if c.Username != "" {
		pw, err := secure.ReadSecret("avro: registry password", c.Password, c.PasswordFile)
		if err != nil {
			return nil, err
		}
		opts = append(opts, sr.BasicAuth(c.Username, pw))
	}
	if c.Token != "" || c.TokenFile != "" {
		opts = append(opts, sr.PreReq(func(req *http.Request) error {
			tok, err := c.bearer()
			if err != nil {
				return fmt.Errorf("avro: registry %w", err)
			}
			req.Header.Set("Authorization", "Bearer "+tok)
			return nil
		}))
	}
	cl, err := sr.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("avro: registry client: %w", err)
	}
	return cl, nil
}

// bearer returns the bearer token, read from TokenFile anew at each call, or "" without one.
func (c RegistryConn) bearer() (string, error) {
	return secure.ReadSecret("token", c.Token, c.TokenFile)
}

// PingRegistry makes one real request (list subjects) to prove the registry answers.
func PingRegistry(ctx context.Context, cl *sr.Client) error {
	if _, err := cl.Subjects(ctx); err != nil {
		return fmt.Errorf("avro: registry: %w", err)
	}
	return nil
}

// IsAuthError reports whether err means the registry refused our credentials (HTTP 401 or
// 403) or the TLS handshake failed. While records are decoded these are retried like an
// outage (IsRetryable: an operator fixes the credentials, the records wait); at start-up a
// stage checks the registry once and stops on them instead, with the settings to check.
func IsAuthError(err error) bool {
	var re *sr.ResponseError
	if errors.As(err, &re) && (re.StatusCode == http.StatusUnauthorized || re.StatusCode == http.StatusForbidden) {
		return true
	}
	return secure.IsTLSError(err)
}

// Endpoint says where c points, defaults applied.
func (c RegistryConn) Endpoint() string { return c.withDefaults().URL }
