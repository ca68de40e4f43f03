// Package kafka holds the connection settings every backflow stage shares for Apache Kafka and
// turns them into client options for both clients the project uses: franz-go (admin, replay,
// plain consumers and producers) and sarama (underneath goka processors). Start with Config.
package kafka

import (
	"fmt"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"
	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultBrokers is the local stack's single broker (deploy/local/stack).
const DefaultBrokers = "127.0.0.1:19092"

// SaramaVersion is the Kafka protocol version goka's sarama speaks. Kafka 4.x dropped the
// request versions older than the 2.1 baseline, and franz-go's kfake mishandles OffsetFetch
// from 2.4 on, so 2.3 is the newest version that works against both.
var SaramaVersion = sarama.V2_3_0_0

// Config says how to reach the Kafka cluster.
type Config struct {
	// Brokers are the bootstrap addresses, host:port. Default: [DefaultBrokers].
	Brokers []string
	// ClientID names this process in broker logs and quotas. Default: "backflow".
	ClientID string
	// DialTimeout bounds one connection attempt. Default: 10s.
	DialTimeout time.Duration
	// TableReplication is the replication factor of the topics goka creates (group tables and
	// their changelogs). It must not exceed the broker count. Default: 1, the local stack;
	// use 3 on a production cluster.
	TableReplication int
}

func (c Config) withDefaults() Config {
	if len(c.Brokers) == 0 {
		c.Brokers = []string{DefaultBrokers}
	}
	if c.ClientID == "" {
		c.ClientID = "backflow"
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = 10 * time.Second
	}
	if c.TableReplication == 0 {
		c.TableReplication = 1
	}
	return c
}

// Validate reports the first bad field by name.
func (c Config) Validate() error {
	c = c.withDefaults()
	for _, b := range c.Brokers {
		host, port, ok := strings.Cut(b, ":")
		if !ok || host == "" || port == "" {
			return fmt.Errorf("kafka: brokers: %q is not host:port", b)
		}
	}
	if c.DialTimeout < 0 {
		return fmt.Errorf("kafka: dial timeout: %v is negative", c.DialTimeout)
	}
	if c.TableReplication < 1 {
		return fmt.Errorf("kafka: table replication: %d, want 1 or more", c.TableReplication)
	}
	return nil
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
// (topics, groups, producer settings).
func (c Config) Opts() []kgo.Opt {
	c = c.withDefaults()
	return []kgo.Opt{
		kgo.SeedBrokers(c.Brokers...),
		kgo.ClientID(c.ClientID),
		kgo.DialTimeout(c.DialTimeout),
	}
}

// NewClient validates c and returns a franz-go client. It does not contact the cluster;
// the first request does.
func (c Config) NewClient(extra ...kgo.Opt) (*kgo.Client, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append(c.Opts(), extra...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka: new client: %w", err)
	}
	return cl, nil
}

// Sarama returns the sarama configuration goka processors, views and emitters run with.
func (c Config) Sarama() *sarama.Config {
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
	return sc
}

// TopicManager returns the goka topic-manager settings: replication for the tables goka
// creates, and no creation of stream topics (topics are created by the operator or by
// backflow's own setup, with auto-creation off on the brokers).
func (c Config) TopicManager() *goka.TopicManagerConfig {
	c = c.withDefaults()
	tm := goka.NewTopicManagerConfig()
	tm.Table.Replication = c.TableReplication
	tm.Stream.Replication = c.TableReplication
	tm.CreateTopicTimeout = 30 * time.Second
	return tm
}

// ProcessorOptions returns the goka options that point a processor at this cluster.
func (c Config) ProcessorOptions() []goka.ProcessorOption {
	sc := c.Sarama()
	return []goka.ProcessorOption{
		goka.WithClientID(c.withDefaults().ClientID),
		goka.WithTopicManagerBuilder(goka.TopicManagerBuilderWithConfig(sc, c.TopicManager())),
		goka.WithConsumerGroupBuilder(goka.ConsumerGroupBuilderWithConfig(sc)),
		goka.WithConsumerSaramaBuilder(goka.SaramaConsumerBuilderWithConfig(sc)),
		goka.WithProducerBuilder(goka.ProducerBuilderWithConfig(sc)),
	}
}

// ViewOptions returns the goka options that point a view at this cluster.
func (c Config) ViewOptions() []goka.ViewOption {
	sc := c.Sarama()
	return []goka.ViewOption{
		goka.WithViewClientID(c.withDefaults().ClientID),
		goka.WithViewTopicManagerBuilder(goka.TopicManagerBuilderWithConfig(sc, c.TopicManager())),
		goka.WithViewConsumerSaramaBuilder(goka.SaramaConsumerBuilderWithConfig(sc)),
	}
}

// EmitterOptions returns the goka options that point an emitter at this cluster.
func (c Config) EmitterOptions() []goka.EmitterOption {
	sc := c.Sarama()
	return []goka.EmitterOption{
		goka.WithEmitterClientID(c.withDefaults().ClientID),
		goka.WithEmitterTopicManagerBuilder(goka.TopicManagerBuilderWithConfig(sc, c.TopicManager())),
		goka.WithEmitterProducerBuilder(goka.ProducerBuilderWithConfig(sc)),
	}
}

// Endpoint says where c points, defaults applied: the comma-separated bootstrap brokers.
func (c Config) Endpoint() string { return strings.Join(c.withDefaults().Brokers, ",") }
