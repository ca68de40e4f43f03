package ingest

import (
	"errors"
	"fmt"
	"time"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/dlq"
)

// Policy says what ingest does while the sensitive-word service is unavailable.
type Policy string

const (
	// PolicyBlock (default) waits: it retries with backoff, keeps the records in flight,
	// commits nothing past them and drops nothing. Consumption pauses once MaxInFlight records
	// are waiting.
	PolicyBlock Policy = "block"
	// PolicyPass lets records through flagged moderation=UNAVAILABLE once the circuit breaker
	// is open or MaxAttempts failed, so data keeps flowing unscreened and visibly so.
	PolicyPass Policy = "pass"
)

// Config configures the ingest group. Zero fields take the defaults stated on each.
type Config struct {
	// Group is the goka group (consumer group and table name prefix). Default: "backflow-ingest".
	Group string
	// InferenceTopic and GatewayTopic are the source topics. Defaults: model-inference-result,
	// gateway-log.
	InferenceTopic string
	GatewayTopic   string
	// EnrichedTopic receives one enriched record per valid original. Default: backflow.enriched.
	EnrichedTopic string
	// DLQTopic receives bad records. Default: dlq.DefaultTopic (backflow.dlq).
	DLQTopic string
	// ControlTopic is the compacted topic holding the replay epoch. Default: backflow.control.
	ControlTopic string
	// DedupeWindow is how long a claimed requestId keeps later records with it out.
	// Default: 7 days (the source topics' retention).
	DedupeWindow time.Duration
	// ExpireEvery is how often the table is swept for claims older than DedupeWindow.
	// Default: 1h.
	ExpireEvery time.Duration
	// BatchSize and BatchLinger bound a moderation batch: it is sent when it holds BatchSize
	// texts or its oldest text waited BatchLinger. Defaults: 100 and 100ms.
	BatchSize   int
	BatchLinger time.Duration
	// MaxInFlight caps the records of one source partition that are read but not yet
	// committed; at the cap, consumption of that partition pauses. Default: 2000.
	MaxInFlight int
	// Policy for long moderation outages. Default: PolicyBlock.
	Policy Policy
	// MaxAttempts is how many times a batch is tried before PolicyPass lets it through, and
	// how many times a mismatched reply is retried before the records are checked one by one
	// (a record whose reply still mismatches goes to the DLQ). Default: 5.
	MaxAttempts int
	// BackoffMin and BackoffMax bound the exponential backoff (jittered, internal/retry) between
	// retries of any outage: registry, moderation, Kafka. Defaults: 100ms and 30s.
	BackoffMin time.Duration
	BackoffMax time.Duration
	// BreakerFailures consecutive failed moderation calls open the circuit breaker; it stays
	// open for BreakerOpen, then lets one probe through. Defaults: 5 and 10s.
	BreakerFailures int
	BreakerOpen     time.Duration
	// Decoder tunes decoding (size limit).
	Decoder avro.DecoderConfig
}

func (c Config) withDefaults() Config {
	def := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	defd := func(p *time.Duration, v time.Duration) {
		if *p == 0 {
			*p = v
		}
	}
	defi := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	def(&c.Group, "backflow-ingest")
	def(&c.InferenceTopic, avro.TopicInferenceResult)
	def(&c.GatewayTopic, avro.TopicGatewayLog)
	def(&c.EnrichedTopic, "backflow.enriched")
	def(&c.DLQTopic, dlq.DefaultTopic)
	def(&c.ControlTopic, "backflow.control")
	defd(&c.DedupeWindow, 7*24*time.Hour)
	defd(&c.ExpireEvery, time.Hour)
	defi(&c.BatchSize, 100)
	defd(&c.BatchLinger, 100*time.Millisecond)
	defi(&c.MaxInFlight, 2000)
	if c.Policy == "" {
		c.Policy = PolicyBlock
	}
	defi(&c.MaxAttempts, 5)
	defd(&c.BackoffMin, 100*time.Millisecond)
	defd(&c.BackoffMax, 30*time.Second)
	defi(&c.BreakerFailures, 5)
	defd(&c.BreakerOpen, 10*time.Second)
	return c
}

// Validate reports every bad field, by name.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("ingest: "+format, a...)) }
	topics := map[string]string{}
	for name, t := range map[string]string{"inference topic": c.InferenceTopic, "gateway topic": c.GatewayTopic,
		"enriched topic": c.EnrichedTopic, "dlq topic": c.DLQTopic, "control topic": c.ControlTopic} {
		if other, dup := topics[t]; dup {
			bad("%s and %s are both %q", name, other, t)
		}
		topics[t] = name
	}
	if c.Policy != PolicyBlock && c.Policy != PolicyPass {
		bad("policy: %q, want block or pass", c.Policy)
	}
	for name, v := range map[string]time.Duration{"dedupe window": c.DedupeWindow, "expire every": c.ExpireEvery,
		"batch linger": c.BatchLinger, "backoff min": c.BackoffMin, "backoff max": c.BackoffMax, "breaker open": c.BreakerOpen} {
		if v < 0 {
			bad("%s: %v is negative", name, v)
		}
	}
	for name, v := range map[string]int{"batch size": c.BatchSize, "max in flight": c.MaxInFlight, "max attempts": c.MaxAttempts, "breaker failures": c.BreakerFailures} {
		if v < 1 {
			bad("%s: %d, want at least 1", name, v)
		}
	}
	if c.BackoffMax < c.BackoffMin {
		bad("backoff max %v is below backoff min %v", c.BackoffMax, c.BackoffMin)
	}
	if err := c.Decoder.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// LoopTopic is the goka loopback topic records on a foreign partition are forwarded through.
func (c Config) LoopTopic() string { return c.withDefaults().Group + "-loop" }

// TableTopic is the group table's changelog topic.
func (c Config) TableTopic() string { return c.withDefaults().Group + "-table" }
