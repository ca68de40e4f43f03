package avro

import (
	"context"
	"encoding/base64"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr/srfake"

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
	for _, tt := range []struct {
		name    string
		cfg     RegistryConn
		wantErr string
	}{
		{"https with ca", RegistryConn{URL: "https://sr:8081", TLS: secure.TLS{CAFile: pki.CAFile}}, ""},
		{"password file", RegistryConn{Username: "u", PasswordFile: securetest.SecretFile(t, "p")}, ""},
		{"tls on http", RegistryConn{URL: "http://sr:8081", TLS: secure.TLS{CAFile: pki.CAFile}}, "avro: registry tls: set, but the url"},
		{"password file without user", RegistryConn{PasswordFile: securetest.SecretFile(t, "p")}, "avro: registry username: empty"},
		{"password twice", RegistryConn{Username: "u", Password: "p", PasswordFile: "/x"}, "avro: registry password: set inline and as a file"},
		{"empty password file", RegistryConn{Username: "u", PasswordFile: securetest.SecretFile(t, "")}, "avro: registry password file: "},
		{"missing ca", RegistryConn{URL: "https://sr", TLS: secure.TLS{CAFile: "/nonexistent"}}, "avro: registry tls ca file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate() = %v, want %q", err, tt.wantErr)
			}
		})
	}
}
