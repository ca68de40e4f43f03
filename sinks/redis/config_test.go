package redis

import (
	"crypto/x509"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/backflowhq/backflow/internal/conf/conftest"
	"github.com/backflowhq/backflow/internal/secure"
	"github.com/backflowhq/backflow/internal/secure/securetest"
)

func TestConnValidate(t *testing.T) {
	pki := securetest.New(t)
	conftest.Validate(t, []conftest.Case[Conn]{
		{Name: "zero is the defaults, but for the address", Config: Conn{Addr: "redis:6379"}},
		{Name: "no address", Config: Conn{}, WantErr: "redis: addr: not set", Field: "Addr"},
		{Name: "acl user over tls", Config: Conn{Addr: "redis:6379", Username: "backflow", PasswordFile: securetest.SecretFile(t, "pa55"), TLS: secure.TLS{CAFile: pki.CAFile}}},
		{Name: "no port", Config: Conn{Addr: "r"}, WantErr: `redis: addr: "r" is not host:port`, Field: "Addr"},
		{Name: "negative db", Config: Conn{DB: -1}, WantErr: "redis: db: -1 is negative", Field: "DB"},
		{Name: "password twice", Config: Conn{Password: "pa55", PasswordFile: "/x"}, WantErr: "redis: password: set inline and as a file", Field: "PasswordFile"},
		{Name: "empty password file", Config: Conn{PasswordFile: securetest.SecretFile(t, "")}, WantErr: "redis: password file", Field: "PasswordFile"},
		{Name: "key without cert", Config: Conn{TLS: secure.TLS{KeyFile: pki.KeyFile}}, WantErr: "redis: tls cert file: empty", Field: "TLS.KeyFile"},
		{Name: "cluster with seeds", Config: Conn{Mode: ModeCluster, Addrs: []string{"redis-1:6379", "redis-2:6379"}}},
		{Name: "cluster without seeds", Config: Conn{Mode: ModeCluster}, WantErr: "redis: addrs: empty; cluster mode needs at least one seed", Field: "Addrs"},
		{Name: "cluster seed without port", Config: Conn{Mode: ModeCluster, Addrs: []string{"redis-1"}}, WantErr: `redis: addrs: "redis-1" is not host:port`, Field: "Addrs"},
		{Name: "cluster with a single address", Config: Conn{Mode: ModeCluster, Addrs: []string{"redis-1:6379"}, Addr: "redis:6379"}, WantErr: `redis: addr: "redis:6379" is a single server's address, but mode is "cluster"`, Field: "Addr"},
		{Name: "cluster has only db 0", Config: Conn{Mode: ModeCluster, Addrs: []string{"redis-1:6379"}, DB: 2}, WantErr: "redis: db: 2, but a Redis Cluster has only database 0", Field: "DB"},
		{Name: "seeds in single mode", Config: Conn{Addr: "redis:6379", Addrs: []string{"redis-1:6379"}}, WantErr: `redis: addrs: ["redis-1:6379"] are cluster seeds, but mode is "single"`, Field: "Addrs"},
		{Name: "unknown mode", Config: Conn{Mode: "sentinel", Addr: "redis:6379"}, WantErr: `redis: mode: "sentinel", want "single" or "cluster"`, Field: "Mode"},
	}, "pa55")
}

// TestClusterOptions: the cluster client gets the seeds and the per-node settings (timeout,
// credentials) of the single-server options.
func TestClusterOptions(t *testing.T) {
	path := securetest.SecretFile(t, "pw")
	c := Conn{Mode: ModeCluster, Addrs: []string{"redis-1:6379", "redis-2:6379"}, Username: "backflow", PasswordFile: path}
	opts, err := c.ClusterOptions()
	if err != nil {
		t.Fatal(err)
	}
	if len(opts.Addrs) != 2 || opts.Addrs[1] != "redis-2:6379" || opts.DialTimeout != 5*time.Second {
		t.Fatalf("cluster options = %+v", opts)
	}
	if u, p := opts.CredentialsProvider(); u != "backflow" || p != "pw" {
		t.Fatalf("credentials = %q, %q", u, p)
	}
	if got := c.Endpoint(); got != "redis-1:6379,redis-2:6379" {
		t.Fatalf("Endpoint() = %q", got)
	}
	if _, err := (Conn{Addr: "redis:6379"}).ClusterOptions(); err == nil {
		t.Fatal("ClusterOptions in single mode: no error")
	}
}

// TestOptionsReadPasswordFile: the password file is read on each new connection, so a rotated
// file is picked up without a restart.
func TestOptionsReadPasswordFile(t *testing.T) {
	path := securetest.SecretFile(t, "first")
	opts, err := Conn{Addr: "redis:6379", Username: "backflow", PasswordFile: path}.Options()
	if err != nil {
		t.Fatal(err)
	}
	if u, p := opts.CredentialsProvider(); u != "backflow" || p != "first" {
		t.Fatalf("credentials = %q, %q", u, p)
	}
	if err := os.WriteFile(path, []byte("second\n"), 0o600); err != nil {
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
