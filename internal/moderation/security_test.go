package moderation

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/backflowhq/backflow/internal/conf/conftest"
	"github.com/backflowhq/backflow/internal/secure"
	"github.com/backflowhq/backflow/internal/secure/securetest"
	"github.com/backflowhq/backflow/tools/sensitive-words"
)

// TestCheckOverTLSWithTokenFile: the real handler behind TLS from a fresh CA, wanting a
// token. The token from a file and the CA check a batch; a wrong token is ErrUnauthorized and
// an untrusted CA a TLS failure, both IsAuthError, and neither shows the token.
func TestCheckOverTLSWithTokenFile(t *testing.T) {
	pki := securetest.New(t)
	svc := startService(t, sensitivewords.Config{Token: "tok-R1ght"}) // for its handler
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { svc.Handler().ServeHTTP(w, r) }))
	hs.TLS = pki.Server
	hs.StartTLS()
	defer hs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	items := []Item{{"a", "b l u e f i n"}, {"b", "hello"}}

	c := newClient(t, Conn{URL: hs.URL, TokenFile: securetest.SecretFile(t, "tok-R1ght"), TLS: secure.TLS{CAFile: pki.CAFile}})
	res, err := c.Check(ctx, items)
	if err != nil || len(res) != 2 || res[0].Hits[0].Word != "bluefin" || len(res[1].Hits) != 0 {
		t.Fatalf("check over TLS: %+v %v", res, err)
	}

	other := securetest.New(t)
	for name, cfg := range map[string]Conn{
		"wrong token":  {URL: hs.URL, Token: "tok-Wr0ng", TLS: secure.TLS{CAFile: pki.CAFile}},
		"untrusted CA": {URL: hs.URL, Token: "tok-R1ght", TLS: secure.TLS{CAFile: other.CAFile}},
		"no CA":        {URL: hs.URL, Token: "tok-R1ght"}, // system roots do not know the test CA
	} {
		t.Run(name, func(t *testing.T) {
			_, err := newClient(t, cfg).Check(ctx, items)
			if !IsAuthError(err) {
				t.Fatalf("IsAuthError(%v) = false", err)
			}
			if name == "wrong token" && !errors.Is(err, ErrUnauthorized) {
				t.Fatalf("%v is not ErrUnauthorized", err)
			}
			if !IsRetryable(err) {
				t.Fatalf("mid-run, %v must be retried (records wait), not dead-lettered", err)
			}
			if strings.Contains(err.Error(), "tok-") {
				t.Fatalf("error shows the token: %v", err)
			}
		})
	}
}

func TestConnValidateSecurity(t *testing.T) {
	pki := securetest.New(t)
	conftest.Validate(t, []conftest.Case[Conn]{
		{Name: "https with ca", Config: Conn{URL: "https://svc", TLS: secure.TLS{CAFile: pki.CAFile}}},
		{Name: "token file", Config: Conn{URL: "http://svc", TokenFile: securetest.SecretFile(t, "t0ken")}},
		{Name: "tls on http", Config: Conn{URL: "http://svc", TLS: secure.TLS{CAFile: pki.CAFile}}, WantErr: "moderation: tls: set, but the url", Field: "TLS"},
		{Name: "token twice", Config: Conn{URL: "http://svc", Token: "t0ken", TokenFile: "/x"}, WantErr: "moderation: token: set inline and as a file", Field: "TokenFile"},
		{Name: "missing token file", Config: Conn{URL: "http://svc", TokenFile: "/nonexistent/tok"}, WantErr: "moderation: token file: open /nonexistent/tok", Field: "TokenFile"},
		{Name: "key without cert", Config: Conn{URL: "https://svc", TLS: secure.TLS{KeyFile: pki.KeyFile}}, WantErr: "moderation: tls cert file: empty", Field: "TLS.KeyFile"},
	}, "t0ken")
}
