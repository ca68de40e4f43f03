package clickhouse

import (
	"crypto/x509"
	"io"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/backflowhq/backflow/internal/conf/conftest"
	"github.com/backflowhq/backflow/internal/secure"
	"github.com/backflowhq/backflow/internal/secure/securetest"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
)

func TestConfigValidate(t *testing.T) {
	conftest.Validate(t, []conftest.Case[Config]{
		{Name: "zero is the defaults", Config: Config{}},
		{Name: "explicit", Config: Config{Group: "g.1", Topic: "t-1", DLQTopic: "d_1", BatchRows: 500, BatchInterval: 50 * time.Millisecond}},
		{Name: "bad group", Config: Config{Group: "a b"}, WantErr: "group:", Field: "Group"},
		{Name: "bad topic", Config: Config{Topic: "a/b"}, WantErr: "topic:", Field: "Topic"},
		{Name: "bad dlq topic", Config: Config{DLQTopic: "a:b"}, WantErr: "dlq topic:", Field: "DLQTopic"},
		{Name: "dlq is the input", Config: Config{Topic: "x", DLQTopic: "x"}, WantErr: "dlq topic:", Field: ""},
		{Name: "negative rows", Config: Config{BatchRows: -1}, WantErr: "batch rows:", Field: "BatchRows"},
		{Name: "huge rows", Config: Config{BatchRows: 2_000_000}, WantErr: "batch rows:", Field: "BatchRows"},
		{Name: "tiny interval", Config: Config{BatchInterval: time.Microsecond}, WantErr: "batch interval:", Field: "BatchInterval"},
		{Name: "negative insert timeout", Config: Config{InsertTimeout: -time.Second}, WantErr: "insert timeout:", Field: "InsertTimeout"},
		{Name: "backoff inverted", Config: Config{BackoffMin: time.Second, BackoffMax: time.Millisecond}, WantErr: "backoff:"},
		{Name: "bad mirror group", Config: Config{MirrorDLQ: true, MirrorDLQGroup: "a b"}, WantErr: "mirror dlq group:", Field: "MirrorDLQGroup"},
		{Name: "no mirror, its group unused", Config: Config{MirrorDLQGroup: "a b"}},
	})
	d := Config{}.withDefaults()
	if d.Group != "backflow-sink-clickhouse" || d.Topic != "backflow.enriched" || d.BatchRows != 10000 || d.BatchInterval != time.Second || d.DLQTopic != "backflow.dlq" {
		t.Fatalf("defaults %+v", d)
	}
	if d.BatchRows != DefaultBatchRows || d.FromStart || d.MirrorDLQ {
		t.Fatalf("defaults %+v: batch rows not DefaultBatchRows, or a bool set by FillDefaults", d)
	}
}

func TestConnValidate(t *testing.T) {
	pki := securetest.New(t)
	conftest.Validate(t, []conftest.Case[chschema.Conn]{
		{Name: "zero is the defaults, but for the address", Config: chschema.Conn{Addr: "ch:9000"}},
		{Name: "no address", Config: chschema.Conn{}, WantErr: "clickhouse: addr: not set", Field: "Addr"},
		{Name: "explicit", Config: chschema.Conn{Addr: "ch:9000", Database: "x"}},
		{Name: "cluster", Config: chschema.Conn{Addr: "ch:9000", Cluster: "backflow"}},
		{Name: "bad cluster name", Config: chschema.Conn{Addr: "ch:9000", Cluster: "a-b"}, WantErr: `clickhouse: cluster: "a-b" is not a cluster name`, Field: "Cluster"},
		{Name: "zookeeper path without shard", Config: chschema.Conn{Addr: "ch:9000", Cluster: "c", ZooKeeperPath: "/ch/{table}"}, WantErr: `clickhouse: zookeeper path: "/ch/{table}" lacks {shard} or {table}`, Field: "ZooKeeperPath"},
		{Name: "relative zookeeper path", Config: chschema.Conn{Addr: "ch:9000", Cluster: "c", ZooKeeperPath: "ch/{shard}/{table}"}, WantErr: `clickhouse: zookeeper path: "ch/{shard}/{table}" does not start with /`, Field: "ZooKeeperPath"},
		{Name: "no port", Config: chschema.Conn{Addr: "no-port"}, WantErr: `clickhouse: addr: "no-port" is not host:port`, Field: "Addr"},
		{Name: "negative dial timeout", Config: chschema.Conn{DialTimeout: -1}, WantErr: "clickhouse: dial timeout:", Field: "DialTimeout"},
		{Name: "tls with ca", Config: chschema.Conn{Addr: "ch:9440", TLS: secure.TLS{CAFile: pki.CAFile}}},
		{Name: "password file", Config: chschema.Conn{Addr: "ch:9000", User: "backflow", PasswordFile: securetest.SecretFile(t, "pa55")}},
		{Name: "password twice", Config: chschema.Conn{Password: "pa55", PasswordFile: "/x"}, WantErr: "clickhouse: password: set inline and as a file", Field: "PasswordFile"},
		{Name: "missing password file", Config: chschema.Conn{PasswordFile: "/nonexistent/pw"}, WantErr: "clickhouse: password file: open /nonexistent/pw", Field: "PasswordFile"},
		{Name: "missing ca", Config: chschema.Conn{TLS: secure.TLS{CAFile: "/nonexistent/ca"}}, WantErr: "clickhouse: tls ca file", Field: "TLS.CAFile"},
	}, "pa55")
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
