package ingest

import (
	"errors"
	"time"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/conf"
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

// Config configures the ingest group. Each field's default is its default tag (none: the
// zero value), taken by a zero field; the tags declare the keys of the config file's ingest
// section.
type Config struct {
	// Group is the goka group (consumer group and table name prefix).
	Group string `key:"group" default:"backflow-ingest" doc:"goka group: consumer group, table and loopback topic prefix"`
	// InferenceTopic and GatewayTopic are the source topics (avro.TopicInferenceResult and
	// avro.TopicGatewayLog by default).
	InferenceTopic string `key:"inference_topic" default:"model-inference-result" doc:"source topic of inference results"`
	GatewayTopic   string `key:"gateway_topic" default:"gateway-log" doc:"source topic of gateway logs"`
	// EnrichedTopic receives one enriched record per valid original.
	EnrichedTopic string `key:"enriched_topic" default:"backflow.enriched" doc:"topic enriched records go to"`
	// DLQTopic receives bad records (dlq.DefaultTopic by default).
	DLQTopic string `key:"dlq_topic" default:"backflow.dlq" doc:"dead-letter topic"`
	// ControlTopic is the compacted topic holding the replay epoch.
	ControlTopic string `key:"control_topic" default:"backflow.control" doc:"compacted topic holding the replay epoch"`
	// DedupeWindow is how long a claimed requestId keeps later records with it out: 7 days
	// (the source topics' retention) by default.
	DedupeWindow time.Duration `key:"dedupe_window" default:"168h" doc:"how long a requestId keeps later records with it out"`
	// ExpireEvery is how often the table's storage drops its time segments whose claims are all
	// older than DedupeWindow.
	ExpireEvery time.Duration `key:"expire_every" default:"1h" doc:"how often claims older than the dedupe window are dropped (a time segment at a time)"`
	// BatchSize and BatchLinger bound a moderation batch: it is sent when it holds BatchSize
	// texts or its oldest text waited BatchLinger.
	BatchSize   int           `key:"batch_size" default:"100" doc:"texts per moderation batch"`
	BatchLinger time.Duration `key:"batch_linger" default:"100ms" doc:"longest wait before a partial batch is sent"`
	// MaxInFlight caps the records of one source partition that are read but not yet
	// committed; at the cap, consumption of that partition pauses.
	MaxInFlight int `key:"max_in_flight" default:"2000" doc:"records per source partition read but not yet committed; consumption pauses at the cap"`
	// Policy for long moderation outages (PolicyBlock by default).
	Policy Policy `key:"policy" default:"block" doc:"during a moderation outage: block (pause, drop nothing) or pass (emit flagged UNAVAILABLE)"`
	// MaxAttempts is how many times a batch is tried before PolicyPass lets it through, and
	// how many times a mismatched reply is retried before the records are checked one by one
	// (a record whose reply still mismatches goes to the DLQ).
	MaxAttempts int `key:"max_attempts" default:"5" doc:"moderation attempts before policy pass lets a batch through, and mismatch retries before checking one by one"`
	// BackoffMin and BackoffMax bound the exponential backoff (jittered, internal/retry) between
	// retries of any outage: registry, moderation, Kafka.
	BackoffMin time.Duration `key:"backoff_min" default:"100ms" doc:"shortest backoff between retries of an outage"`
	BackoffMax time.Duration `key:"backoff_max" default:"30s" doc:"longest backoff between retries of an outage"`
	// BreakerFailures consecutive failed moderation calls open the circuit breaker; it stays
	// open for BreakerOpen, then lets one probe through.
	BreakerFailures int           `key:"breaker_failures" default:"5" doc:"consecutive failed moderation calls that open the circuit breaker"`
	BreakerOpen     time.Duration `key:"breaker_open" default:"10s" doc:"how long the breaker stays open before one probe"`
	// Decoder tunes decoding (size limit).
	Decoder avro.DecoderConfig `key:",squash"`
}

func (c Config) withDefaults() Config {
	conf.FillDefaults(&c)
	return c
}

// Validate reports every bad field, each a conf.FieldError naming the field and its value.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(field, format string, a ...any) { errs = append(errs, conf.Errorf(field, "ingest: "+format, a...)) }
	topics := map[string]string{}
	for _, t := range []struct{ field, name, topic string }{{"InferenceTopic", "inference topic", c.InferenceTopic},
		{"GatewayTopic", "gateway topic", c.GatewayTopic}, {"EnrichedTopic", "enriched topic", c.EnrichedTopic},
		{"DLQTopic", "dlq topic", c.DLQTopic}, {"ControlTopic", "control topic", c.ControlTopic}} {
		if other, dup := topics[t.topic]; dup {
			bad(t.field, "%s and %s are both %q", t.name, other, t.topic)
		}
		topics[t.topic] = t.name
	}
	if c.Policy != PolicyBlock && c.Policy != PolicyPass {
		bad("Policy", "policy: %q, want block or pass", c.Policy)
	}
	for _, d := range []struct {
		field, name string
		v           time.Duration
	}{{"DedupeWindow", "dedupe window", c.DedupeWindow}, {"ExpireEvery", "expire every", c.ExpireEvery},
		{"BatchLinger", "batch linger", c.BatchLinger}, {"BackoffMin", "backoff min", c.BackoffMin},
		{"BackoffMax", "backoff max", c.BackoffMax}, {"BreakerOpen", "breaker open", c.BreakerOpen}} {
		if d.v < 0 {
			bad(d.field, "%s: %v is negative", d.name, d.v)
		}
	}
	for _, n := range []struct {
		field, name string
		v           int
	}{{"BatchSize", "batch size", c.BatchSize}, {"MaxInFlight", "max in flight", c.MaxInFlight},
		{"MaxAttempts", "max attempts", c.MaxAttempts}, {"BreakerFailures", "breaker failures", c.BreakerFailures}} {
		if n.v < 1 {
			bad(n.field, "%s: %d, want at least 1", n.name, n.v)
		}
	}
	if c.BackoffMax < c.BackoffMin {
		bad("", "backoff max %v is below backoff min %v", c.BackoffMax, c.BackoffMin)
	}
	errs = append(errs, conf.Nest("Decoder", "", c.Decoder.Validate()))
	return errors.Join(errs...)
}

// LoopTopic is the goka loopback topic records on a foreign partition are forwarded through.
func (c Config) LoopTopic() string { return c.withDefaults().Group + "-loop" }

// TableTopic is the group table's changelog topic.
func (c Config) TableTopic() string { return c.withDefaults().Group + "-table" }
