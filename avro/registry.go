// Package avro holds backflow's record contracts and their wire format: Avro bodies in the
// Confluent framing (magic byte 0, 4-byte big-endian schema id, body), with schemas kept in a
// Confluent-API schema registry. This first part is the registry connection: RegistryConfig
// and NewRegistryClient (franz-go's sr client).
package avro

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
)

// DefaultRegistryURL is the local stack's registry (Apicurio's Confluent-compatible API).
const DefaultRegistryURL = "http://127.0.0.1:18081/apis/ccompat/v7"

// RegistryConfig says how to reach the schema registry.
type RegistryConfig struct {
	// URL is the base of the Confluent-compatible API. Default: DefaultRegistryURL.
	URL string
	// Username and Password enable HTTP basic auth; Password comes from env or a file,
	// never a flag. Default: none.
	Username string
	Password string
	// Timeout bounds one HTTP request. Default: 10s.
	Timeout time.Duration
}

func (c RegistryConfig) withDefaults() RegistryConfig {
	if c.URL == "" {
		c.URL = DefaultRegistryURL
	}
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	return c
}

// Validate reports the first bad field by name.
func (c RegistryConfig) Validate() error {
	c = c.withDefaults()
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("avro: registry url: %q is not an http(s) URL", c.URL)
	}
	if c.Password != "" && c.Username == "" {
		return fmt.Errorf("avro: registry username: empty while a password is set")
	}
	if c.Timeout < 0 {
		return fmt.Errorf("avro: registry timeout: %v is negative", c.Timeout)
	}
	return nil
}

// NewRegistryClient validates c and returns a registry client. It does not contact the
// registry; PingRegistry does.
func NewRegistryClient(c RegistryConfig) (*sr.Client, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c = c.withDefaults()
	opts := []sr.ClientOpt{
		sr.URLs(c.URL),
		sr.HTTPClient(&http.Client{Timeout: c.Timeout}),
		sr.UserAgent("backflow"),
	}
	if c.Username != "" {
		opts = append(opts, sr.BasicAuth(c.Username, c.Password))
	}
	cl, err := sr.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("avro: registry client: %w", err)
	}
	return cl, nil
}

// PingRegistry makes one real request (list subjects) to prove the registry answers.
func PingRegistry(ctx context.Context, cl *sr.Client) error {
	if _, err := cl.Subjects(ctx); err != nil {
		return fmt.Errorf("avro: registry: %w", err)
	}
	return nil
}

// Endpoint says where c points, defaults applied.
func (c RegistryConfig) Endpoint() string { return c.withDefaults().URL }
