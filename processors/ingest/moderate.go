package ingest

// Moderation: each partition's batcher collects texts into batches by count and time, and the
// moderator calls the sensitive-word service once per batch and turns its reply (or its
// failure) into one outcome per record.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/dlq"
	"github.com/backflowhq/backflow/internal/moderation"
)

// SensitiveWords is the sensitive-word service as ingest uses it; *moderation.Client implements it.
type SensitiveWords interface {
	Check(ctx context.Context, items []moderation.Item) ([]moderation.Result, error)
}

var _ SensitiveWords = (*moderation.Client)(nil)

// DLQ classes of records moderation could not screen.
const (
	ClassModerationMismatch = "moderation_mismatch" // the service's reply never matched the request
	ClassModerationRejected = "moderation_rejected" // the service refused the text (4xx)
)

func init() {
	dlq.RegisterClass(ClassModerationMismatch, "the sensitive-word service's reply never matched the request")
	dlq.RegisterClass(ClassModerationRejected, "the sensitive-word service refused the text (4xx)")
}

// outcome is moderation's word on one item: a result, "unavailable" (PolicyPass let it through
// unscreened), or a DLQ error.
type outcome struct {
	res         *moderation.Result
	unavailable bool
	err         error
}

// moderator calls the service with retries, backoff, a circuit breaker and the outage policy.
type moderator struct {
	cl  SensitiveWords
	br  *gobreaker.CircuitBreaker[[]moderation.Result]
	cfg Config
	log *slog.Logger
	m   *Metrics
}

func newModerator(cl SensitiveWords, cfg Config, log *slog.Logger, m *Metrics) *moderator {
	st := gobreaker.Settings{
		Name:    "moderation",
		Timeout: cfg.BreakerOpen,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			return c.ConsecutiveFailures >= uint32(cfg.BreakerFailures)
		},
		// A request the service rejected (4xx) says nothing about its health.
		IsSuccessful: func(err error) bool { return err == nil || !moderation.IsRetryable(err) },
		OnStateChange: func(_ string, from, to gobreaker.State) {
			log.Warn("moderation circuit breaker", "from", from.String(), "to", to.String())
			m.setBreaker(to)
		},
	}
	return &moderator{cl: cl, br: gobreaker.NewCircuitBreaker[[]moderation.Result](st), cfg: cfg, log: log, m: m}
}

func breakerOpen(err error) bool {
	return errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests)
}

// moderate returns one outcome per item, in order. It returns nil only when ctx ended (the
// processor is stopping; the records stay uncommitted).
func (m *moderator) moderate(ctx context.Context, items []moderation.Item) []outcome {
	b := outagePolicy(m.cfg).Backoff()
	for attempt := 1; ; attempt++ {
		res, err := m.br.Execute(func() ([]moderation.Result, error) {
			start := time.Now()
			defer func() { m.m.moderationCall(time.Since(start)) }()
			return m.cl.Check(ctx, items)
		})
		if err != nil && ctx.Err() == nil {
			m.m.moderationError(moderationErrorClass(err))
		}
		if err == nil {
			out := make([]outcome, len(items))
			for i := range res {
				out[i].res = &res[i]
			}
			return out
		}
		if ctx.Err() != nil {
			return nil
		}
		switch {
		case errors.Is(err, moderation.ErrMismatch) && attempt >= m.cfg.MaxAttempts:
			return m.oneByOne(ctx, items, err, ClassModerationMismatch)
		case !breakerOpen(err) && !moderation.IsRetryable(err):
			return m.oneByOne(ctx, items, err, ClassModerationRejected)
		case m.cfg.Policy == PolicyPass && (breakerOpen(err) || attempt >= m.cfg.MaxAttempts):
			m.log.Warn("moderation unavailable; passing records flagged UNAVAILABLE", "records", len(items), "error", err)
			out := make([]outcome, len(items))
			for i := range out {
				out[i].unavailable = true
			}
			return out
		}
		if attempt == 1 || attempt%10 == 0 {
			m.log.Warn("moderation failed; retrying with backoff", "attempt", attempt, "records", len(items), "error", err)
		}
		if !b.Wait(ctx) {
			return nil
		}
	}
}

// oneByOne isolates the items a bad reply or a rejection is about: each item is checked on
// its own; an item that still fails goes to the DLQ with class, the rest get their verdicts.
func (m *moderator) oneByOne(ctx context.Context, items []moderation.Item, cause error, class string) []outcome {
	if len(items) == 1 {
		return []outcome{{err: dlq.WithClass(class, fmt.Errorf("moderation of %s: %w", items[0].ID, cause))}}
	}
	m.log.Warn("moderation reply unusable for the batch; checking records one by one", "records", len(items), "error", cause)
	out := make([]outcome, 0, len(items))
	for _, it := range items {
		o := m.moderate(ctx, []moderation.Item{it})
		if o == nil {
			return nil
		}
		out = append(out, o...)
	}
	return out
}

// verdict is the enriched record's moderation field for o.
func (o outcome) verdict() avro.Moderation {
	switch {
	case o.unavailable:
		return avro.Moderation{Status: "UNAVAILABLE", Verdict: "ALLOW", Categories: []string{}, Hits: []avro.Hit{}}
	case o.res == nil:
		return avro.Moderation{Status: "SKIPPED", Verdict: "ALLOW", Categories: []string{}, Hits: []avro.Hit{}}
	}
	m := avro.Moderation{Status: "CHECKED", Verdict: o.res.Verdict, RiskScore: o.res.RiskScore,
		Categories: o.res.Categories, Hits: make([]avro.Hit, 0, len(o.res.Hits))}
	if m.Categories == nil {
		m.Categories = []string{}
	}
	for _, h := range o.res.Hits {
		m.Hits = append(m.Hits, avro.Hit{Word: h.Word, Category: h.Category, Start: h.Start, End: h.End})
	}
	return m
}

// moderationErrorClass is the class label of a failed moderation call.
func moderationErrorClass(err error) string {
	switch {
	case breakerOpen(err):
		return "breaker_open"
	case errors.Is(err, moderation.ErrMismatch):
		return "mismatch"
	case !moderation.IsRetryable(err):
		return "rejected"
	}
	return "unavailable"
}

// batcherFor returns the partition's batcher, starting it on first use.
func (p *Processor) batcherFor(partition int32) *batcher {
	p.mu.Lock()
	defer p.mu.Unlock()
	b, ok := p.batchers[partition]
	if !ok {
		b = &batcher{p: p, in: make(chan *job, p.cfg.BatchSize)}
		p.batchers[partition] = b
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			b.run()
		}()
	}
	return b
}

// batcher collects one partition's texts into moderation batches by count and time, and
// moderates one batch at a time.
type batcher struct {
	p  *Processor
	in chan *job
}

func (b *batcher) add(j *job) {
	select {
	case b.in <- j:
	case <-b.p.runCtx.Done():
	}
}

func (b *batcher) run() {
	cfg := b.p.cfg
	var batch []*job
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-b.p.runCtx.Done():
			return
		case j := <-b.in:
			if len(batch) == 0 {
				timer.Reset(cfg.BatchLinger)
			}
			batch = append(batch, j)
			if len(batch) < cfg.BatchSize {
				continue
			}
		case <-timer.C:
		}
		timer.Stop()
		if len(batch) > 0 {
			b.flush(batch)
			batch = nil
		}
	}
}

func (b *batcher) flush(batch []*job) {
	items, slots := dedupeTexts(batch)
	b.p.Stats.ModerationTexts.Add(int64(len(batch)))
	b.p.Stats.ModerationItems.Add(int64(len(items)))
	b.p.metrics.st().Batch(len(items))
	outs := b.p.mod.moderate(b.p.runCtx, items)
	if outs == nil {
		return // stopping
	}
	for i, j := range batch {
		o := outs[slots[i]]
		if o.err != nil {
			if b.p.deadLetter(j.origin, o.err) {
				j.pc.Done()
			}
			continue
		}
		b.p.emit(j, o)
	}
}

// dedupeTexts makes the items of one moderation batch: each distinct text once (a gateway
// RESPONSE and its inference result usually carry the same text), so the service checks it
// once and its verdict goes to every record with that text. slots[i] is the item of batch[i].
// Ids are positions among the items: unique even when a partition revoked and re-assigned to
// this process delivers a record that is still waiting here from before.
func dedupeTexts(batch []*job) (items []moderation.Item, slots []int) {
	items = make([]moderation.Item, 0, len(batch))
	slots = make([]int, len(batch))
	seen := make(map[string]int, len(batch))
	for i, j := range batch {
		k, ok := seen[j.text]
		if !ok {
			k = len(items)
			seen[j.text] = k
			items = append(items, moderation.Item{ID: strconv.Itoa(k), Text: j.text})
		}
		slots[i] = k
	}
	return items, slots
}
