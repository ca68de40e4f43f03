package clickhouse

import (
	"errors"
	"regexp"
	"time"

	"github.com/backflowhq/backflow/internal/conf"
)

// DefaultBatchRows is the default of Config.BatchRows (its default tag says the same; a test
// holds the two together).
const DefaultBatchRows = 10000

// Config says what the sink consumes, how it batches, and what runs beside it (migrations, the
// DLQ mirror). Where it writes is Conn. Each field's default is its default tag (none: the zero
// value); the tags declare the keys of the config file's sink_clickhouse section.
type Config struct {
	// Group is the Kafka consumer group; it also names the group in sink_ledger.
	Group string `key:"group" default:"backflow-sink-clickhouse" doc:"Kafka consumer group (also recorded in sink_ledger)"`
	// Topic is the enriched topic to consume.
	Topic string `key:"topic" default:"backflow.enriched" doc:"enriched topic to consume"`
	// DLQTopic receives records that do not decode or that ClickHouse rejects, with stage
	// "sink-clickhouse".
	DLQTopic string `key:"dlq_topic" default:"backflow.dlq" doc:"dead-letter topic for records that do not decode or that ClickHouse rejects"`
	// BatchRows flushes once this many records are buffered; it is also the cap on buffered
	// records (polling asks for at most the room left).
	BatchRows int `key:"batch_rows" default:"10000" doc:"flush at this many buffered records; also the cap on buffered records"`
	// BatchInterval flushes a non-empty buffer this long after its first record arrived.
	BatchInterval time.Duration `key:"batch_interval" default:"1s" doc:"flush this long after the first buffered record"`
	// InsertTimeout bounds one attempt of one INSERT; a timed-out attempt is retried.
	InsertTimeout time.Duration `key:"insert_timeout" default:"30s" doc:"bound on one INSERT attempt (a timed-out attempt is retried), and on the flushes at shutdown (the one under way and the final one)"`
	// BackoffMin and BackoffMax bound the exponential backoff (with jitter, internal/retry) between attempts
	// of a failed flush or a registry outage.
	BackoffMin time.Duration `key:"backoff_min" default:"100ms" doc:"shortest backoff between attempts of a failed flush"`
	BackoffMax time.Duration `key:"backoff_max" default:"10s" doc:"longest backoff between attempts of a failed flush"`
	// FromStart makes a new group (no committed offsets) read the topic from its start rather
	// than its end, so nothing written before the sink first started is skipped. True where
	// the configuration is loaded; a Config built in code starts at the end unless it says so.
	FromStart bool `key:"from_start" default:"true" doc:"a group with no committed offsets starts at the topic's start (false: at its end)"`
	// Migrate applies pending migrations before the sink starts (the stage does; New does not).
	Migrate bool `key:"migrate" doc:"apply pending ClickHouse migrations before starting"`
	// MirrorDLQ runs the DLQ mirror (package dlqmirror, its config dlqmirror.ConfigOf) beside
	// the sink. True where the configuration is loaded.
	MirrorDLQ bool `key:"mirror_dlq" default:"true" doc:"also mirror the DLQ topic into the dlq_entries table (its own consumer group)"`
	// MirrorDLQGroup is the DLQ mirror's consumer group.
	MirrorDLQGroup string `key:"mirror_dlq_group" default:"backflow-sink-clickhouse-dlq" doc:"consumer group of the DLQ mirror"`
	// Rollups keeps the dashboards' rollups (docs/dashboards.md): each flush of the sink and
	// of the DLQ mirror marks the minutes it wrote into on RollupTopic, and the rollup loop
	// (package rollups, its own consumer group) re-aggregates them. True where the configuration
	// is loaded.
	Rollups bool `key:"rollups" default:"true" doc:"keep the dashboards' rollups: mark the minutes each flush wrote into and re-aggregate them (its own consumer group)"`
	// RollupTopic carries the marks; the rollup loop creates it with the sink topic's partitions
	// (rollups.EnsureTopic).
	RollupTopic string `key:"rollup_topic" default:"backflow.rollups" doc:"topic of the marks each flush writes and the rollup loop reads"`
	// RollupGroup is the rollup loop's consumer group.
	RollupGroup string `key:"rollup_group" default:"backflow-sink-clickhouse-rollups" doc:"consumer group of the rollup loop"`
}

// WithDefaults is c with each unset field at its default.
func (c Config) WithDefaults() Config { return c.withDefaults() }

func (c Config) withDefaults() Config {
	conf.FillDefaults(&c)
	return c
}

var kafkaName = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// Validate reports every bad field, each a conf.FieldError naming the field and its value.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, conf.Errorf(field, "clickhouse sink: "+format, a...))
	}
	if !kafkaName.MatchString(c.Group) {
		bad("Group", "group: %q is not a valid group name (letters, digits, '.', '_', '-')", c.Group)
	}
	if !kafkaName.MatchString(c.Topic) {
		bad("Topic", "topic: %q is not a valid Kafka topic name", c.Topic)
	}
	switch {
	case !kafkaName.MatchString(c.DLQTopic):
		bad("DLQTopic", "dlq topic: %q is not a valid Kafka topic name", c.DLQTopic)
	case c.DLQTopic == c.Topic:
		bad("DLQTopic", "dlq topic: %q is also its topic, the one the sink reads: give the DLQ a topic of its own", c.DLQTopic)
	}
	if c.BatchRows < 1 || c.BatchRows > 1_000_000 {
		bad("BatchRows", "batch rows: %d, want 1..1000000", c.BatchRows)
	}
	if c.BatchInterval < time.Millisecond {
		bad("BatchInterval", "batch interval: %v, want 1ms or more", c.BatchInterval)
	}
	if c.InsertTimeout < 0 {
		bad("InsertTimeout", "insert timeout: %v is negative", c.InsertTimeout)
	}
	switch {
	case c.BackoffMin < 0:
		bad("BackoffMin", "backoff: min %v max %v, want 0 <= min <= max", c.BackoffMin, c.BackoffMax)
	case c.BackoffMax < c.BackoffMin:
		bad("", "backoff: min %v max %v, want 0 <= min <= max", c.BackoffMin, c.BackoffMax)
	}
	if c.MirrorDLQ && !kafkaName.MatchString(c.MirrorDLQGroup) {
		bad("MirrorDLQGroup", "mirror dlq group: %q is not a valid group name (letters, digits, '.', '_', '-')", c.MirrorDLQGroup)
	}
	if c.Rollups {
		switch {
		case !kafkaName.MatchString(c.RollupTopic):
			bad("RollupTopic", "rollup topic: %q is not a valid Kafka topic name", c.RollupTopic)
		case c.RollupTopic == c.Topic || c.RollupTopic == c.DLQTopic:
			bad("RollupTopic", "rollup topic: %q is the sink's topic or its DLQ", c.RollupTopic)
		}
		if !kafkaName.MatchString(c.RollupGroup) || c.RollupGroup == c.Group || c.RollupGroup == c.MirrorDLQGroup {
			bad("RollupGroup", "rollup group: %q is not a valid group name, or is the sink's or the mirror's", c.RollupGroup)
		}
	}
	return errors.Join(errs...)
}

// MarksTopic is the topic the flushes of the sink and of the DLQ mirror mark their minutes on:
// RollupTopic, or "" without rollups.
func (c Config) MarksTopic() string {
	if !c.Rollups {
		return ""
	}
	return c.RollupTopic
}
