package loadgen

import (
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/backflowhq/backflow/avro"
)

// StreamConfig is the traffic of a declared stream (pipelines' streams list): records of its
// schema (Avro, Protobuf or JSON Schema) with random valid values for each type, duplicates
// and poison, and the same manifest as Run writes. Zero fields take the defaults stated on each.
type StreamConfig struct {
	// Topic is the stream's topic. Required.
	Topic string
	// Subject is the registry subject the schema is registered under. Default: <topic>-value.
	Subject string
	// Schema is the schema the values are written with, as written (Avro or JSON Schema JSON,
	// Protobuf .proto text): it is registered as is, its fields' defaults included. Required.
	Schema string
	// SchemaType is the schema's type, registered with it: sr.TypeAvro (the zero value),
	// sr.TypeProtobuf (records are Message, framed with its message indexes) or sr.TypeJSON.
	SchemaType sr.SchemaType
	// Message is, for a Protobuf schema, the message records are written as: its full name or
	// its name in the file's package (the stream's message). Empty: the file's first.
	Message string
	// ImportPaths are the directories a Protobuf schema's imports are read from (the standard
	// google/protobuf ones are built in). Each import is registered first, under the subject
	// ReferencePrefix + its import path, and referenced by the schema under that path.
	ImportPaths     []string
	ReferencePrefix string
	// KeyField is the field path (dot-separated) of the stream's dedupe key: each original record gets a
	// value of its own there (<run id>-<sequence> for a string, a UUID made from it for a uuid),
	// which is also its Kafka key and its manifest RequestID. Empty: records are keyed by their sequence number.
	KeyField string
	// TimeField is the field path of the event time (an Avro timestamp, a Protobuf
	// google.protobuf.Timestamp, a JSON Schema string of format date-time): record n is dated
	// EventStart + (n-1)·EventStep. Default EventStart: the clock at the start, truncated to
	// the second; EventStep: 1s.
	TimeField  string
	EventStart time.Time
	EventStep  time.Duration
	// Records is how many original records to send. Default: 1000.
	Records int
	// Rate is records per second; 0 sends flat out.
	Rate float64
	// DuplicateRate, CrossPartitionShare and PoisonRate mean what they mean in Config (per
	// original record; 0 takes the default, None means none). Defaults: 0.02, 0.25, 0.01.
	DuplicateRate       float64
	CrossPartitionShare float64
	PoisonRate          float64
	// PoisonKinds restricts the kinds of poison. Default: StreamPoisonKinds, and for a JSON
	// Schema stream PoisonRejected too.
	PoisonKinds []PoisonKind
	// SensitiveShare is the share of string values with a word of Words planted (0: the
	// default, None: none). Defaults: 0.05 and DefaultWords.
	SensitiveShare float64
	Words          []string
	// MaxRecordBytes is the stream's size limit; oversized poison is just above it. Default:
	// avro.DefaultMaxRecordBytes.
	MaxRecordBytes int
	// Seed makes the traffic reproducible. Default: 1.
	Seed uint64

	resolved bool // withDefaults has run: its defaults are not applied again
}

// StreamPoisonKinds are the poison kinds of a declared stream: everything that is wrong with
// a record whatever its schema (the built-in streams' missing request id and absurd timestamp
// are rules of theirs).
var StreamPoisonKinds = []PoisonKind{PoisonBadMagic, PoisonShort, PoisonUnknownSchema, PoisonTruncated, PoisonGarbage, PoisonOversized}

// jsonPoisonKinds are a JSON Schema stream's: StreamPoisonKinds and a value its schema rejects.
var jsonPoisonKinds = append(slices.Clone(StreamPoisonKinds), PoisonRejected)

func (c StreamConfig) withDefaults() StreamConfig {
	if c.resolved {
		return c
	}
	c.resolved = true
	if c.Subject == "" {
		c.Subject = c.Topic + "-value"
	}
	if c.EventStart.IsZero() {
		c.EventStart = time.Now().UTC().Truncate(time.Second)
	}
	if c.EventStep == 0 {
		c.EventStep = time.Second
	}
	if c.Records == 0 {
		c.Records = 1000
	}
	share(&c.DuplicateRate, DefaultDuplicateRate)
	share(&c.CrossPartitionShare, DefaultCrossPartitionShare)
	share(&c.PoisonRate, DefaultPoisonRate)
	share(&c.SensitiveShare, DefaultSensitiveShare)
	if len(c.Words) == 0 {
		c.Words = DefaultWords
	}
	if len(c.PoisonKinds) == 0 {
		c.PoisonKinds = StreamPoisonKinds
		if c.SchemaType == sr.TypeJSON {
			c.PoisonKinds = jsonPoisonKinds
		}
	}
	if c.MaxRecordBytes == 0 {
		c.MaxRecordBytes = avro.DefaultMaxRecordBytes
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	return c
}

// Validate reports every bad field at once, by name.
func (c StreamConfig) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("loadgen: stream: "+format, a...)) }
	if c.Topic == "" {
		bad("topic: empty")
	}
	if c.Records < 0 {
		bad("records: %d is negative", c.Records)
	}
	badShares(bad, map[string]float64{"duplicate rate": c.DuplicateRate, "cross-partition share": c.CrossPartitionShare, "poison rate": c.PoisonRate,
		"sensitive share": c.SensitiveShare})
	for _, k := range c.PoisonKinds {
		switch _, known := poisonClass[k]; {
		case k == PoisonMissingRequestID || k == PoisonAbsurdTimestamp:
			bad("poison kind %q is the built-in streams' only (stream kinds: %v)", k, StreamPoisonKinds)
		case k == PoisonRejected && c.SchemaType != sr.TypeJSON:
			bad("poison kind %q is a JSON Schema stream's only (a value its schema rejects)", k)
		case !known:
			bad("poison kind %q is unknown (stream kinds: %v)", k, StreamPoisonKinds)
		}
	}
	if _, err := newStreamFormat(c, nil, nil); err != nil {
		bad("%v", err)
	}
	return errors.Join(errs...)
}

// StreamGenerator makes the traffic of a StreamConfig, one original record at a time.
// Deterministic for a seed and run id; not safe for concurrent use.
type StreamGenerator struct {
	cfg        StreamConfig
	runID      string
	rng        *rand.Rand
	format     streamFormat
	id         int // the schema's registry id, once registered
	seq        int
	poisonNext int
	pending    duplicates
}

// streamFormat is what differs between schema types: registering the schema, writing a
// record, and the poison that depends on the body's encoding.
type streamFormat interface {
	// register registers the schema (and what it references) and returns its id.
	register(ctx context.Context) (int, error)
	// record is original record n framed with schema id: random valid values, its key
	// (returned) and event time set.
	record(ctx context.Context, id, n int) (value []byte, key string, err error)
	// truncate cuts a valid value so that its body no longer parses.
	truncate(valid []byte) []byte
	// reject is a value that parses but its schema rejects (JSON Schema only).
	reject(valid []byte) []byte
}

// newStreamFormat is cfg's format, its schema checked; g makes its values and reg registers
// its schema (both nil: only check).
func newStreamFormat(cfg StreamConfig, g *StreamGenerator, reg avro.Registry) (streamFormat, error) {
	switch cfg.SchemaType {
	case sr.TypeAvro:
		return newAvroFormat(cfg, g, reg)
	case sr.TypeProtobuf:
		return newProtoFormat(cfg, g, reg)
	case sr.TypeJSON:
		return newJSONFormat(cfg, g, reg)
	}
	return nil, fmt.Errorf("schema type %v: want AVRO, PROTOBUF or JSON", cfg.SchemaType)
}

// NewStreamGenerator validates cfg; the schema is registered with reg on first use.
func NewStreamGenerator(cfg StreamConfig, runID string, reg avro.Registry) (*StreamGenerator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if runID == "" {
		return nil, errors.New("loadgen: run id is empty")
	}
	cfg = cfg.withDefaults()
	g := &StreamGenerator{cfg: cfg, runID: runID, rng: rand.New(rand.NewPCG(cfg.Seed, 0x73747265616d))}
	f, err := newStreamFormat(cfg, g, reg)
	if err != nil {
		return nil, fmt.Errorf("loadgen: stream: %w", err)
	}
	g.format = f
	return g, nil
}

// key is record n's dedupe key: <run id>-<sequence>.
func (g *StreamGenerator) key(n int) string { return fmt.Sprintf("%s-%08d", g.runID, n) }

// eventTime is record n's event time.
func (g *StreamGenerator) eventTime(n int) time.Time {
	return g.cfg.EventStart.Add(time.Duration(n-1) * g.cfg.EventStep)
}

// nameUUID is a UUID made from name (its SHA-1, version 5 layout): a unique key for a uuid
// field, the same for the same run id and sequence.
func nameUUID(name string) string {
	h := sha1.Sum([]byte(name))
	h[6] = h[6]&0x0f | 0x50
	h[8] = h[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

func setPath(v map[string]any, path string, x any) {
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		v = v[p].(map[string]any)
	}
	v[parts[len(parts)-1]] = x
}

// Register registers the stream's schema, so run can wait out a registry outage before sending.
func (g *StreamGenerator) Register(ctx context.Context) error {
	if g.id != 0 {
		return nil
	}
	id, err := g.format.register(ctx)
	if err != nil {
		return err
	}
	g.id = id
	return nil
}

// Next plans one more original record, any poison due, and any duplicates due.
func (g *StreamGenerator) Next(ctx context.Context) ([]Planned, error) {
	if err := g.Register(ctx); err != nil {
		return nil, err
	}
	g.seq++
	value, key, err := g.format.record(ctx, g.id, g.seq)
	if err != nil {
		return nil, err
	}
	p := Planned{Topic: g.cfg.Topic, Key: []byte(key), Value: value, RequestID: key, Kind: KindOriginal, SchemaID: g.id}
	out := []Planned{p}
	if g.rng.Float64() < g.cfg.DuplicateRate {
		g.pending.plan(g.rng, g.seq, p, g.cfg.CrossPartitionShare)
	}
	for due := int(math.Floor(g.cfg.PoisonRate*float64(g.seq) + 1e-9)); g.poisonNext < due; {
		out = append(out, g.poison(value))
	}
	return append(out, g.pending.take(g.seq, false)...), nil
}

// Drain returns the duplicates still waiting for their turn; call it once after the last Next.
func (g *StreamGenerator) Drain() []Planned { return g.pending.take(g.seq, true) }

// poison makes the next poison record in rotation from a valid value.
func (g *StreamGenerator) poison(valid []byte) Planned {
	kind := g.cfg.PoisonKinds[g.poisonNext%len(g.cfg.PoisonKinds)]
	g.poisonNext++
	id := fmt.Sprintf("%s-poison-%06d", g.runID, g.poisonNext)
	value := append([]byte(nil), valid...)
	switch kind {
	case PoisonBadMagic:
		value[0] = byte(1 + g.rng.IntN(255))
	case PoisonShort:
		value = []byte{0, 0, 0, 1}[:1+g.rng.IntN(4)]
	case PoisonUnknownSchema:
		value = append(avro.AppendFrame(nil, UnknownSchemaID), value[avro.HeaderSize:]...)
	case PoisonTruncated:
		value = g.format.truncate(value)
	case PoisonGarbage:
		// A run of 0xff bytes is a varint that never ends (Avro, Protobuf's message indexes)
		// and not JSON: no reading of it succeeds.
		value = append(value[:avro.HeaderSize], []byte(strings.Repeat("\xff", 12+g.rng.IntN(20)))...)
	case PoisonOversized:
		value = append(value, make([]byte, g.cfg.MaxRecordBytes)...)
	case PoisonRejected:
		value = g.format.reject(value)
	}
	return Planned{Topic: g.cfg.Topic, Key: []byte(id), Value: value, RequestID: id, Kind: KindPoison, Poison: kind}
}

// text is a random string of vocabulary words, with a dictionary word planted at the
// sensitive share.
func (g *StreamGenerator) text() string {
	n := 1 + g.rng.IntN(4)
	words := make([]string, n)
	for i := range words {
		words[i] = vocabulary[g.rng.IntN(len(vocabulary))]
	}
	if g.rng.Float64() < g.cfg.SensitiveShare {
		words[g.rng.IntN(n)] = g.cfg.Words[g.rng.IntN(len(g.cfg.Words))]
	}
	return strings.Join(words, " ")
}

// RunStream sends cfg's traffic with cl (built with ProducerOpts) and writes the manifest as
// Run does: exactly the acknowledged records, each original's RequestID its key.
func RunStream(ctx context.Context, cfg StreamConfig, cl *kgo.Client, reg avro.Registry, opts Options) (Stats, error) {
	if err := cfg.Validate(); err != nil {
		return Stats{}, err
	}
	cfg = cfg.withDefaults()
	gen, err := NewStreamGenerator(cfg, opts.RunID, reg)
	if err != nil {
		return Stats{}, err
	}
	return run(ctx, gen, limits{requests: cfg.Records, rate: cfg.Rate}, cl, opts, Header{RunID: opts.RunID, Seed: cfg.Seed, Topic: cfg.Topic}, cfg.Topic)
}
