package features

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/backflowhq/backflow/internal/dlq"
)

// Config says what the feature sink reads and how it writes.
type Config struct {
	// Group is the goka group: consumer group, table <group>-table and loopback <group>-loop.
	// Default "backflow-features".
	Group string
	// EnrichedTopic is the input. Default "backflow.enriched".
	EnrichedTopic string
	// DLQTopic receives enriched records that cannot be decoded (permanent errors only; a
	// registry outage is retried). Created when missing. Default "backflow.dlq".
	DLQTopic string
	// Project is the Feast project; it ends every Redis key. Default "backflow".
	Project string
	// RequestTTL is the Redis key TTL of request_features rows. Default 7 days.
	RequestTTL time.Duration
	// RequestWindow is how long a request's table entry (what makes its re-sent records
	// no-ops) is kept after its last record. Default 7 days.
	RequestWindow time.Duration
	// SweepEvery is how often expired request entries are deleted. Default 1h.
	SweepEvery time.Duration
}

// WithDefaults returns c with every unset field at its default.
func (c Config) WithDefaults() Config { return c.withDefaults() }

func (c Config) withDefaults() Config {
	if c.Group == "" {
		c.Group = "backflow-features"
	}
	if c.EnrichedTopic == "" {
		c.EnrichedTopic = "backflow.enriched"
	}
	if c.Project == "" {
		c.Project = "backflow"
	}
	if c.DLQTopic == "" {
		c.DLQTopic = dlq.DefaultTopic
	}
	if c.RequestTTL == 0 {
		c.RequestTTL = 7 * 24 * time.Hour
	}
	if c.RequestWindow == 0 {
		c.RequestWindow = 7 * 24 * time.Hour
	}
	if c.SweepEvery == 0 {
		c.SweepEvery = time.Hour
	}
	return c
}

// Validate reports the first bad field.
func (c Config) Validate() error {
	if c.RequestTTL < 0 {
		return fmt.Errorf("features: request ttl %v is negative", c.RequestTTL)
	}
	if c.RequestWindow < 0 || c.SweepEvery < 0 {
		return fmt.Errorf("features: request window %v / sweep interval %v is negative", c.RequestWindow, c.SweepEvery)
	}
	return nil
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
