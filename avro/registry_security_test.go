package avro

import (
	"context"
	"encoding/base64"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/backflowhq/backflow/internal/conf/conftest"
	"github.com/backflowhq/backflow/internal/secure"
	"github.com/backflowhq/backflow/internal/secure/securetest"
)

// TestRegistryBasicAuthOverTLS: franz-go's srfake behind TLS from a fresh CA, wanting basic
// auth. The right password (from a file) registers and fetches a schema; a wrong password,
// no password and an untrusted CA are IsAuthError, and the decoder still treats them as an
// outage to wait out (IsRetryable), never as a bad record.
func TestRegistryBasicAuthOverTLS(t *testing.T) {
	pki := securetest.New(t)
	reg := srfake.NewRegistry(srfake.WithAuth("Basic " + base64.StdEncoding.EncodeToString([]byte("backflow:s3cret"))))
	srv := httptest.NewUnstartedServer(reg.Handler())
	srv.TLS = pki.Server
	srv.StartTLS()
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	good := RegistryConn{URL: srv.URL, Username: "backflow", PasswordFile: securetest.SecretFile(t, "s3cret"), TLS: secure.TLS{CAFile: pki.CAFile}}
	cl, err := NewRegistryClient(good)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := NewEncoder[GatewayLog](cl, GatewayLogSchema, "gw-value")
	if err != nil {
		t.Fatal(err)
	}
	rec := GatewayLog{RequestID: "r1", Phase: PhaseRequest, EventTime: time.Now().UTC().Truncate(time.Millisecond)}
	b, err := enc.Encode(ctx, rec)
	if err != nil {
		t.Fatalf("encode through the secured registry: %v", err)
	}
	dec, err := NewDecoder[GatewayLog](cl, GatewayLogSchema, DecoderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _, err := dec.Decode(ctx, b); err != nil || got.RequestID != "r1" {
		t.Fatalf("decode: %+v %v", got, err)
	}

	other := securetest.New(t)
	for name, cfg := range map[string]RegistryConn{
		"wrong password": {URL: srv.URL, Username: "backflow", Password: "wrong", TLS: secure.TLS{CAFile: pki.CAFile}},
		"no password":    {URL: srv.URL, TLS: secure.TLS{CAFile: pki.CAFile}},
		"untrusted CA":   {URL: srv.URL, Username: "backflow", Password: "s3cret", TLS: secure.TLS{CAFile: other.CAFile}},
	} {
		t.Run(name, func(t *testing.T) {
			cl, err := NewRegistryClient(cfg)
			if err != nil {
				t.Fatal(err)
			}
			err = PingRegistry(ctx, cl)
			if !IsAuthError(err) {
				t.Fatalf("IsAuthError(%v) = false", err)
			}
			if cfg.Password != "" && strings.Contains(err.Error(), cfg.Password) {
				t.Fatalf("error shows the password: %v", err)
			}
			dec, err := NewDecoder[GatewayLog](cl, GatewayLogSchema, DecoderConfig{})
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = dec.Decode(ctx, b)
			if !IsRetryable(err) || !IsAuthError(err) {
				t.Fatalf("decode with bad credentials: %v (retryable %v, auth %v), want both", err, IsRetryable(err), IsAuthError(err))
			}
		})
	}
}

func TestRegistryConnValidateSecurity(t *testing.T) {
	pki := securetest.New(t)
	conftest.Validate(t, []conftest.Case[RegistryConn]{
		{Name: "https with ca", Config: RegistryConn{URL: "https://sr:8081", TLS: secure.TLS{CAFile: pki.CAFile}}},
		{Name: "no url", Config: RegistryConn{}, WantErr: "avro: registry url: not set", Field: "URL"},
		{Name: "password file", Config: RegistryConn{URL: "http://registry:8081", Username: "u", PasswordFile: securetest.SecretFile(t, "p")}},
		{Name: "tls on http", Config: RegistryConn{URL: "http://sr:8081", TLS: secure.TLS{CAFile: pki.CAFile}}, WantErr: "avro: registry tls: set, but the url", Field: "TLS"},
		{Name: "password file without user", Config: RegistryConn{PasswordFile: securetest.SecretFile(t, "p")}, WantErr: "avro: registry username: empty", Field: "PasswordFile"},
		{Name: "password without user", Config: RegistryConn{Password: "pa55"}, WantErr: "avro: registry username: empty", Field: "Password"},
		{Name: "password twice", Config: RegistryConn{Username: "u", Password: "pa55", PasswordFile: "/x"}, WantErr: "avro: registry password: set inline and as a file", Field: "PasswordFile"},
		{Name: "empty password file", Config: RegistryConn{Username: "u", PasswordFile: securetest.SecretFile(t, "")}, WantErr: "avro: registry password file: ", Field: "PasswordFile"},
		{Name: "missing ca", Config: RegistryConn{URL: "https://sr", TLS: secure.TLS{CAFile: "/nonexistent"}}, WantErr: "avro: registry tls ca file", Field: "TLS.CAFile"},
		{Name: "bad url", Config: RegistryConn{URL: "ftp://sr"}, WantErr: `avro: registry url: "ftp://sr"`, Field: "URL"},
		{Name: "token file", Config: RegistryConn{URL: "https://sr", TokenFile: securetest.SecretFile(t, "t0ken-value")}},
		{Name: "token and user", Config: RegistryConn{URL: "https://sr", Username: "u", Token: "t0ken-value"}, WantErr: "avro: registry username: set with a bearer token", Field: "Username"},
		{Name: "token twice", Config: RegistryConn{URL: "https://sr", Token: "t0ken-value", TokenFile: "/x"}, WantErr: "avro: registry token: set inline and as a file", Field: "TokenFile"},
		{Name: "missing token file", Config: RegistryConn{URL: "https://sr", TokenFile: "/nonexistent/token"}, WantErr: "avro: registry token file: open /nonexistent/token", Field: "TokenFile"},
	}, "pa55", "t0ken-value")
}

// TestRegistryBearerTokenRotation: the registry client sends the token file's bearer token
// with each request, read anew each time: a registry that refuses the file's first token
// (IsAuthError) accepts the same client's next request once the file holds the token it wants.
func TestRegistryBearerTokenRotation(t *testing.T) {
	reg := srfake.NewRegistry(srfake.WithAuth("Bearer second-token"))
	srv := httptest.NewServer(reg.Handler())
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	file := securetest.SecretFile(t, "first-token")
	cl, err := NewRegistryClient(RegistryConn{URL: srv.URL, TokenFile: file})
	if err != nil {
		t.Fatal(err)
	}
	if err := PingRegistry(ctx, cl); !IsAuthError(err) {
		t.Fatalf("ping with the first token: %v, want an auth error", err)
	}
	if err := os.WriteFile(file, []byte("second-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := PingRegistry(ctx, cl); err != nil {
		t.Fatalf("ping after rotation: %v", err)
	}
}
