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

func TestSinkConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     SinkConfig
		wantErr string // "" means valid; else a substring naming the field
	}{
		{"zero is the defaults", SinkConfig{}, ""},
		{"explicit", SinkConfig{Group: "g.1", Topic: "t-1", DLQTopic: "d_1", BatchRows: 500, BatchInterval: 50 * time.Millisecond}, ""},
		{"bad group", SinkConfig{Group: "a b"}, "group"},
		{"bad topic", SinkConfig{Topic: "a/b"}, "topic"},
		{"bad dlq topic", SinkConfig{DLQTopic: "a:b"}, "dlq topic"},
		{"dlq is the input", SinkConfig{Topic: "x", DLQTopic: "x"}, "dlq topic"},
		{"negative rows", SinkConfig{BatchRows: -1}, "batch rows"},
		{"huge rows", SinkConfig{BatchRows: 2_000_000}, "batch rows"},
		{"tiny interval", SinkConfig{BatchInterval: time.Microsecond}, "batch interval"},
		{"negative insert timeout", SinkConfig{InsertTimeout: -time.Second}, "insert timeout"},
		{"backoff inverted", SinkConfig{BackoffMin: time.Second, BackoffMax: time.Millisecond}, "backoff"},
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
	d := SinkConfig{}.withDefaults()
	if d.Group != "backflow-sink-clickhouse" || d.Topic != "backflow.enriched" || d.BatchRows != 10000 || d.BatchInterval != time.Second || d.DLQTopic != "backflow.dlq" {
		t.Fatalf("defaults %+v", d)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		cfg     Config
		wantErr bool
	}{
		{Config{}, false},
		{Config{Addr: "ch:9000", Database: "x"}, false},
		{Config{Addr: "no-port"}, true},
		{Config{DialTimeout: -1}, true},
	} {
		if err := tt.cfg.Validate(); (err != nil) != tt.wantErr {
			t.Errorf("%+v: err %v, want error %v", tt.cfg, err, tt.wantErr)
		}
	}
}

func TestConfigValidateSecurity(t *testing.T) {
	pki := securetest.New(t)
	for _, tt := range []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"tls with ca", Config{Addr: "ch:9440", TLS: secure.TLS{CAFile: pki.CAFile}}, ""},
		{"password file", Config{User: "backflow", PasswordFile: securetest.SecretFile(t, "pw")}, ""},
		{"password twice", Config{Password: "pw", PasswordFile: "/x"}, "clickhouse: password: set inline and as a file"},
		{"missing password file", Config{PasswordFile: "/nonexistent/pw"}, "clickhouse: password file: open /nonexistent/pw"},
		{"missing ca", Config{TLS: secure.TLS{CAFile: "/nonexistent/ca"}}, "clickhouse: tls ca file"},
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
