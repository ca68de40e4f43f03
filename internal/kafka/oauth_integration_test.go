package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/oauth"

	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/internal/secure"
	"github.com/backflowhq/backflow/test/testenv"
)

// The secured stack's Kafka takes OAUTHBEARER tokens of audience "kafka" issued by its OIDC
// test server (deploy/local/lib/oauth.sh): the token's audience is the scope asked for, scope
// "kafka-expired" gets a token that expired long ago, and sessions re-authenticate every 15 s.

// oauthStack returns a Conn of the secured stack's broker with TLS and the given SASL settings.
func oauthStack(t *testing.T, s kafka.SASL) kafka.Conn {
	t.Helper()
	vals := testenv.Secure(t)
	return kafka.Conn{Brokers: kafka.ParseBrokers(vals["BACKFLOW_KAFKA_BROKERS"]), ClientID: "oauth-test",
		SASL: s, TLS: secure.TLS{CAFile: vals["BACKFLOW_KAFKA_TLS_CA_FILE"]}}
}

// endpointSASL is OAUTHBEARER from the stack's token endpoint, asking for scope.
func endpointSASL(t *testing.T, scope string) kafka.SASL {
	vals := testenv.Secure(t)
	if vals["BACKFLOW_OAUTH_TOKEN_URL"] == "" {
		t.Fatal("the secured stack's env file has no BACKFLOW_OAUTH_TOKEN_URL: restart it with this checkout's deploy/local/stack --secure up")
	}
	secret := filepath.Join(t.TempDir(), "client-secret")
	if err := os.WriteFile(secret, []byte("any-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return kafka.SASL{Mechanism: kafka.MechanismOAuthBearer, OAuth: kafka.OAuth{TokenURL: vals["BACKFLOW_OAUTH_TOKEN_URL"],
		ClientID: "backflow", ClientSecretFile: secret, Scopes: []string{scope}}}
}

// TestOAuthBearerLogin: franz-go and sarama (goka's client), built from one Conn with tokens
// from the stack's OIDC endpoint, log in, create a topic and write one record each; franz-go
// reads back exactly those two.
func TestOAuthBearerLogin(t *testing.T) {
	cfg := oauthStack(t, endpointSASL(t, "kafka"))
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topic := fmt.Sprintf("oauth-login-%d", time.Now().UnixNano())
	cl, err := cfg.NewClient(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatalf("create topic with a token: %v", err)
	}
	dropTopic(t, cfg, topic)
	kafka.RoundTripBothClients(ctx, t, cfg, cl, topic)
}

// TestOAuthBearerRefusals: a token of another audience and an expired token are refused by the
// brokers (SASL_AUTHENTICATION_FAILED, an IsAuthError, for franz-go and sarama alike); an
// expired token in the token file is not even sent, with an error naming the file.
func TestOAuthBearerRefusals(t *testing.T) {
	base := oauthStack(t, kafka.SASL{})
	expired := testenv.OAuthToken(t, "kafka-expired")
	expiredFile := filepath.Join(t.TempDir(), "token")
	testenv.WriteTokenFile(t, expiredFile, expired)
	brokerRefusal := func(err error) bool {
		return errors.Is(err, kerr.SaslAuthenticationFailed) || errors.Is(err, sarama.ErrSASLAuthenticationFailed)
	}
	tests := []struct {
		name string
		sasl kafka.SASL
		raw  string // a token sent as is, past the client's own checks
		want func(error) bool
	}{
		{name: "wrong audience", sasl: endpointSASL(t, "not-kafka"), want: brokerRefusal},
		{name: "expired token", raw: expired, want: brokerRefusal},
		{name: "expired token file", sasl: kafka.SASL{Mechanism: kafka.MechanismOAuthBearer, OAuth: kafka.OAuth{TokenFile: expiredFile}},
			want: func(err error) bool {
				return errors.Is(err, kafka.ErrTokenExpired) && strings.Contains(err.Error(), expiredFile)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base
			cfg.SASL = tt.sasl
			opts := []kgo.Opt{kgo.RequestRetries(0)}
			if tt.raw != "" {
				opts = append(opts, kgo.SASL(oauth.Auth{Token: tt.raw}.AsMechanism()))
			}
			cl, err := cfg.NewClient(opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err = kadm.NewClient(cl).BrokerMetadata(ctx)
			if err == nil || !tt.want(err) || !kafka.IsAuthError(err) {
				t.Fatalf("franz-go: err = %v; want a refusal that IsAuthError", err)
			}
			t.Logf("franz-go: %v", err)
			if tt.raw != "" {
				return // sarama takes its token from the config only
			}
			sc := cfg.Sarama()
			sc.Metadata.Retry.Max = 0
			_, err = sarama.NewClient(cfg.Brokers, sc)
			if err == nil || !tt.want(err) || !kafka.IsAuthError(err) {
				t.Fatalf("sarama: err = %v; want a refusal that IsAuthError", err)
			}
			t.Logf("sarama: %v", err)
		})
	}
}

// TestOAuthBearerTokenFileRotation: a franz-go client and a sarama producer (goka's client) log
// in with the file's token and keep running while the file is rotated. Rotated to a token of
// another audience, each one's next re-authentication is refused; rotated to a good token, the
// same clients write again, and the records they wrote after the rotation are read back.
func TestOAuthBearerTokenFileRotation(t *testing.T) {
	cfg := oauthStack(t, kafka.SASL{})
	file := filepath.Join(t.TempDir(), "token")
	testenv.WriteTokenFile(t, file, testenv.OAuthToken(t, "kafka"))
	cfg.SASL = kafka.SASL{Mechanism: kafka.MechanismOAuthBearer, OAuth: kafka.OAuth{TokenFile: file}}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second) // a good token lives 120 s
	defer cancel()
	topic := fmt.Sprintf("oauth-rotation-%d", time.Now().UnixNano())
	cl, err := cfg.NewClient(kgo.DefaultProduceTopic(topic), kgo.RecordDeliveryTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	dropTopic(t, cfg, topic)
	sc := cfg.Sarama()
	sc.Producer.Return.Successes = true
	sc.Producer.Retry.Max = 0
	sp, err := sarama.NewSyncProducer(cfg.Brokers, sc)
	if err != nil {
		t.Fatalf("sarama producer: %v", err)
	}
	defer sp.Close()
	clients := map[string]func(v string) error{
		"franz-go": func(v string) error {
			pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
			defer pcancel()
			return cl.ProduceSync(pctx, &kgo.Record{Value: []byte(v)}).FirstErr()
		},
		"sarama": func(v string) error {
			_, _, err := sp.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(v)})
			return err
		},
	}
	for name, produce := range clients {
		if err := produce("before rotation " + name); err != nil {
			t.Fatalf("%s: produce with the first token: %v", name, err)
		}
	}

	testenv.WriteTokenFile(t, file, testenv.OAuthToken(t, "not-kafka"))
	for name, produce := range clients {
		for i := 0; ; i++ { // the next re-authentication (every 15 s) reads the file
			err := produce(fmt.Sprintf("during rotation %s %d", name, i))
			if kafka.IsAuthError(err) {
				t.Logf("%s: refused after rotation: %v", name, err)
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("%s kept logging in after the file was rotated to a token of another audience (last error %v)", name, err)
			}
			if err != nil {
				t.Logf("%s: produce %d: %v", name, i, err)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}

	testenv.WriteTokenFile(t, file, testenv.OAuthToken(t, "kafka"))
	want := map[string]bool{}
	for name, produce := range clients {
		for produce("after rotation "+name) != nil {
			if ctx.Err() != nil {
				t.Fatalf("%s did not log in again once the file held a good token", name)
			}
			time.Sleep(500 * time.Millisecond)
		}
		want["after rotation "+name] = true
	}
	rd, err := cfg.NewClient(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var got []string
	for len(want) > 0 {
		fs := rd.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %q; still missing %v", got, want)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)); delete(want, string(r.Value)) })
	}
	if !strings.HasPrefix(got[0], "before rotation") {
		t.Fatalf("read %q, want it to start with a record written before the rotation", got)
	}
}

// dropTopic deletes topic when the test ends, through a client of cfg of its own (the test's
// is closed by then), so that the secured stack keeps nothing of the test.
func dropTopic(t *testing.T, cfg kafka.Conn, topic string) {
	t.Cleanup(func() {
		cl, err := cfg.NewClient()
		if err != nil {
			t.Errorf("delete topic %s: %v", topic, err)
			return
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := kadm.NewClient(cl).DeleteTopics(ctx, topic)
		if err == nil {
			err = res.Error()
		}
		if err != nil {
			t.Errorf("delete topic %s: %v", topic, err)
		}
	})
}

// TestOAuthBearerGokaProcessor: a goka processor (sarama's consumer group, goka's producer on
// franz-go, the group table's changelog) built from a Conn with OAUTHBEARER tokens from the
// stack's endpoint counts its records, and goes on counting after the brokers' session
// re-authentication deadline (15 s on the secured stack) has passed.
func TestOAuthBearerGokaProcessor(t *testing.T) {
	cfg := oauthStack(t, endpointSASL(t, "kafka"))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	topic := testenv.CreateTopic(t, ctx, cfg, "oauth-goka", 2)
	group := goka.Group(topic + "-counter")
	testenv.Groups(t, cfg, string(group))
	testenv.RemoveTopics(t, cfg, string(goka.GroupTable(group)))
	createTable(t, ctx, cfg, group, 2)
	c := startCounter(t, ctx, cfg, topic, group, t.TempDir(), false)
	defer c.close()
	keys := requestKeys(20)
	emitAll(t, ctx, cfg, topic, keys, 1, c)
	// Past the re-authentication deadline of every session the processor opened.
	time.Sleep(16 * time.Second)
	emitAll(t, ctx, cfg, topic, keys, 2, c)
}
