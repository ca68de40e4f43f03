package redis

import (
	"crypto/x509"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/backflowhq/backflow/internal/secure"
	"github.com/backflowhq/backflow/internal/secure/securetest"
)

func TestConnValidateSecurity(t *testing.T) {
	pki := securetest.New(t)
	for _, tt := range []struct {
		name    string
		cfg     Conn
		wantErr string
	}{
		{"acl user over tls", Conn{Username: "backflow", PasswordFile: securetest.SecretFile(t, "pw"), TLS: secure.TLS{CAFile: pki.CAFile}}, ""},
		{"password twice", Conn{Password: "pw", PasswordFile: "/x"}, "redis: password: set inline and as a file"},
		{"empty password file", Conn{PasswordFile: securetest.SecretFile(t, "")}, "redis: password file"},
		{"key without cert", Conn{TLS: secure.TLS{KeyFile: pki.KeyFile}}, "redis: tls cert file: empty"},
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

// TestOptionsReadPasswordFile: the password file is read on each new connection, so a rotated
// file is picked up without a restart.
func TestOptionsReadPasswordFile(t *testing.T) {
	path := securetest.SecretFile(t, "first")
	opts, err := Conn{Username: "backflow", PasswordFile: path}.Options()
	if err != nil {
		t.Fatal(err)
	}
	if u, p := opts.CredentialsProvider(); u != "backflow" || p != "first" {
		t.Fatalf("credentials = %q, %q", u, p)
	}
	if err := writeFile(path, "second\n"); err != nil {
		t.Fatal(err)
	}
	if _, p := opts.CredentialsProvider(); p != "second" {
		t.Fatalf("after rotation, password = %q, want second", p)
	}
	if opts.Password != "" {
		t.Fatal("the password is also kept inline")
	}
}

func TestIsAuthError(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{errors.New("WRONGPASS invalid username-password pair or user is disabled."), true},
		{errors.New("NOAUTH Authentication required."), true},
		{x509.UnknownAuthorityError{}, true},
		{errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), false},
	} {
		if got := IsAuthError(tt.err); got != tt.want {
			t.Errorf("IsAuthError(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o600) }
