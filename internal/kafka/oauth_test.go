package kafka

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"golang.org/x/oauth2"

	"github.com/backflowhq/backflow/internal/conf/conftest"
	"github.com/backflowhq/backflow/internal/secure/securetest"
)

// testJWT returns an unsigned JWT-shaped token with the given exp (none when zero) and a
// marker claim, enough for the client side, which never checks signatures.
func testJWT(exp time.Time, mark string) string {
	enc := base64.RawURLEncoding.EncodeToString
	claims := fmt.Sprintf(`{"sub":"backflow","mark":%q}`, mark)
	if !exp.IsZero() {
		claims = fmt.Sprintf(`{"sub":"backflow","mark":%q,"exp":%d}`, mark, exp.Unix())
	}
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc([]byte(claims)) + ".c2ln"
}

func writeToken(t *testing.T, path, tok string) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil { // as a platform rotates: atomically
		t.Fatal(err)
	}
}

func TestConnValidateOAuth(t *testing.T) {
	b := []string{"kafka-1:9092"}
	good := filepath.Join(t.TempDir(), "token")
	writeToken(t, good, testJWT(time.Now().Add(time.Hour), "a"))
	secret := securetest.SecretFile(t, "s3cret-client")
	ob := func(o OAuth) Conn { return Conn{Brokers: b, SASL: SASL{Mechanism: "oauthbearer", OAuth: o}} }
	conftest.Validate(t, []conftest.Case[Conn]{
		{Name: "token url", Config: ob(OAuth{TokenURL: "https://idp.example/token", ClientID: "backflow", ClientSecretFile: secret, Scopes: []string{"kafka"}})},
		{Name: "token file", Config: ob(OAuth{TokenFile: good})},
		{Name: "neither", Config: ob(OAuth{}), WantErr: "kafka: sasl oauth token url or token file: neither set with mechanism OAUTHBEARER", Field: "SASL.Mechanism"},
		{Name: "both", Config: ob(OAuth{TokenURL: "https://idp.example/token", TokenFile: good}), WantErr: "kafka: sasl oauth token file: set as well as the token url", Field: "SASL.OAuth.TokenFile"},
		{Name: "bad url", Config: ob(OAuth{TokenURL: "idp.example/token", ClientID: "c", ClientSecret: "s3cret-client"}), WantErr: `kafka: sasl oauth token url: "idp.example/token" is not an http(s) URL`, Field: "SASL.OAuth.TokenURL"},
		{Name: "no client id", Config: ob(OAuth{TokenURL: "https://idp.example/token", ClientSecret: "s3cret-client"}), WantErr: "kafka: sasl oauth client id: empty", Field: "SASL.OAuth.ClientID"},
		{Name: "no secret", Config: ob(OAuth{TokenURL: "https://idp.example/token", ClientID: "c"}), WantErr: "kafka: sasl oauth client secret: empty", Field: "SASL.OAuth.ClientSecretFile"},
		{Name: "missing secret file", Config: ob(OAuth{TokenURL: "https://idp.example/token", ClientID: "c", ClientSecretFile: "/nonexistent/s"}), WantErr: "kafka: sasl oauth client secret file: open /nonexistent/s", Field: "SASL.OAuth.ClientSecretFile"},
		{Name: "missing token file", Config: ob(OAuth{TokenFile: "/nonexistent/token"}), WantErr: "kafka: sasl oauth token file: open /nonexistent/token", Field: "SASL.OAuth.TokenFile"},
		{Name: "token file not a jwt", Config: ob(OAuth{TokenFile: securetest.SecretFile(t, "opaque-token")}), WantErr: "not a JWT (1 dot-separated parts, want 3)", Field: "SASL.OAuth.TokenFile"},
		{Name: "token file with client id", Config: ob(OAuth{TokenFile: good, ClientID: "c"}), WantErr: "kafka: sasl oauth token file: set with client id", Field: "SASL.OAuth.TokenFile"},
		{Name: "password with oauthbearer", Config: Conn{Brokers: b, SASL: SASL{Mechanism: MechanismOAuthBearer, Username: "u", OAuth: OAuth{TokenFile: good}}}, WantErr: "kafka: sasl username and password: set with mechanism OAUTHBEARER", Field: "SASL.Username"},
		{Name: "oauth without mechanism", Config: Conn{Brokers: b, SASL: SASL{OAuth: OAuth{TokenFile: good}}}, WantErr: "kafka: sasl mechanism: empty while sasl oauth keys are set; want OAUTHBEARER", Field: "SASL.OAuth.TokenFile"},
		{Name: "oauth with scram", Config: Conn{Brokers: b, SASL: SASL{Mechanism: MechanismSCRAMSHA512, Username: "u", Password: "pa55", OAuth: OAuth{TokenURL: "https://idp.example/token"}}}, WantErr: "kafka: sasl oauth: set with mechanism SCRAM-SHA-512", Field: "SASL.OAuth.TokenURL"},
	}, "s3cret-client", "pa55")
}

// tokenServer is a client-credentials token endpoint that issues token-1, token-2, ... each
// living life, and counts the requests. Its status is 200 unless fail holds another.
type tokenServer struct {
	*httptest.Server
	issued atomic.Int32
	fail   atomic.Int32
}

func newTokenServer(t *testing.T, life time.Duration) *tokenServer {
	ts := &tokenServer{}
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		err := r.ParseForm()
		if !ok { // the client's second try after a failure: the credentials in the form
			user, pass = r.Form.Get("client_id"), r.Form.Get("client_secret")
		}
		if err != nil || r.Form.Get("grant_type") != "client_credentials" || user != "backflow" || pass != "s3cret" {
			http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
			return
		}
		if code := ts.fail.Load(); code != 0 {
			http.Error(w, `{"error":"temporarily_unavailable"}`, int(code))
			return
		}
		n := ts.issued.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":"token-%d:%s:%s","token_type":"Bearer","expires_in":%d}`,
			n, r.Form.Get("scope"), r.Form.Get("audience"), int(life.Seconds()))
	}))
	t.Cleanup(ts.Close)
	return ts
}

// TestEndpointSourceRefreshes: a token is reused by every login until 80% of its lifetime has
// passed, then a fresh one is fetched; while the endpoint fails, the token in hand serves
// until it expires, and after that the failure is reported.
func TestEndpointSourceRefreshes(t *testing.T) {
	ts := newTokenServer(t, 100*time.Second)
	now := time.Now()
	src := &endpointSource{o: OAuth{TokenURL: ts.URL, ClientID: "backflow", ClientSecretFile: securetest.SecretFile(t, "s3cret"),
		Scopes: []string{"kafka"}, Audience: "brokers"}, now: func() time.Time { return now }}
	ctx := context.Background()
	want := func(step, tok string) {
		t.Helper()
		got, err := src.token(ctx)
		if err != nil || got != tok {
			t.Fatalf("%s: token = %q, %v; want %q", step, got, err, tok)
		}
	}
	want("first login", "token-1:kafka:brokers")
	now = now.Add(79 * time.Second)
	want("at 79% of its life", "token-1:kafka:brokers")
	now = now.Add(2 * time.Second)
	want("at 81% of its life", "token-2:kafka:brokers")
	if n := ts.issued.Load(); n != 2 {
		t.Fatalf("%d tokens issued, want 2", n)
	}
	ts.fail.Store(http.StatusServiceUnavailable)
	now = now.Add(90 * time.Second) // token-2 past its refresh point, still valid
	want("endpoint down, token valid", "token-2:kafka:brokers")
	now = now.Add(20 * time.Second) // token-2 expired
	_, err := src.token(ctx)
	if err == nil || !strings.Contains(err.Error(), "kafka: sasl oauth token url "+ts.URL) || IsAuthError(err) {
		t.Fatalf("endpoint down, token expired: err = %v; want the url named, and no auth error (an outage)", err)
	}
	ts.fail.Store(0)
	want("endpoint back", "token-3:kafka:brokers")
}

// TestEndpointRefusalIsAuthError: a wrong client secret is refused by the endpoint, and
// IsAuthError says so (a stage stops on it at start-up instead of retrying).
func TestEndpointRefusalIsAuthError(t *testing.T) {
	ts := newTokenServer(t, time.Minute)
	src := &endpointSource{o: OAuth{TokenURL: ts.URL, ClientID: "backflow", ClientSecret: "wrong"}, now: time.Now}
	_, err := src.token(context.Background())
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) || !IsAuthError(err) || strings.Contains(err.Error(), "wrong\"") {
		t.Fatalf("err = %v; want a RetrieveError that IsAuthError, without the secret", err)
	}
}

// TestSourceSharedByClients: every client built from one Conn (franz-go's and goka's sarama
// clients alike) takes its token from one source: two logins, one token fetched.
func TestSourceSharedByClients(t *testing.T) {
	ts := newTokenServer(t, time.Hour)
	c := Conn{Brokers: []string{"127.0.0.1:1"}, SASL: SASL{Mechanism: MechanismOAuthBearer,
		OAuth: OAuth{TokenURL: ts.URL, ClientID: "backflow", ClientSecretFile: securetest.SecretFile(t, "s3cret")}}}
	sc := c.Sarama()
	if !sc.Net.SASL.Enable || sc.Net.SASL.Mechanism != sarama.SASLTypeOAuth || sc.Net.SASL.TokenProvider == nil {
		t.Fatalf("sarama: sasl %v mechanism %q provider %v", sc.Net.SASL.Enable, sc.Net.SASL.Mechanism, sc.Net.SASL.TokenProvider)
	}
	if err := sc.Validate(); err != nil {
		t.Fatalf("sarama config: %v", err)
	}
	at, err := sc.Net.SASL.TokenProvider.Token()
	if err != nil || at.Token != "token-1::" {
		t.Fatalf("sarama token = %+v, %v; want token-1", at, err)
	}
	m := c.withDefaults().SASL.franz()
	if m == nil || m.Name() != "OAUTHBEARER" {
		t.Fatalf("franz-go mechanism = %v, want OAUTHBEARER", m)
	}
	_, first, err := m.Authenticate(context.Background(), "127.0.0.1:1")
	if err != nil || !strings.Contains(string(first), "auth=Bearer token-1::\x01") {
		t.Fatalf("franz-go first message = %q, %v; want token-1", first, err)
	}
	if n := ts.issued.Load(); n != 1 {
		t.Fatalf("%d tokens fetched for two logins, want 1", n)
	}
}

// TestTokenFileRotation: the token file is read at each login, so a rotated token is sent by
// the next login without a restart; an expired one is not sent, with an error naming the file
// that IsAuthError classifies.
func TestTokenFileRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	first, second := testJWT(time.Now().Add(time.Hour), "first"), testJWT(time.Time{}, "second")
	writeToken(t, path, first)
	c := Conn{Brokers: []string{"127.0.0.1:1"}, SASL: SASL{Mechanism: MechanismOAuthBearer, OAuth: OAuth{TokenFile: path}}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	prov := c.Sarama().Net.SASL.TokenProvider
	m := c.withDefaults().SASL.franz()
	login := func() (string, error) {
		_, msg, err := m.Authenticate(context.Background(), "127.0.0.1:1")
		at, perr := prov.Token()
		if err != nil || perr != nil {
			return "", errors.Join(err, perr)
		}
		if !strings.Contains(string(msg), at.Token) {
			return "", fmt.Errorf("franz-go sent %q, sarama %q", msg, at.Token)
		}
		return at.Token, nil
	}
	if tok, err := login(); err != nil || tok != first {
		t.Fatalf("first login: %q, %v; want the first token", tok, err)
	}
	writeToken(t, path, second)
	if tok, err := login(); err != nil || tok != second {
		t.Fatalf("after rotation: %q, %v; want the second token", tok, err)
	}
	writeToken(t, path, testJWT(time.Now().Add(-time.Minute), "stale"))
	_, err := login()
	if !errors.Is(err, ErrTokenExpired) || !IsAuthError(err) || !strings.Contains(err.Error(), path) {
		t.Fatalf("expired token: err = %v; want ErrTokenExpired naming %s", err, path)
	}
}
