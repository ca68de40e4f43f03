package secure_test

import (
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/backflowhq/backflow/internal/conf/conftest"
	"github.com/backflowhq/backflow/internal/secure"
	"github.com/backflowhq/backflow/internal/secure/securetest"
)

func TestReadSecret(t *testing.T) {
	file := securetest.SecretFile(t, "from-file")
	empty := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(empty, []byte("\n"), 0o600)
	for _, tt := range []struct {
		name, inline, file, want, wantErr string
	}{
		{"neither", "", "", "", ""},
		{"inline", "in-line", "", "in-line", ""},
		{"file, trailing newline dropped", "", file, "from-file", ""},
		{"both", "in-line", file, "", "x: set inline and as a file"},
		{"missing file", "", "/nonexistent/s", "", "x file: open /nonexistent/s"},
		{"empty file", "", empty, "", "is empty"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := secure.ReadSecret("x", tt.inline, tt.file)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "in-line") || strings.Contains(err.Error(), "from-file") {
					t.Fatalf("error shows the secret: %v", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("= %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestTLSConfig(t *testing.T) {
	pki := securetest.New(t)
	if c, err := (secure.TLS{}).Config(); c != nil || err != nil {
		t.Fatalf("zero TLS: %v, %v; want nil, nil (plaintext)", c, err)
	}
	c, err := secure.TLS{CAFile: pki.CAFile, CertFile: pki.CertFile, KeyFile: pki.KeyFile, ServerName: "kafka.internal"}.Config()
	if err != nil {
		t.Fatal(err)
	}
	if c.RootCAs == nil || len(c.Certificates) != 1 || c.ServerName != "kafka.internal" || c.MinVersion == 0 || c.InsecureSkipVerify {
		t.Fatalf("config %+v", c)
	}
	if c, err := (secure.TLS{Enabled: true}).Config(); err != nil || c == nil || c.RootCAs != nil {
		t.Fatalf("enabled alone: %+v %v; want system roots", c, err)
	}
}

// TestTLSValidate: every problem is reported, each naming its field, so that a loader puts it
// at the section's tls_* key.
func TestTLSValidate(t *testing.T) {
	pki := securetest.New(t)
	conftest.Validate(t, []conftest.Case[secure.TLS]{
		{Name: "off", Config: secure.TLS{}},
		{Name: "on, system roots", Config: secure.TLS{Enabled: true}},
		{Name: "mutual", Config: secure.TLS{CAFile: pki.CAFile, CertFile: pki.CertFile, KeyFile: pki.KeyFile}},
		{Name: "missing ca", Config: secure.TLS{CAFile: "/nonexistent/ca"}, WantErr: "tls ca file: open /nonexistent/ca", Field: "CAFile"},
		{Name: "ca not pem", Config: secure.TLS{CAFile: pki.KeyFile}, WantErr: "holds no PEM certificate", Field: "CAFile"},
		{Name: "cert without key", Config: secure.TLS{CertFile: pki.CertFile}, WantErr: "tls key file: empty while cert file is set", Field: "CertFile"},
		{Name: "key without cert", Config: secure.TLS{KeyFile: pki.KeyFile}, WantErr: "tls cert file: empty while key file is set", Field: "KeyFile"},
		{Name: "cert and key that do not match", Config: secure.TLS{CertFile: pki.CertFile, KeyFile: pki.CAFile}, WantErr: "tls client certificate", Field: "CertFile"},
		{Name: "both wrong, both reported: the ca", Config: secure.TLS{CAFile: "/nonexistent/ca", KeyFile: pki.KeyFile}, WantErr: "tls ca file", Field: "CAFile"},
		{Name: "both wrong, both reported: the key", Config: secure.TLS{CAFile: "/nonexistent/ca", KeyFile: pki.KeyFile}, WantErr: "tls cert file: empty", Field: "KeyFile"},
	})
}

func TestIsTLSError(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{x509.UnknownAuthorityError{}, true},
		{fmt.Errorf("dial: %w", x509.HostnameError{Host: "a"}), true},
		{errors.New("remote error: tls: bad certificate"), true},
		{errors.New("connection refused"), false},
		{nil, false},
	} {
		if got := secure.IsTLSError(tt.err); got != tt.want {
			t.Errorf("IsTLSError(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}
