package dlq

import (
	"fmt"
	"regexp"
)

// DefaultTopic is the dead-letter topic's default name.
const DefaultTopic = "backflow.dlq"

// DefaultMaxMessageBytes is the default of Config.MaxMessageBytes: franz-go's default
// ProducerBatchMaxBytes, which is also Kafka's historical max.message.bytes default.
const DefaultMaxMessageBytes = 1000012

// minMaxMessageBytes leaves room for our headers (a 1 KiB message and the rest) and framing;
// maxMaxMessageBytes is franz-go's upper bound for ProducerBatchMaxBytes.
const (
	minMaxMessageBytes = 4096
	maxMaxMessageBytes = 1 << 30
)

// Config says where and as whom a Writer writes.
type Config struct {
	// Topic is the dead-letter topic. Default: DefaultTopic ("backflow.dlq").
	Topic string
	// Stage names the stage that writes, for backflow.error.stage: lowercase letters, digits,
	// '_' and '-', e.g. "ingest", "sink-clickhouse". Required; an Entry's own Stage wins.
	Stage string
	// MaxMessageBytes is the largest DLQ record batch the writer produces, counted as Kafka
	// and franz-go count it (one record with its framing). A bad record that would not fit is
	// written with its value cut short and backflow.error.truncated set, instead of blocking
	// its partition forever. It must not exceed the client's ProducerBatchMaxBytes nor the
	// DLQ topic's max.message.bytes. Default: DefaultMaxMessageBytes (1000012).
	MaxMessageBytes int
}

func (c Config) withDefaults() Config {
	if c.Topic == "" {
		c.Topic = DefaultTopic
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	return c
}

var (
	topicRE = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)
	stageRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)
)

// Validate reports the first bad field by name, with its value.
func (c Config) Validate() error {
	c = c.withDefaults()
	if !validTopic(c.Topic) {
		return fmt.Errorf("dlq: topic: %q is not a valid Kafka topic name", c.Topic)
	}
	if c.Stage == "" {
		return fmt.Errorf("dlq: stage: empty, want the writing stage's name (e.g. %q)", "ingest")
	}
	if !stageRE.MatchString(c.Stage) {
		return fmt.Errorf("dlq: stage: %q, want lowercase letters, digits, '_' and '-' (at most 64)", c.Stage)
	}
	if c.MaxMessageBytes < minMaxMessageBytes {
		return fmt.Errorf("dlq: max message bytes: %d, want at least %d", c.MaxMessageBytes, minMaxMessageBytes)
	}
	if c.MaxMessageBytes > maxMaxMessageBytes {
		return fmt.Errorf("dlq: max message bytes: %d, want at most %d", c.MaxMessageBytes, maxMaxMessageBytes)
	}
	return nil
}

func validTopic(t string) bool {
	return topicRE.MatchString(t) && t != "." && t != ".."
}
