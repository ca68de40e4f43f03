package clickhouse

import (
	"crypto/x509"
	"io"
	"strings"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/backflowhq/backflow/internal/secure"
	"github.com/backflowhq/backflow/internal/secure/securetest"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string // "" means valid; else a substring naming the field
	}{
		{"zero is the defaults", Config{}, ""},
		{"explicit", Config{Group: "g.1", Topic: "t-1", DLQTopic: "d_1", BatchRows: 500, BatchInterval: 50 * time.Millisecond}, ""},
		{"bad group", Config{Group: "a b"}, "group"},
		{"bad topic", Config{Topic: "a/b"}, "topic"},
		{"bad dlq topic", Config{DLQTopic: "a:b"}, "dlq topic"},
		{"dlq is the input", Config{Topic: "x", DLQTopic: "x"}, "dlq topic"},
		{"negative rows", Config{BatchRows: -1}, "batch rows"},
		{"huge rows", Config{BatchRows: 2_000_000}, "batch rows"},
		{"tiny interval", Config{BatchInterval: time.Microsecond}, "batch interval"},
		{"negative insert timeout", Config{InsertTimeout: -time.Second}, "insert timeout"},
		{"backoff inverted", Config{BackoffMin: time.Second, BackoffMax: time.Millisecond}, "backoff"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.wantErr != "" && err == nil:
				t.Fatalf("no error, want one naming %q", tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr+":"):
				t.Fatalf("error %q does not name %q", err, tt.wantErr)
			}
		})
	}
	d := Config{}.withDefaults()
	if d.Group != "backflow-sink-clickhouse" || d.Topic != "backflow.enriched" || d.BatchRows != 10000 || d.BatchInterval != time.Second || d.DLQTopic != "backflow.dlq" {
		t.Fatalf("defaults %+v", d)
	}
}

func TestConnValidate(t *testing.T) {
	for _, tt := range []struct {
		cfg     Conn
		wantErr bool
	}{
		{Conn{}, false},
		{Conn{Addr: "ch:9000", Database: "x"}, false},
		{Conn{Addr: "no-port"}, true},
		{Conn{DialTimeout: -1}, true},
	} {
		if err := tt.cfg.Validate(); (err != nil) != tt.wantErr {
			t.Errorf("%+v: err %v, want error %v", tt.cfg, err, tt.wantErr)
		}
	}
}

func TestConnValidateSecurity(t *testing.T) {
	pki := securetest.New(t)
	for _, tt := range []struct {
		name    string
		cfg     Conn
		wantErr string
	}{
		{"tls with ca", Conn{Addr: "ch:9440", TLS: secure.TLS{CAFile: pki.CAFile}}, ""},
		{"password file", Conn{User: "backflow", PasswordFile: securetest.SecretFile(t, "pw")}, ""},
		{"password twice", Conn{Password: "pw", PasswordFile: "/x"}, "clickhouse: password: set inline and as a file"},
		{"missing password file", Conn{PasswordFile: "/nonexistent/pw"}, "clickhouse: password file: open /nonexistent/pw"},
		{"missing ca", Conn{TLS: secure.TLS{CAFile: "/nonexistent/ca"}}, "clickhouse: tls ca file"},
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

func TestIsAuthError(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{&ch.Exception{Code: codeWrongPassword}, true},
		{&ch.Exception{Code: codeAuthenticationFailed}, true},
		{&ch.Exception{Code: codeUnknownUser}, true},
		{&ch.Exception{Code: codeAccessDenied}, true},
		{&ch.Exception{Code: codeUnknownTable}, false},
		{&ch.Exception{Code: codeTooManyParts}, false},
		{x509.UnknownAuthorityError{}, true},
		{io.EOF, false},
	} {
		if got := IsAuthError(tt.err); got != tt.want {
			t.Errorf("IsAuthError(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}
