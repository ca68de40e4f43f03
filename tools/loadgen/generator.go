package loadgen

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/backflowhq/backflow/avro"
)

// Kind says why a record was sent.
type Kind string

const (
	KindOriginal  Kind = "original"  // first record of its (topic, requestId, phase)
	KindDuplicate Kind = "duplicate" // the same bytes sent again
	KindPoison    Kind = "poison"    // bad on purpose; see PoisonKind
)

// Planned is one record to send, with what the oracle needs to know about it.
type Planned struct {
	Topic          string
	Key, Value     []byte
	RequestID      string
	Phase          string // gateway records: REQUEST or RESPONSE
	Kind           Kind
	Poison         PoisonKind // KindPoison only
	SchemaVersion  int        // inference: 1 or 2; gateway: 1; poison: 0
	SchemaID       int        // a stream's record: the registry id it is written with
	Sensitive      bool       // its text contains a dictionary word
	OtherPartition bool       // send to a partition other than the key's
}

// Generator makes the traffic of a Config, one request at a time. Given the same Config and
// RunID it plans the same records. It is not safe for concurrent use.
type Generator struct {
	cfg   Config
	runID string
	rng   *rand.Rand
	model *rand.Zipf
	tnt   *rand.Zipf
	user  *rand.Zipf

	encV1, encV2 *avro.Encoder[avro.InferenceResult]
	encGW        *avro.Encoder[avro.GatewayLog]

	seq        int
	poisonNext int // poison records planned so far
	pending    duplicates
	now        func() time.Time
	started    time.Time // the clock at the first Next, for Backfill
}

type pendingDup struct {
	due int // request sequence number at which to send it
	rec Planned
}

// duplicates are the planned duplicates not sent yet: each falls due 1 to 20 originals after
// the one it copies (Generator and StreamGenerator each keep theirs).
type duplicates []pendingDup

// plan queues a duplicate of p, due after original number seq; crossShare of them are marked
// to be sent to another partition.
func (q *duplicates) plan(rng *rand.Rand, seq int, p Planned, crossShare float64) {
	p.Kind = KindDuplicate
	p.OtherPartition = rng.Float64() < crossShare
	*q = append(*q, pendingDup{due: seq + 1 + rng.IntN(20), rec: p})
}

// take returns and forgets the duplicates due at original number seq, or all of them.
func (q *duplicates) take(seq int, all bool) []Planned {
	var out []Planned
	keep := (*q)[:0]
	for _, d := range *q {
		if all || d.due <= seq {
			out = append(out, d.rec)
		} else {
			keep = append(keep, d)
		}
	}
	*q = keep
	return out
}

// NewGenerator validates cfg. Schemas are registered with reg on first use, under the
// subjects cfg.Subjects names.
func NewGenerator(cfg Config, runID string, reg avro.Registry) (*Generator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if runID == "" {
		return nil, fmt.Errorf("loadgen: run id is empty")
	}
	cfg = cfg.withDefaults()
	g := &Generator{cfg: cfg, runID: runID, now: time.Now}
	g.rng = rand.New(rand.NewPCG(cfg.Seed, 0x6261636b666c6f77))
	g.model = rand.NewZipf(g.rng, cfg.ZipfS, 1, uint64(cfg.Models-1))
	g.tnt = rand.NewZipf(g.rng, cfg.ZipfS, 1, uint64(cfg.Tenants-1))
	g.user = rand.NewZipf(g.rng, cfg.ZipfS, 1, uint64(cfg.UsersPerTenant-1))
	var err error
	infSubject := cfg.Subjects.Subject(cfg.InferenceTopic, avro.InferenceResultSchema)
	if g.encV1, err = avro.NewEncoder[avro.InferenceResult](reg, avro.InferenceResultV1, infSubject); err != nil {
		return nil, err
	}
	if g.encV2, err = avro.NewEncoder[avro.InferenceResult](reg, avro.InferenceResultV2, infSubject); err != nil {
		return nil, err
	}
	if g.encGW, err = avro.NewEncoder[avro.GatewayLog](reg, avro.GatewayLogSchema, cfg.Subjects.Subject(cfg.GatewayTopic, avro.GatewayLogSchema)); err != nil {
		return nil, err
	}
	return g, nil
}

// Next plans the records of one more request: its three source records, any poison due, and
// any duplicates due. Records of one request come in the order a gateway writes them.
// Register registers the schemas Next writes with (gateway logs; inference results v1, v2 or
// both, as Config.V2Share says), so run can wait out a registry outage before sending.
func (g *Generator) Register(ctx context.Context) error {
	if _, err := g.encGW.ID(ctx); err != nil {
		return err
	}
	if g.cfg.V2Share < 1 {
		if _, err := g.encV1.ID(ctx); err != nil {
			return err
		}
	}
	if g.cfg.V2Share > 0 {
		if _, err := g.encV2.ID(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (g *Generator) Next(ctx context.Context) ([]Planned, error) {
	g.seq++
	reqID := fmt.Sprintf("%s-%08d", g.runID, g.seq)
	t0 := g.eventClock().UTC().Truncate(time.Millisecond)
	modelIdx := int(g.model.Uint64())
	model := fmt.Sprintf("model-%02d", modelIdx)
	tenant := fmt.Sprintf("tenant-%03d", g.tnt.Uint64())
	user := fmt.Sprintf("user-%05d", g.user.Uint64())
	prompt, promptSensitive := g.text(8, 24)
	output, outputSensitive := g.text(12, 48)
	latency := int32(math.Min(60000, math.Exp(g.rng.NormFloat64()*0.6+math.Log(400))))
	promptTok := int32(math.Max(1, math.Exp(g.rng.NormFloat64()*0.8+math.Log(180))))
	complTok := int32(math.Max(1, math.Exp(g.rng.NormFloat64()*0.8+math.Log(140))))

	status, httpStatus := "OK", int32(200)
	var errText *string
	switch r := g.rng.Float64(); {
	case r < 0.02:
		status, httpStatus = "ERROR", 500
		s := "upstream model error"
		errText = &s
	case r < 0.03:
		status, httpStatus = "TIMEOUT", 504
		s := "deadline exceeded"
		errText = &s
	}

	inf := avro.InferenceResult{
		RequestID: reqID, Model: model, ModelVersion: fmt.Sprintf("v%d", 1+modelIdx%3),
		EventTime: t0.Add(time.Duration(latency) * time.Millisecond), LatencyMs: latency,
		PromptTokens: promptTok, CompletionTokens: complTok,
		Labels: []avro.Label{
			{Name: "toxicity", Score: float32(g.rng.Float64() * 0.3)},
			{Name: "pii", Score: float32(g.rng.Float64() * 0.2)},
		},
		RiskScore: float32(g.rng.Float64() * 0.5), OutputText: output, Status: status, Error: errText,
	}
	if outputSensitive {
		inf.RiskScore += 0.4
	}
	if g.rng.Float64() < g.cfg.EmbeddingShare {
		inf.Embedding = make([]float32, g.cfg.EmbeddingDim)
		for i := range inf.Embedding {
			inf.Embedding[i] = float32(g.rng.NormFloat64())
		}
	}
	version, enc := 1, g.encV1
	if g.rng.Float64() < g.cfg.V2Share {
		version, enc = 2, g.encV2
		inf.Region = []string{"eu-west", "us-east", "ap-south"}[g.rng.IntN(3)]
		inf.CachedTokens = int32(g.rng.IntN(int(promptTok) + 1))
		reason := "stop"
		inf.FinishReason = &reason
	}
	infBytes, err := enc.Encode(ctx, inf)
	if err != nil {
		return nil, err
	}
	reqLog := avro.GatewayLog{RequestID: reqID, Phase: avro.PhaseRequest, EventTime: t0, TenantID: tenant, UserID: user,
		Route: "/v1/chat/completions", Model: model, PromptText: prompt}
	respLog := reqLog
	respLog.Phase, respLog.PromptText, respLog.ResponseText = avro.PhaseResponse, "", output
	respLog.EventTime = inf.EventTime.Add(time.Duration(2+g.rng.IntN(20)) * time.Millisecond)
	respLog.StatusCode, respLog.LatencyMs = httpStatus, int32(respLog.EventTime.Sub(t0)/time.Millisecond)
	respLog.PromptTokens, respLog.CompletionTokens = promptTok, complTok
	reqBytes, err := g.encGW.Encode(ctx, reqLog)
	if err != nil {
		return nil, err
	}
	respBytes, err := g.encGW.Encode(ctx, respLog)
	if err != nil {
		return nil, err
	}

	key := []byte(reqID)
	out := []Planned{
		{Topic: g.cfg.GatewayTopic, Key: key, Value: reqBytes, RequestID: reqID, Phase: avro.PhaseRequest, Kind: KindOriginal, SchemaVersion: 1, Sensitive: promptSensitive},
		{Topic: g.cfg.InferenceTopic, Key: key, Value: infBytes, RequestID: reqID, Kind: KindOriginal, SchemaVersion: version, Sensitive: outputSensitive},
		{Topic: g.cfg.GatewayTopic, Key: key, Value: respBytes, RequestID: reqID, Phase: avro.PhaseResponse, Kind: KindOriginal, SchemaVersion: 1, Sensitive: outputSensitive},
	}
	for _, p := range out[:3] {
		if g.rng.Float64() < g.cfg.DuplicateRate {
			g.pending.plan(g.rng, g.seq, p, g.cfg.CrossPartitionShare)
		}
	}
	// Poison due so far, computed from the total rather than accumulated, so float error
	// never drops one: after n requests exactly floor(rate*3n) poison records were planned.
	for due := int(math.Floor(g.cfg.PoisonRate*3*float64(g.seq) + 1e-9)); g.poisonNext < due; {
		p, err := g.poison(ctx, inf, reqLog)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return append(out, g.pending.take(g.seq, false)...), nil
}

// eventClock is the clock, set back by the part of Config.Backfill that the run has not yet
// caught up: the whole of it at the first request, none at the last.
func (g *Generator) eventClock() time.Time {
	if !g.cfg.EventStart.IsZero() { // the simulated clock
		return g.cfg.EventStart.Add(time.Duration(g.seq-1) * g.cfg.EventStep)
	}
	now := g.now()
	if g.cfg.Backfill <= 0 {
		return now
	}
	if g.started.IsZero() {
		g.started = now
	}
	done := 0.0
	if g.cfg.Requests > 0 {
		done = float64(g.seq-1) / float64(max(g.cfg.Requests-1, 1))
	}
	if g.cfg.Duration > 0 {
		done = max(done, float64(now.Sub(g.started))/float64(g.cfg.Duration))
	}
	return now.Add(-time.Duration((1 - min(done, 1)) * float64(g.cfg.Backfill)))
}

// Drain returns the duplicates still waiting for their turn; call it once after the last Next.
func (g *Generator) Drain() []Planned { return g.pending.take(g.seq, true) }

// poison makes the next poison record in rotation, from this request's valid records.
func (g *Generator) poison(ctx context.Context, inf avro.InferenceResult, reqLog avro.GatewayLog) (Planned, error) {
	kind := g.cfg.PoisonKinds[g.poisonNext%len(g.cfg.PoisonKinds)]
	g.poisonNext++
	id := fmt.Sprintf("%s-poison-%06d", g.runID, g.poisonNext)
	inf.RequestID, reqLog.RequestID = id, id
	topic := g.cfg.InferenceTopic
	if g.poisonNext%2 == 0 {
		topic = g.cfg.GatewayTopic
	}
	encode := func() ([]byte, error) {
		if topic == g.cfg.GatewayTopic {
			return g.encGW.Encode(ctx, reqLog)
		}
		return g.encV2.Encode(ctx, inf)
	}
	var value []byte
	var err error
	switch kind {
	case PoisonBadMagic:
		if value, err = encode(); err == nil {
			value[0] = byte(1 + g.rng.IntN(255))
		}
	case PoisonShort:
		// 1..4 bytes: never empty, which Kafka clients may read as a tombstone.
		value = []byte{0, 0, 0, 1}[:1+g.rng.IntN(4)]
	case PoisonUnknownSchema:
		if value, err = encode(); err == nil {
			value = append(avro.AppendFrame(nil, UnknownSchemaID), value[avro.HeaderSize:]...)
		}
	case PoisonTruncated:
		if value, err = encode(); err == nil {
			value = value[:avro.HeaderSize+(len(value)-avro.HeaderSize)/2]
		}
	case PoisonGarbage:
		if value, err = encode(); err == nil {
			// A run of 0xff bytes is a varint that never ends: no reading of it succeeds.
			value = append(value[:avro.HeaderSize], []byte(strings.Repeat("\xff", 12+g.rng.IntN(20)))...)
		}
	case PoisonMissingRequestID:
		inf.RequestID, reqLog.RequestID = "", ""
		value, err = encode()
	case PoisonAbsurdTimestamp:
		inf.EventTime, reqLog.EventTime = time.UnixMilli(int64(g.rng.IntN(86400000))).UTC(), time.UnixMilli(int64(g.rng.IntN(86400000))).UTC()
		value, err = encode()
	case PoisonOversized:
		topic = g.cfg.InferenceTopic
		inf.OutputText = strings.Repeat("x", g.cfg.MaxRecordBytes+1024)
		value, err = g.encV2.Encode(ctx, inf)
	}
	if err != nil {
		return Planned{}, err
	}
	return Planned{Topic: topic, Key: []byte(id), Value: value, RequestID: id, Kind: KindPoison, Poison: kind}, nil
}

// text returns min..max words of filler, with a dictionary word planted in SensitiveShare of
// texts, sometimes disguised the way people evade filters (case, spacing, full-width forms).
func (g *Generator) text(minWords, maxWords int) (string, bool) {
	n := minWords + g.rng.IntN(maxWords-minWords+1)
	words := make([]string, n)
	for i := range words {
		words[i] = vocabulary[g.rng.IntN(len(vocabulary))]
	}
	if g.rng.Float64() >= g.cfg.SensitiveShare {
		return strings.Join(words, " "), false
	}
	w := g.cfg.Words[g.rng.IntN(len(g.cfg.Words))]
	switch r := g.rng.Float64(); {
	case r < 0.2:
		w = strings.ToUpper(w)
	case r < 0.35:
		w = strings.Join(strings.Split(w, ""), " ")
	case r < 0.45:
		w = fullWidth(w)
	}
	words[g.rng.IntN(n)] = w
	return strings.Join(words, " "), true
}

// fullWidth maps printable ASCII to its full-width form (U+FF01..U+FF5E).
func fullWidth(s string) string {
	return strings.Map(func(r rune) rune {
		if r > 0x20 && r < 0x7f {
			return r + 0xfee0
		}
		return r
	}, s)
}
