// Package kafka holds the connection settings every backflow stage shares for Apache Kafka and
// turns them into client options for both clients the project uses: franz-go (admin, replay,
// plain consumers and producers, and goka's producer: GokaProducerBuilder) and sarama (goka's
// consumers and topic manager). Start with Conn.
package kafka

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/backflowhq/backflow/internal/conf"
	"github.com/backflowhq/backflow/internal/secure"
)

// SaramaVersion is the Kafka protocol version goka's sarama speaks. Kafka 4.x dropped the
// request versions older than the 2.1 baseline, and franz-go's kfake mishandles OffsetFetch
// from 2.4 on, so 2.3 is the newest version that works against both.
var SaramaVersion = sarama.V2_3_0_0

// Conn says how to reach the Kafka cluster. Each field's default is its default tag (none:
// the zero value); the tags declare the keys of the config file's kafka section.
type Conn struct {
	// Brokers are the bootstrap addresses, host:port. No default: the local stack's are in
	// the env file it writes (.stack/env).
	Brokers []string `key:"brokers" example:"kafka-1:9092,kafka-2:9092" doc:"bootstrap brokers, host:port"`
	// ClientID names this process in broker logs and quotas.
	ClientID string `key:"client_id" default:"backflow" doc:"client id in broker logs and quotas"`
	// DialTimeout bounds one connection attempt.
	DialTimeout time.Duration `key:"dial_timeout" default:"10s" doc:"bound on one connection attempt"`
	// TableReplication is the replication factor of the topics goka creates (group tables and
	// their changelogs). It must not exceed the broker count: 1 suits the local stack, use 3
	// on a production cluster.
	TableReplication int `key:"table_replication" default:"1" doc:"replication factor of the topics backflow creates (group tables, changelogs, loopback, DLQ); 3 on a production cluster"`
	// InstanceID turns on static group membership (KIP-345) for every consumer group this
	// process joins, goka's and franz-go's alike: a member that stops and comes back with the
	// same id within SessionTimeout gets its partitions back, and the other members see no
	// rebalance. It must be unique among the processes of a deployment and stable across their
	// restarts: the pod name of a StatefulSet (deploy/k8s), or a slot number. Default: none
	// (dynamic membership: every stop and start rebalances the group).
	InstanceID string `key:"instance_id" doc:"static group membership: this process's id in every consumer group it joins, unique per process and stable across its restarts (a StatefulSet's pod name); a restart within session_timeout then moves no partition; empty: dynamic membership"`
	// SessionTimeout is how long the group coordinator waits for a silent member before it
	// gives the member's partitions to the others. With InstanceID it must cover a restart:
	// a stopped static member does not leave the group, so its partitions wait that long for
	// it, and a crashed one's too. Default (0): 45s with InstanceID; without it each client's
	// own (10s for goka's stages, 45s for franz-go's).
	SessionTimeout time.Duration `key:"session_timeout,zero" doc:"how long a silent member keeps its partitions before the group moves them (it must cover a restart with instance_id); 0: 45s with instance_id, else the client's own (10s goka stages, 45s others)"`
	// SASL authenticates every connection, for both clients. Default: none.
	SASL SASL `key:",squash"`
	// TLS encrypts every connection, for both clients (a SASL_SSL or SSL listener). Default:
	// off (plaintext).
	TLS secure.TLS `key:",squash"`
}

// SASL mechanisms Conn.SASL accepts.
const (
	MechanismPlain       = "PLAIN"
	MechanismSCRAMSHA256 = "SCRAM-SHA-256"
	MechanismSCRAMSHA512 = "SCRAM-SHA-512"
	MechanismOAuthBearer = "OAUTHBEARER"
)

// SASL says how to authenticate to the brokers. The zero value means no authentication.
type SASL struct {
	// Mechanism is MechanismPlain, MechanismSCRAMSHA256, MechanismSCRAMSHA512 or
	// MechanismOAuthBearer, in any case; "" turns SASL off. PLAIN sends the password as is,
	// OAUTHBEARER the token: use them only with TLS.
	Mechanism string `key:"sasl_mechanism" doc:"PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER; empty: no SASL"`
	// Username is the SASL user. Required with a mechanism.
	Username string `key:"sasl_username" doc:"SASL user"`
	// Password is the user's password, from the environment (the variable of
	// sasl_password_file without _FILE); a config file never carries it inline.
	Password string `doc:"SASL password"`
	// PasswordFile is a file holding the password (trailing newline ignored), read on each
	// new connection. Set Password or PasswordFile, not both.
	PasswordFile string `key:"sasl_password_file" secret:"Password" doc:"file holding the SASL password (read on each new connection)"`
	// OAuth is where MechanismOAuthBearer takes its tokens: an OIDC token endpoint or a token
	// file. Default: none.
	OAuth OAuth `key:",squash"`
}

// On reports whether SASL is used.
func (s SASL) On() bool { return s.Mechanism != "" }

// password returns the inline password or the file's content.
func (s SASL) password() (string, error) {
	return secure.ReadSecret("kafka: sasl password", s.Password, s.PasswordFile)
}

// validate reports the first problem (one missing piece at a time), naming the field whose
// value brings the rule into force: a mechanism asks for a user and a password, a user or a
// password for a mechanism.
func (s SASL) validate() error {
	if s.Mechanism == MechanismOAuthBearer || (!s.On() && s.OAuth.set()) {
		return s.validateOAuth()
	}
	if s.OAuth.set() {
		return conf.Errorf(s.OAuth.firstSet(), "sasl oauth: set with mechanism %s; its keys are for %s", s.Mechanism, MechanismOAuthBearer)
	}
	if !s.On() {
		field := "Username"
		switch {
		case s.Username != "":
		case s.PasswordFile != "":
			field = "PasswordFile"
		default:
			field = "Password"
		}
		if s.Username != "" || s.Password != "" || s.PasswordFile != "" {
			return conf.Errorf(field, "sasl mechanism: empty while a username or password is set; want %s, %s or %s",
				MechanismPlain, MechanismSCRAMSHA256, MechanismSCRAMSHA512)
		}
		return nil
	}
	switch s.Mechanism {
	case MechanismPlain, MechanismSCRAMSHA256, MechanismSCRAMSHA512:
	default:
		return conf.Errorf("Mechanism", "sasl mechanism: %q, want %s, %s, %s or %s", s.Mechanism, MechanismPlain, MechanismSCRAMSHA256, MechanismSCRAMSHA512, MechanismOAuthBearer)
	}
	if s.Username == "" {
		return conf.Errorf("Mechanism", "sasl username: empty with mechanism %s", s.Mechanism)
	}
	pw, err := secure.ReadSecret("sasl password", s.Password, s.PasswordFile) // Validate prefixes "kafka: "
	switch {
	case err != nil:
		return conf.Field("PasswordFile", err)
	case pw == "":
		return conf.Errorf("Mechanism", "sasl password: empty with mechanism %s; set it or its file", s.Mechanism)
	}
	return nil
}

func (c Conn) withDefaults() Conn {
	conf.FillDefaults(&c)
	c.SASL.Mechanism = strings.ToUpper(strings.TrimSpace(c.SASL.Mechanism))
	return c
}

// Validate reports every bad field, each a conf.FieldError naming the field and its value.
func (c Conn) Validate() error {
	c = c.withDefaults()
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, conf.Errorf("Brokers", "brokers: %w", conf.ErrNotSet))
	}
	for _, b := range c.Brokers {
		if err := conf.CheckHostPort(b, false, false); err != nil {
			errs = append(errs, conf.Errorf("Brokers", "brokers: %w", err))
		}
	}
	if c.DialTimeout < 0 {
		errs = append(errs, conf.Errorf("DialTimeout", "dial timeout: %v is negative", c.DialTimeout))
	}
	if c.TableReplication < 1 {
		errs = append(errs, conf.Errorf("TableReplication", "table replication: %d, want 1 or more", c.TableReplication))
	}
	if err := validInstanceID(c.InstanceID); err != nil {
		errs = append(errs, conf.Errorf("InstanceID", "instance id: %w", err))
	}
	if c.SessionTimeout != 0 && (c.SessionTimeout < MinSessionTimeout || c.SessionTimeout > MaxSessionTimeout) {
		errs = append(errs, conf.Errorf("SessionTimeout", "session timeout: %v is outside %v..%v (the brokers' group.min/max.session.timeout.ms defaults)", c.SessionTimeout, MinSessionTimeout, MaxSessionTimeout))
	}
	errs = append(errs, conf.Nest("SASL", "", c.SASL.validate()), conf.Nest("TLS", "", c.TLS.Validate()))
	return conf.Nest("", "kafka: ", errors.Join(errs...))
}

// ParseBrokers splits a comma-separated broker list, dropping blanks.
func ParseBrokers(s string) []string {
	var out []string
	for _, b := range strings.Split(s, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// Opts returns franz-go client options for the cluster; callers append their own
// (topics, groups, producer settings). Call Validate first (NewClient does): should a TLS
// file fail to load here all the same, every dial fails with that error, so a connection
// never falls back to plaintext.
func (c Conn) Opts() []kgo.Opt {
	c = c.withDefaults()
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.Brokers...),
		kgo.ClientID(c.ClientID),
		kgo.DialTimeout(c.DialTimeout),
	}
	if c.TLS.On() {
		tc, err := c.TLS.Config()
		if err != nil {
			err = fmt.Errorf("kafka: %w", err)
			opts = append(opts, kgo.Dialer(func(context.Context, string, string) (net.Conn, error) { return nil, err }))
		} else {
			// DialTLSConfig sets ServerName per broker from its address when tc has none.
			opts = append(opts, kgo.DialTLSConfig(tc))
		}
	}
	if m := c.SASL.franz(); m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	return opts
}

// franz returns the franz-go SASL mechanism, or nil without SASL. The password is read on
// every new connection, so a rotated password file is picked up without a restart.
func (s SASL) franz() sasl.Mechanism {
	user := s.Username
	switch s.Mechanism {
	case MechanismPlain:
		return plain.Plain(func(context.Context) (plain.Auth, error) {
			pw, err := s.password()
			return plain.Auth{User: user, Pass: pw}, err
		})
	case MechanismSCRAMSHA256, MechanismSCRAMSHA512:
		auth := func(context.Context) (scram.Auth, error) {
			pw, err := s.password()
			return scram.Auth{User: user, Pass: pw}, err
		}
		if s.Mechanism == MechanismSCRAMSHA256 {
			return scram.Sha256(auth)
		}
		return scram.Sha512(auth)
	case MechanismOAuthBearer:
		return s.OAuth.franz()
	}
	return nil
}

// NewClient validates c and returns a franz-go client. It does not contact the cluster;
// the first request does.
func (c Conn) NewClient(extra ...kgo.Opt) (*kgo.Client, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append(c.Opts(), extra...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka: new client: %w", err)
	}
	return cl, nil
}

// Sarama returns the sarama configuration goka processors, views and emitters run with. Their
// producer is franz-go's (GokaProducerBuilder); the producer settings here serve whoever builds
// a sarama producer from this configuration all the same.
func (c Conn) Sarama() *sarama.Config {
	c = c.withDefaults()
	sc := goka.DefaultConfig()
	sc.Version = SaramaVersion
	sc.ClientID = c.ClientID
	sc.Net.DialTimeout = c.DialTimeout
	// A new group reads what was written before it first started: nothing is skipped.
	sc.Consumer.Offsets.Initial = sarama.OffsetOldest
	// A record counts as written once every in-sync replica has it.
	sc.Producer.RequiredAcks = sarama.WaitForAll
	// One request in flight per broker keeps sarama's retries in order: table changelog writes
	// and loopback emits of one partition are acknowledged in the order they were made, which
	// the in-order commits of ingest and the offset marks of the feature aggregates rely on.
	sc.Net.MaxOpenRequests = 1
	// A write whose partition leader died is retried until another broker leads it: KRaft
	// fences a dead broker after broker.session.timeout.ms (9 s), then elects. goka's 10
	// retries 100 ms apart gave up after about a second, so a table changelog write failed
	// and the stage stopped (fault suite #20, the leader killed under load). Now about 33 s:
	// 100 ms doubling to 2 s, 20 times.
	sc.Producer.Retry.Max = 20
	sc.Producer.Retry.BackoffFunc = producerBackoff
	// The answer to a JoinGroup waits until every member has rejoined, up to the rebalance
	// timeout (60 s), but sarama reads it with the plain read timeout (30 s). A rebalance that
	// waited on a slow member (an ingest instance whose records wait out a moderation outage
	// under --policy block) failed the joining member with "i/o timeout" and stopped its stage
	// (fault suite #5). Kafka's Java client waits the rebalance timeout plus its request
	// timeout for that answer; sarama has one read timeout for every request, so it gets the
	// sum. A broker that stops answering is noticed 60 s later than before.
	sc.Net.ReadTimeout = sc.Consumer.Group.Rebalance.Timeout + 30*time.Second
	// ChannelBufferSize stays at sarama's (and goka's) 256. 1024 was tried for the partition
	// goroutines that wait on the producer's input: the benchmark showed no measurable change
	// there (26 s and 32 s blocked per 300k records either way), while every partition
	// consumer kept four times as many fetched records, with their decompressed batches, alive
	// (pprof of a 1.5M-record drain: snappy.Decode 21-26 MB and parseRecords 7-15 MB of heap).
	sc.ChannelBufferSize = 256
	// Each partition consumer holds its last fetch, decompressed, until the partition's
	// goroutine has taken every record of it. At sarama's 1 MiB per partition and fetch, the
	// fifteen partition consumers of one process draining a backlog (ingest: both source
	// topics and the loopback; sink-features: the enriched topic and its loopback) held about
	// 44 MB that way (pprof: snappy.Decode, the largest item of the live heap). 256 KiB still
	// carries hundreds of records per fetch; a record larger than that is fetched whole anyway
	// (the broker returns at least one batch).
	sc.Consumer.Fetch.Default = 256 << 10
	c.membership(sc)
	if c.TLS.On() {
		// With no ServerName, sarama checks each broker against the host of its address.
		// Should the files fail to load here (Validate has loaded them), TLS stays on with
		// the system roots: the handshake fails rather than falling back to plaintext.
		sc.Net.TLS.Enable = true
		sc.Net.TLS.Config = &tls.Config{MinVersion: tls.VersionTLS12}
		if tc, err := c.TLS.Config(); err == nil {
			sc.Net.TLS.Config = tc
		}
	}
	if c.SASL.Mechanism == MechanismOAuthBearer {
		sc.Net.SASL.Enable = true
		sc.Net.SASL.Handshake = true
		sc.Net.SASL.Mechanism = sarama.SASLTypeOAuth
		sc.Net.SASL.TokenProvider = c.SASL.OAuth.sarama()
	} else if c.SASL.On() {
		pw, _ := c.SASL.password() // Validate has read it
		sc.Net.SASL.Enable = true
		sc.Net.SASL.Handshake = true
		sc.Net.SASL.User = c.SASL.Username
		sc.Net.SASL.Password = pw
		switch c.SASL.Mechanism {
		case MechanismPlain:
			sc.Net.SASL.Mechanism = sarama.SASLTypePlaintext
		case MechanismSCRAMSHA256:
			sc.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA256
			sc.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return newSCRAMClient(scramSHA256) }
		case MechanismSCRAMSHA512:
			sc.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
			sc.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return newSCRAMClient(scramSHA512) }
		}
	}
	return sc
}

// producerBackoff is sarama's wait before retry n of a produce: 100 ms doubling, at most 2 s.
func producerBackoff(n, _ int) time.Duration {
	if n > 5 {
		return 2 * time.Second
	}
	return min(100*time.Millisecond<<n, 2*time.Second)
}

// TopicManager returns the goka topic-manager settings: replication for the tables goka
// creates, and no creation of stream topics (topics are created by the operator or by
// backflow's own setup, with auto-creation off on the brokers).
func (c Conn) TopicManager() *goka.TopicManagerConfig {
	c = c.withDefaults()
	tm := goka.NewTopicManagerConfig()
	tm.Table.Replication = c.TableReplication
	tm.Stream.Replication = c.TableReplication
	tm.CreateTopicTimeout = 30 * time.Second
	return tm
}

// ProcessorOptions returns the goka options that point a processor at this cluster. Its
// offset and partition lookups are retried while Kafka's errors are transient (IsTransient),
// until ctx ends: pass the context the processor runs under. Its group rejoins as soon as a
// generation ends (rejoiningGroup), not goka's fixed 5 s later.
func (c Conn) ProcessorOptions(ctx context.Context) []goka.ProcessorOption {
	sc := c.Sarama()
	return []goka.ProcessorOption{
		goka.WithClientID(c.withDefaults().ClientID),
		goka.WithTopicManagerBuilder(retryingTopicManagerBuilder(ctx, nil, goka.TopicManagerBuilderWithConfig(sc, c.TopicManager()))),
		goka.WithConsumerGroupBuilder(rejoining(goka.ConsumerGroupBuilderWithConfig(sc))),
		goka.WithConsumerSaramaBuilder(goka.SaramaConsumerBuilderWithConfig(sc)),
		goka.WithProducerBuilder(c.GokaProducerBuilder()),
	}
}

// ViewOptions returns the goka options that point a view at this cluster.
func (c Conn) ViewOptions() []goka.ViewOption {
	sc := c.Sarama()
	return []goka.ViewOption{
		goka.WithViewClientID(c.withDefaults().ClientID),
		goka.WithViewTopicManagerBuilder(goka.TopicManagerBuilderWithConfig(sc, c.TopicManager())),
		goka.WithViewConsumerSaramaBuilder(goka.SaramaConsumerBuilderWithConfig(sc)),
	}
}

// EmitterOptions returns the goka options that point an emitter at this cluster.
func (c Conn) EmitterOptions() []goka.EmitterOption {
	sc := c.Sarama()
	return []goka.EmitterOption{
		goka.WithEmitterClientID(c.withDefaults().ClientID),
		goka.WithEmitterTopicManagerBuilder(goka.TopicManagerBuilderWithConfig(sc, c.TopicManager())),
		goka.WithEmitterProducerBuilder(c.GokaProducerBuilder()),
	}
}

// Endpoint says where c points, defaults applied: the comma-separated bootstrap brokers.
func (c Conn) Endpoint() string { return strings.Join(c.withDefaults().Brokers, ",") }
