package kafka

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/internal/conf/conftest"
	"github.com/backflowhq/backflow/internal/secure"
	"github.com/backflowhq/backflow/internal/secure/securetest"
)

// secureCluster starts a kfake cluster with TLS from a fresh CA and one SASL user.
func secureCluster(t *testing.T, mechanism, user, pass string) (*kfake.Cluster, securetest.PKI) {
	t.Helper()
	pki := securetest.New(t)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.TLS(pki.Server), kfake.EnableSASL(),
		kfake.Superuser(mechanism, user, pass), kfake.SeedTopics(1, "secured"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, pki
}

// TestSASLOverTLSBothClients: for each mechanism, franz-go and sarama (the client under goka)
// built from one Config authenticate over TLS and write one record each; franz-go reads back
// exactly those two.
func TestSASLOverTLSBothClients(t *testing.T) {
	for _, mech := range []string{MechanismPlain, MechanismSCRAMSHA256, MechanismSCRAMSHA512} {
		t.Run(mech, func(t *testing.T) {
			const pass = "pa55-word"
			c, pki := secureCluster(t, mech, "backflow", pass)
			cfg := Conn{Brokers: c.ListenAddrs(), ClientID: "sec-test",
				SASL: SASL{Mechanism: mech, Username: "backflow", PasswordFile: securetest.SecretFile(t, pass)},
				TLS:  secure.TLS{CAFile: pki.CAFile}}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()

			cl, err := cfg.NewClient(kgo.ConsumeTopics("secured"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			sc := cfg.Sarama()
			if !sc.Net.TLS.Enable || !sc.Net.SASL.Enable || string(sc.Net.SASL.Mechanism) != mech {
				t.Fatalf("sarama config: tls %v sasl %v %q", sc.Net.TLS.Enable, sc.Net.SASL.Enable, sc.Net.SASL.Mechanism)
			}
			RoundTripBothClients(ctx, t, cfg, cl, "secured")
		})
	}
}

// TestWrongSecretsFail: a wrong password, an unknown user and an untrusted CA fail the first
// request without retrying until the deadline, and no error shows the password. An untrusted
// CA is an IsAuthError here; kfake closes the connection on a failed SASL exchange where a
// real broker answers SASL_AUTHENTICATION_FAILED, so that classification is checked on the
// real broker (pipelines' secured-stack test) and by TestIsAuthError.
func TestWrongSecretsFail(t *testing.T) {
	c, pki := secureCluster(t, MechanismSCRAMSHA512, "backflow", "right-password")
	other := securetest.New(t)
	tests := []struct {
		name    string
		cfg     Conn
		authErr bool
	}{
		{"wrong password", Conn{SASL: SASL{Mechanism: MechanismSCRAMSHA512, Username: "backflow", Password: "wrong-password"}, TLS: secure.TLS{CAFile: pki.CAFile}}, false},
		{"unknown user", Conn{SASL: SASL{Mechanism: MechanismSCRAMSHA512, Username: "nobody", Password: "right-password"}, TLS: secure.TLS{CAFile: pki.CAFile}}, false},
		{"untrusted CA", Conn{SASL: SASL{Mechanism: MechanismSCRAMSHA512, Username: "backflow", Password: "right-password"}, TLS: secure.TLS{CAFile: other.CAFile}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Brokers = c.ListenAddrs()
			cl, err := tt.cfg.NewClient(kgo.RequestRetries(0))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err = kadm.NewClient(cl).BrokerMetadata(ctx)
			if err == nil {
				t.Fatal("metadata succeeded with bad credentials")
			}
			if IsAuthError(err) != tt.authErr {
				t.Fatalf("IsAuthError(%v) = %v, want %v", err, !tt.authErr, tt.authErr)
			}
			if errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("retried until the deadline instead of failing: %v", err)
			}
			if strings.Contains(err.Error(), "password") && strings.Contains(err.Error(), tt.cfg.SASL.Password) {
				t.Fatalf("error shows the password: %v", err)
			}
			t.Logf("%s: %v", tt.name, err)

			sc := tt.cfg.Sarama()
			sc.Metadata.Retry.Max = 0
			if scl, err := sarama.NewClient(tt.cfg.Brokers, sc); err == nil {
				scl.Close()
				t.Fatal("sarama connected with bad credentials")
			} else {
				t.Logf("sarama: %v", err)
			}
		})
	}
}

func TestIsAuthError(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{kerr.SaslAuthenticationFailed, true},
		{fmt.Errorf("metadata: %w", kerr.SaslAuthenticationFailed), true},
		{kerr.UnsupportedSaslMechanism, true},
		{kerr.TopicAuthorizationFailed, true},
		{kerr.GroupAuthorizationFailed, true},
		{x509.UnknownAuthorityError{}, true},
		{kerr.NotLeaderForPartition, false},
		{io.EOF, false},
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, false},
		{nil, false},
	} {
		if got := IsAuthError(tt.err); got != tt.want {
			t.Errorf("IsAuthError(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// TestTLSNeverFallsBackToPlaintext: a client built without Validate from a TLS setting whose
// CA cannot be read fails to dial with that error; it does not talk plaintext to the broker.
func TestTLSNeverFallsBackToPlaintext(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1)) // a plaintext broker: a fallback would succeed
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cfg := Conn{Brokers: c.ListenAddrs(), TLS: secure.TLS{CAFile: "/nonexistent/ca.crt"}}
	cl, err := kgo.NewClient(append(cfg.Opts(), kgo.RequestRetries(0))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = kadm.NewClient(cl).BrokerMetadata(ctx)
	if err == nil || !strings.Contains(err.Error(), "kafka: tls ca file") {
		t.Fatalf("metadata over a TLS setting that does not load: %v, want the CA error", err)
	}
	if sc := cfg.Sarama(); !sc.Net.TLS.Enable {
		t.Fatal("sarama: TLS turned off when its files do not load")
	}
}

func TestConnValidateSecurity(t *testing.T) {
	pki := securetest.New(t)
	b := []string{"kafka-1:9092"}
	conftest.Validate(t, []conftest.Case[Conn]{
		{Name: "no security", Config: Conn{Brokers: b}},
		{Name: "no brokers", Config: Conn{}, WantErr: "kafka: brokers: not set", Field: "Brokers"},
		{Name: "scram with file", Config: Conn{Brokers: b, SASL: SASL{Mechanism: MechanismSCRAMSHA256, Username: "u", PasswordFile: securetest.SecretFile(t, "pa55")}}},
		{Name: "tls only", Config: Conn{Brokers: b, TLS: secure.TLS{CAFile: pki.CAFile}}},
		{Name: "mutual tls", Config: Conn{Brokers: b, TLS: secure.TLS{CAFile: pki.CAFile, CertFile: pki.CertFile, KeyFile: pki.KeyFile}}},
		{Name: "unknown mechanism", Config: Conn{Brokers: b, SASL: SASL{Mechanism: "GSSAPI", Username: "u", Password: "pa55"}}, WantErr: `kafka: sasl mechanism: "GSSAPI"`, Field: "SASL.Mechanism"},
		{Name: "lower-case mechanism", Config: Conn{Brokers: b, SASL: SASL{Mechanism: "scram-sha-256", Username: "u", Password: "pa55"}}},
		{Name: "user without mechanism", Config: Conn{Brokers: b, SASL: SASL{Username: "u"}}, WantErr: "kafka: sasl mechanism: empty", Field: "SASL.Username"},
		{Name: "no username", Config: Conn{Brokers: b, SASL: SASL{Mechanism: MechanismPlain, Password: "pa55"}}, WantErr: "kafka: sasl username: empty", Field: "SASL.Mechanism"},
		{Name: "no password", Config: Conn{Brokers: b, SASL: SASL{Mechanism: MechanismPlain, Username: "u"}}, WantErr: "kafka: sasl password: empty", Field: "SASL.Mechanism"},
		{Name: "password twice", Config: Conn{Brokers: b, SASL: SASL{Mechanism: MechanismPlain, Username: "u", Password: "pa55", PasswordFile: "/x"}}, WantErr: "kafka: sasl password: set inline and as a file", Field: "SASL.PasswordFile"},
		{Name: "missing password file", Config: Conn{Brokers: b, SASL: SASL{Mechanism: MechanismPlain, Username: "u", PasswordFile: "/nonexistent/pw"}}, WantErr: "kafka: sasl password file: open /nonexistent/pw", Field: "SASL.PasswordFile"},
		{Name: "missing ca", Config: Conn{Brokers: b, TLS: secure.TLS{CAFile: "/nonexistent/ca.crt"}}, WantErr: "kafka: tls ca file: open /nonexistent/ca.crt", Field: "TLS.CAFile"},
		{Name: "ca not pem", Config: Conn{Brokers: b, TLS: secure.TLS{CAFile: securetest.SecretFile(t, "not a cert")}}, WantErr: "holds no PEM certificate", Field: "TLS.CAFile"},
		{Name: "cert without key", Config: Conn{Brokers: b, TLS: secure.TLS{CertFile: pki.CertFile}}, WantErr: "kafka: tls key file: empty while cert file is set", Field: "TLS.CertFile"},
		{Name: "bad broker", Config: Conn{Brokers: []string{"k1:9092", "nohost"}}, WantErr: `kafka: brokers: "nohost" is not host:port`, Field: "Brokers"},
	}, "pa55")
}

// RoundTripBothClients writes "from franz-go" to topic with cl and "from sarama" with a sarama
// producer of cfg, then reads topic with cl (which consumes it from the start) until it has
// both, in that order. Shared by the SASL tests of this package and of kafka_test.
func RoundTripBothClients(ctx context.Context, t *testing.T, cfg Conn, cl *kgo.Client, topic string) {
	t.Helper()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("from franz-go")}).FirstErr(); err != nil {
		t.Fatalf("franz-go produce: %v", err)
	}
	sc := cfg.Sarama()
	sc.Producer.Return.Successes = true
	prod, err := sarama.NewSyncProducer(cfg.Brokers, sc)
	if err != nil {
		t.Fatalf("sarama producer: %v", err)
	}
	if _, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder("from sarama")}); err != nil {
		t.Fatalf("sarama produce: %v", err)
	}
	prod.Close()
	var got []string
	for len(got) < 2 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %q, want 2 records: %v", got, err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if len(got) != 2 || got[0] != "from franz-go" || got[1] != "from sarama" {
		t.Fatalf("read %q, want [from franz-go from sarama]", got)
	}
}
