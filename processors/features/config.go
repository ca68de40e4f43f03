package features

import (
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/backflowhq/backflow/internal/conf"
)

// Config says what the feature sink reads and how it writes. Each field's default is its
// default tag (none: the zero value), taken by a zero field; the tags declare the keys of the
// config file's sink_features section.
type Config struct {
	// Group is the goka group: consumer group, table <group>-table and loopback <group>-loop.
	Group string `key:"group" default:"backflow-features" doc:"goka group: consumer group, table and loopback topic prefix"`
	// EnrichedTopic is the input.
	EnrichedTopic string `key:"enriched_topic" default:"backflow.enriched" doc:"topic of enriched records"`
	// DLQTopic receives enriched records that cannot be decoded (permanent errors only; a
	// registry outage is retried). Created when missing.
	DLQTopic string `key:"dlq_topic" default:"backflow.dlq" doc:"dead-letter topic for enriched records that cannot be decoded"`
	// Project is the Feast project; it ends every Redis key.
	Project string `key:"project" default:"backflow" doc:"Feast project (suffix of every Redis key)"`
	// RequestTTL is the Redis key TTL of request_features rows.
	RequestTTL time.Duration `key:"request_ttl" default:"168h" doc:"Redis TTL of request_features keys"`
	// RequestWindow is how long a request's table entry (what makes its re-sent records
	// no-ops) is kept after its last record.
	RequestWindow time.Duration `key:"request_window" default:"168h" doc:"how long a request's table entry (what makes its replayed records no-ops) is kept after its last record"`
	// SweepEvery is how often expired request entries are deleted.
	SweepEvery time.Duration `key:"sweep_every" default:"1h" doc:"how often expired request entries are deleted"`
	// FoldInterval is how long an enriched partition's aggregate deltas are gathered before
	// each aggregate's are sent as one loopback message (fold.go); FoldRecords sends them
	// sooner, once that many records are waiting.
	FoldInterval time.Duration `key:"fold_interval" default:"50ms" doc:"how long the aggregates' deltas are gathered before each aggregate's are sent as one loopback message"`
	FoldRecords  int           `key:"fold_records" default:"500" doc:"records of one partition whose deltas are sent at once, before fold_interval"`
}

// WithDefaults returns c with every unset field at its default.
func (c Config) WithDefaults() Config { return c.withDefaults() }

func (c Config) withDefaults() Config {
	conf.FillDefaults(&c)
	return c
}

// Validate reports every bad field, each a conf.FieldError naming the field and its value.
func (c Config) Validate() error {
	var errs []error
	if c.RequestTTL < 0 {
		errs = append(errs, conf.Errorf("RequestTTL", "features: request ttl %v is negative", c.RequestTTL))
	}
	if c.RequestWindow < 0 {
		errs = append(errs, conf.Errorf("RequestWindow", "features: request window %v is negative", c.RequestWindow))
	}
	if c.FoldInterval < 0 {
		errs = append(errs, conf.Errorf("FoldInterval", "features: fold interval %v is negative", c.FoldInterval))
	}
	if c.FoldRecords < 0 {
		errs = append(errs, conf.Errorf("FoldRecords", "features: fold records %d is negative", c.FoldRecords))
	}
	if c.SweepEvery < 0 {
		errs = append(errs, conf.Errorf("SweepEvery", "features: sweep interval %v is negative", c.SweepEvery))
	}
	return errors.Join(errs...)
}

// LoopTopic is the group's loopback topic.
func (c Config) LoopTopic() string { return c.withDefaults().Group + "-loop" }

// TableTopic is the changelog topic of the group table.
func (c Config) TableTopic() string { return c.withDefaults().Group + "-table" }

// DefaultStorageDir is where Run keeps goka's local table storage when RunConfig.StorageDir is
// empty.
func DefaultStorageDir() string { return filepath.Join(os.TempDir(), "backflow-goka-features") }

// AggregateEntities are the join keys of the entities whose rows hold aggregates, one entry per
// entity key: tenant, (tenant, user) and model.
var AggregateEntities = [][]string{{TenantEntity}, {TenantEntity, UserEntity}, {ModelEntity}}
