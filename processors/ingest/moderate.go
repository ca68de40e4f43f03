package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
