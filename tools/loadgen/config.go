// Package loadgen makes realistic traffic for backflow's two source topics and writes an exact
// manifest of what the brokers acknowledged, which tests use as their oracle. Start with
// Config, Generator (what to send; deterministic for a seed) and Run (sending it).
//
// One generated request yields three source records, as a real gateway and model would write
// them: a gateway-log REQUEST entry, a model-inference-result, and a gateway-log RESPONSE
// entry, all keyed by the same requestId. On top of that come duplicates (a record re-sent
// byte for byte, sometimes to another partition) and poison records of every bad-input class.
package loadgen

import (
	"errors"
	"fmt"
	"time"

	"github.com/backflowhq/backflow/avro"
)

// Config describes the traffic. Zero fields take the defaults stated on each.
type Config struct {
	// InferenceTopic and GatewayTopic are the topics written. Defaults: model-inference-result
	// and gateway-log.
	InferenceTopic string
	GatewayTopic   string
	// Requests is how many requests to generate; 0 with Duration 0 means 10000. When Duration
	// is set, generation stops at whichever limit comes first (Requests 0: no count limit).
	Requests int
	Duration time.Duration
	// Rate is requests per second; 0 sends flat out.
	Rate float64
	// Backfill dates the first request's event times this long before the clock, and moves
	// them evenly back to the clock by the end of the run (by request count, or by elapsed
	// Duration, whichever is further along), so one short run fills a dashboard's recent
	// history. At most 24 h. Default 0: event times are the clock.
	Backfill time.Duration
	// Models and Tenants are the population sizes; UsersPerTenant the users in each tenant.
	// Popularity follows a Zipf law with exponent ZipfS (> 1). Defaults: 12, 50, 200, 1.2.
	Models         int
	Tenants        int
	UsersPerTenant int
	ZipfS          float64
	// SensitiveShare is the share of texts that contain a word of Words. Default: 0.05.
	SensitiveShare float64
	// Words are the sensitive-word dictionary entries to plant. Default: DefaultWords.
	Words []string
	// DuplicateRate is the share of source records re-sent with the same requestId (the same
	// bytes). Of those, CrossPartitionShare go to a partition other than the key's.
	// Defaults: 0.02 and 0.25.
	DuplicateRate       float64
	CrossPartitionShare float64
	// PoisonRate is how many poison records come per source record, spread evenly over
	// PoisonKinds. Default: 0.01.
	PoisonRate float64
	// PoisonKinds restricts the kinds of poison. Default: AllPoisonKinds.
	PoisonKinds []PoisonKind
	// V2Share is the share of inference results written with schema version 2 (the rest with
	// version 1). Default: 0.5.
	V2Share float64
	// EmbeddingShare is the share of inference results with an embedding of EmbeddingDim
	// floats. Defaults: 0.3 and 16.
	EmbeddingShare float64
	EmbeddingDim   int
	// MaxRecordBytes is the decoder's size limit; oversized poison is just above it.
	// Default: avro.DefaultMaxRecordBytes.
	MaxRecordBytes int
	// Seed makes the traffic reproducible. Default: 1.
	Seed uint64
	// EventStart and EventStep replay a simulated clock instead of the wall clock: request n
	// (from 1) is sent by the gateway at EventStart + (n-1)·EventStep, and its other records
	// follow it by their latencies as usual. Tests use it for traffic spread over hours (event-time
	// windows) sent in seconds. Both zero (the default): every request at the wall clock.
	EventStart time.Time
	EventStep  time.Duration
	// Subjects names the registry subjects schemas are registered under. Default:
	// avro.TopicName ("<topic>-value"; inference v1 and v2 share the subject).
	Subjects avro.SubjectStrategy
}

// The shares in Config are fractions; a negative value means "none" where zero means default.
const none = -1

func (c Config) withDefaults() Config {
	str := func(p *string, d string) {
		if *p == "" {
			*p = d
		}
	}
	intv := func(p *int, d int) {
		if *p == 0 {
			*p = d
		}
	}
	frac := func(p *float64, d float64) {
		if *p == 0 {
			*p = d
		} else if *p < 0 {
			*p = 0
		}
	}
	str(&c.InferenceTopic, avro.TopicInferenceResult)
	str(&c.GatewayTopic, avro.TopicGatewayLog)
	if c.Requests == 0 && c.Duration == 0 {
		c.Requests = 10000
	}
	intv(&c.Models, 12)
	intv(&c.Tenants, 50)
	intv(&c.UsersPerTenant, 200)
	if c.ZipfS == 0 {
		c.ZipfS = 1.2
	}
	frac(&c.SensitiveShare, 0.05)
	if len(c.Words) == 0 {
		c.Words = DefaultWords
	}
	frac(&c.DuplicateRate, 0.02)
	frac(&c.CrossPartitionShare, 0.25)
	frac(&c.PoisonRate, 0.01)
	if len(c.PoisonKinds) == 0 {
		c.PoisonKinds = AllPoisonKinds
	}
	frac(&c.V2Share, 0.5)
	frac(&c.EmbeddingShare, 0.3)
	intv(&c.EmbeddingDim, 16)
	intv(&c.MaxRecordBytes, avro.DefaultMaxRecordBytes)
	if c.Seed == 0 {
		c.Seed = 1
	}
	return c
}

// Validate reports every bad field at once, by name.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("loadgen: "+format, a...)) }
	if c.InferenceTopic == c.GatewayTopic {
		bad("inference and gateway topics are both %q", c.InferenceTopic)
	}
	if c.Requests < 0 {
		bad("requests: %d is negative", c.Requests)
	}
	if c.Duration < 0 {
		bad("duration: %v is negative", c.Duration)
	}
	if c.Rate < 0 {
		bad("rate: %v is negative", c.Rate)
	}
	if c.Backfill < 0 || c.Backfill > 24*time.Hour {
		bad("backfill: %v, want 0 to 24h", c.Backfill)
	}
	for name, v := range map[string]int{"models": c.Models, "tenants": c.Tenants, "users per tenant": c.UsersPerTenant, "embedding dim": c.EmbeddingDim} {
		if v < 1 {
			bad("%s: %d, want at least 1", name, v)
		}
	}
	if c.ZipfS <= 1 {
		bad("zipf s: %v, want > 1", c.ZipfS)
	}
	for name, v := range map[string]float64{"sensitive share": c.SensitiveShare, "duplicate rate": c.DuplicateRate,
		"cross-partition share": c.CrossPartitionShare, "poison rate": c.PoisonRate, "v2 share": c.V2Share, "embedding share": c.EmbeddingShare} {
		if v > 1 {
			bad("%s: %v, want a fraction in [0, 1]", name, v)
		}
	}
	for _, k := range c.PoisonKinds {
		if _, ok := poisonClass[k]; !ok {
			bad("poison kind: %q is unknown (known: %v)", k, AllPoisonKinds)
		}
	}
	if c.EventStep < 0 {
		bad("event step: %v is negative", c.EventStep)
	}
	if c.Backfill > 0 && !c.EventStart.IsZero() {
		bad("backfill and event start: set one of them, not both")
	}
	if c.EventStep > 0 && c.EventStart.IsZero() {
		bad("event step: %v set without an event start", c.EventStep)
	}
	if c.MaxRecordBytes < 1024 {
		bad("max record bytes: %d, want at least 1024", c.MaxRecordBytes)
	}
	return errors.Join(errs...)
}
