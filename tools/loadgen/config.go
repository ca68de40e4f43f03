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

// Config describes the traffic. Zero fields take the defaults stated on each. A share or rate
// field (SensitiveShare, DuplicateRate, CrossPartitionShare, PoisonRate, V2Share,
// EmbeddingShare) has one meaning per value: 0 takes the default, None means none at all, and
// a value in (0, 1] is the share itself. Any other negative value is an error.
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

	resolved bool // withDefaults has run: its defaults are not applied again
}

// None, set in a share or rate field of Config or StreamConfig, means none at all (a zero
// field takes the default).
const None = -1.0

// The default shares and rates of Config and StreamConfig; loadgen's flags show the same.
const (
	DefaultSensitiveShare      = 0.05
	DefaultDuplicateRate       = 0.02
	DefaultCrossPartitionShare = 0.25
	DefaultPoisonRate          = 0.01
	DefaultV2Share             = 0.5
	DefaultEmbeddingShare      = 0.3
)

// share resolves a share or rate field once: 0 takes the default d, None becomes 0, and
// anything else is left for Validate to judge.
func share(p *float64, d float64) {
	switch *p {
	case 0:
		*p = d
	case None:
		*p = 0
	}
}

// badShares reports the shares that are not a fraction in [0, 1] after share resolved them.
func badShares(bad func(string, ...any), shares map[string]float64) {
	for name, v := range shares {
		if v < 0 || v > 1 {
			bad("%s: %v, want a fraction in [0, 1] (0: the default; none: loadgen.None)", name, v)
		}
	}
}

// WithDefaults is c with every default applied. It applies them once: a second call returns
// its argument unchanged, so a share resolved to 0 (from None) stays 0.
func (c Config) WithDefaults() Config { return c.withDefaults() }

func (c Config) withDefaults() Config {
	if c.resolved {
		return c
	}
	c.resolved = true
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
	share(&c.SensitiveShare, DefaultSensitiveShare)
	if len(c.Words) == 0 {
		c.Words = DefaultWords
	}
	share(&c.DuplicateRate, DefaultDuplicateRate)
	share(&c.CrossPartitionShare, DefaultCrossPartitionShare)
	share(&c.PoisonRate, DefaultPoisonRate)
	if len(c.PoisonKinds) == 0 {
		c.PoisonKinds = AllPoisonKinds
	}
	share(&c.V2Share, DefaultV2Share)
	share(&c.EmbeddingShare, DefaultEmbeddingShare)
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
	badShares(bad, map[string]float64{"sensitive share": c.SensitiveShare, "duplicate rate": c.DuplicateRate,
		"cross-partition share": c.CrossPartitionShare, "poison rate": c.PoisonRate, "v2 share": c.V2Share, "embedding share": c.EmbeddingShare})
	for _, k := range c.PoisonKinds {
		if _, ok := poisonClass[k]; !ok || k == PoisonRejected {
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
