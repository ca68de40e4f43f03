package kafka

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/backflowhq/backflow/internal/conf"
	"github.com/backflowhq/backflow/internal/secure"
)

// OAuth says where SASL/OAUTHBEARER takes its tokens: from an OIDC token endpoint with the
// client credentials grant (TokenURL, ClientID, the client secret, Scopes, Audience), or from a
// file that the platform keeps current (TokenFile). Set one of the two. Every client a process
// builds from one OAuth shares its tokens.
type OAuth struct {
	// TokenURL is the token endpoint of the identity provider. A token is fetched at the first
	// login and again once 80% of its lifetime has passed (Kafka's own client refreshes at the
	// same point), so the brokers' re-authentication (connections.max.reauth.ms) always gets a
	// token that is still valid. Default: none.
	TokenURL string `key:"sasl_oauth_token_url" doc:"OIDC token endpoint (client credentials grant) of the OAUTHBEARER tokens"`
	// ClientID is the client the token endpoint knows backflow as. Required with TokenURL.
	ClientID string `key:"sasl_oauth_client_id" doc:"client id at the token endpoint"`
	// ClientSecret is the client's secret, from the environment (the variable of
	// sasl_oauth_client_secret_file without _FILE); a config file never carries it inline.
	ClientSecret string `doc:"client secret at the token endpoint"`
	// ClientSecretFile is a file holding the client secret (trailing newline ignored), read
	// when a token is fetched. Set ClientSecret or ClientSecretFile, not both.
	ClientSecretFile string `key:"sasl_oauth_client_secret_file" secret:"ClientSecret" doc:"file holding the client secret (read at each token fetch)"`
	// Scopes are asked for in the token request. Default: none.
	Scopes []string `key:"sasl_oauth_scopes" doc:"scopes of the token request; empty: none"`
	// Audience is sent as the token request's audience field, for providers that name the
	// token's audience that way rather than by a scope. Default: none (no such field).
	Audience string `key:"sasl_oauth_audience" doc:"audience field of the token request, for providers that want one; empty: none"`
	// TokenFile is a file holding one token, a JWT, that the platform rotates (a Kubernetes
	// projected service-account token, a sidecar's output). It is read anew at every login and
	// re-authentication, so a rotated token is used without a restart. Default: none.
	TokenFile string `key:"sasl_oauth_token_file" doc:"file holding an OAUTHBEARER token (a JWT) that the platform rotates; read at each login"`
}

// ErrTokenExpired means the token file holds a token whose exp has passed: whatever rotates
// the file has stopped doing so. The brokers would refuse it; backflow does not send it.
var ErrTokenExpired = errors.New("kafka: sasl oauth token expired")

// tokenFetchTimeout bounds one request to the token endpoint.
const tokenFetchTimeout = 15 * time.Second

// refreshFactor is the part of a token's lifetime after which a fresh one is fetched.
const refreshFactor = 0.8

func (o OAuth) set() bool { return o.firstSet() != "" }

// firstSet names the first OAuth field that is set, or "".
func (o OAuth) firstSet() string {
	switch {
	case o.TokenURL != "":
		return "OAuth.TokenURL"
	case o.TokenFile != "":
		return "OAuth.TokenFile"
	case o.ClientID != "":
		return "OAuth.ClientID"
	case o.ClientSecretFile != "":
		return "OAuth.ClientSecretFile"
	case o.ClientSecret != "":
		return "OAuth.ClientSecret"
	case len(o.Scopes) > 0:
		return "OAuth.Scopes"
	case o.Audience != "":
		return "OAuth.Audience"
	}
	return ""
}

// validateOAuth checks an OAUTHBEARER setup (or OAuth keys without a mechanism), reporting the
// first problem.
func (s SASL) validateOAuth() error {
	o := s.OAuth
	switch {
	case !s.On():
		return conf.Errorf(o.firstSet(), "sasl mechanism: empty while sasl oauth keys are set; want %s", MechanismOAuthBearer)
	case s.Username != "" || s.Password != "" || s.PasswordFile != "":
		return conf.Errorf("Username", "sasl username and password: set with mechanism %s, which logs in with a token; remove them", MechanismOAuthBearer)
	case o.TokenURL == "" && o.TokenFile == "":
		return conf.Errorf("Mechanism", "sasl oauth token url or token file: neither set with mechanism %s; set one", MechanismOAuthBearer)
	case o.TokenURL != "" && o.TokenFile != "":
		return conf.Errorf("OAuth.TokenFile", "sasl oauth token file: set as well as the token url; set one")
	case o.TokenFile != "":
		if o.ClientID != "" || o.ClientSecret != "" || o.ClientSecretFile != "" || len(o.Scopes) > 0 || o.Audience != "" {
			return conf.Errorf("OAuth.TokenFile", "sasl oauth token file: set with client id, secret, scopes or audience, which are for the token url; remove them")
		}
		_, _, err := readTokenFile(o.TokenFile)
		return conf.Field("OAuth.TokenFile", err)
	}
	if u, err := url.Parse(o.TokenURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return conf.Errorf("OAuth.TokenURL", "sasl oauth token url: %q is not an http(s) URL", o.TokenURL)
	}
	if o.ClientID == "" {
		return conf.Errorf("OAuth.ClientID", "sasl oauth client id: empty with the token url")
	}
	sec, err := secure.ReadSecret("sasl oauth client secret", o.ClientSecret, o.ClientSecretFile)
	switch {
	case err != nil:
		return conf.Field("OAuth.ClientSecretFile", err)
	case sec == "":
		return conf.Errorf("OAuth.ClientSecretFile", "sasl oauth client secret: empty with the token url; set it or its file")
	}
	return nil
}

// tokenSource hands out the token of the next login.
type tokenSource interface {
	token(ctx context.Context) (string, error)
}

// sources keeps one token source per OAuth setup, so that every client of a process (goka's
// sarama clients, franz-go's) shares the tokens of one endpoint.
var sources sync.Map // fmt.Sprint(OAuth) -> tokenSource

func (o OAuth) source() tokenSource {
	if o.TokenFile != "" {
		return fileSource(o.TokenFile)
	}
	key := fmt.Sprint(o)
	if s, ok := sources.Load(key); ok {
		return s.(tokenSource)
	}
	s, _ := sources.LoadOrStore(key, &endpointSource{o: o, now: time.Now})
	return s.(tokenSource)
}

// franz returns the franz-go mechanism: it asks for a token at each login.
func (o OAuth) franz() sasl.Mechanism {
	src := o.source()
	return oauth.Oauth(func(ctx context.Context) (oauth.Auth, error) {
		tok, err := src.token(ctx)
		return oauth.Auth{Token: tok}, err
	})
}

// sarama returns sarama's token provider, asked at each login.
func (o OAuth) sarama() sarama.AccessTokenProvider { return saramaTokens{o.source()} }

type saramaTokens struct{ src tokenSource }

func (s saramaTokens) Token() (*sarama.AccessToken, error) {
	ctx, cancel := context.WithTimeout(context.Background(), tokenFetchTimeout)
	defer cancel()
	tok, err := s.src.token(ctx)
	if err != nil {
		return nil, err
	}
	return &sarama.AccessToken{Token: tok}, nil
}

// endpointSource fetches tokens with the client credentials grant and reuses each until
// refreshFactor of its lifetime has passed.
type endpointSource struct {
	o   OAuth
	now func() time.Time

	mu        sync.Mutex
	tok       *oauth2.Token
	expiry    time.Time // zero: the token stated no lifetime
	refreshAt time.Time
}

func (e *endpointSource) token(ctx context.Context) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	if e.tok != nil && now.Before(e.refreshAt) {
		return e.tok.AccessToken, nil
	}
	tok, err := e.fetch(ctx)
	if err != nil {
		// The identity provider is down: the token in hand serves while it is valid.
		if e.tok != nil && (e.expiry.IsZero() || now.Before(e.expiry)) {
			return e.tok.AccessToken, nil
		}
		return "", fmt.Errorf("kafka: sasl oauth token url %s: %w", e.o.TokenURL, err)
	}
	e.tok, e.expiry, e.refreshAt = tok, time.Time{}, now.Add(time.Minute) // a token that states no lifetime
	// The lifetime, as of the answer (Expiry is set on the real clock, e.now may be a test's).
	life := time.Duration(tok.ExpiresIn) * time.Second
	if life <= 0 && !tok.Expiry.IsZero() {
		life = time.Until(tok.Expiry)
	}
	if life > 0 {
		e.expiry, e.refreshAt = now.Add(life), now.Add(time.Duration(float64(life)*refreshFactor))
	}
	return tok.AccessToken, nil
}

func (e *endpointSource) fetch(ctx context.Context) (*oauth2.Token, error) {
	secret, err := secure.ReadSecret("sasl oauth client secret", e.o.ClientSecret, e.o.ClientSecretFile)
	if err != nil {
		return nil, err
	}
	cc := clientcredentials.Config{ClientID: e.o.ClientID, ClientSecret: secret, TokenURL: e.o.TokenURL, Scopes: e.o.Scopes}
	if e.o.Audience != "" {
		cc.EndpointParams = url.Values{"audience": {e.o.Audience}}
	}
	ctx, cancel := context.WithTimeout(ctx, tokenFetchTimeout)
	defer cancel()
	ctx = context.WithValue(ctx, oauth2.HTTPClient, &http.Client{Timeout: tokenFetchTimeout})
	tok, err := cc.Token(ctx)
	if err != nil {
		return nil, err
	}
	if tok.AccessToken == "" {
		return nil, errors.New("the answer holds no access_token")
	}
	return tok, nil
}

// fileSource reads the token file at each login.
type fileSource string

func (f fileSource) token(context.Context) (string, error) {
	tok, exp, err := readTokenFile(string(f))
	if err != nil {
		return "", err
	}
	if !exp.IsZero() && !time.Now().Before(exp) {
		return "", fmt.Errorf("%w: token file %s holds a token that expired at %s; whatever rotates the file has stopped",
			ErrTokenExpired, f, exp.UTC().Format(time.RFC3339))
	}
	return tok, nil
}

// readTokenFile returns the file's token and its exp claim (zero when it has none). The token
// must be a JWT (header.payload.signature, the payload JSON): the brokers take no other.
func readTokenFile(path string) (string, time.Time, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("sasl oauth token file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", time.Time{}, fmt.Errorf("sasl oauth token file: %s is empty", path)
	}
	exp, err := jwtExpiry(tok)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("sasl oauth token file: %s: %w", path, err)
	}
	return tok, exp, nil
}

// jwtExpiry decodes the payload of a JWT, without checking its signature (the brokers do),
// and returns its exp claim.
func jwtExpiry(tok string) (time.Time, error) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return time.Time{}, fmt.Errorf("not a JWT (%d dot-separated parts, want 3)", len(parts))
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return time.Time{}, fmt.Errorf("not a JWT: payload: %w", err)
	}
	var claims struct {
		Exp *float64 `json:"exp"`
	}
	if err := json.Unmarshal(raw, &claims); err != nil {
		return time.Time{}, fmt.Errorf("not a JWT: payload: %w", err)
	}
	if claims.Exp == nil {
		return time.Time{}, nil
	}
	return time.Unix(int64(*claims.Exp), 0), nil
}
