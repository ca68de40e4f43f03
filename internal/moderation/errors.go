package moderation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/backflowhq/backflow/internal/secure"
)

// Every error Check returns wraps exactly one of these sentinels (or a context error when
// the caller's context ended); IsRetryable decides from them.
var (
	// ErrUnavailable: the service could not be used right now: a network error, no answer
	// within Config.Timeout, HTTP 5xx, 429, 408, or 404 (a wrong URL or a service not
	// deployed at it). Retry with backoff; never dead-letter records for it.
	ErrUnavailable = errors.New("moderation: sensitive-word service unavailable")
	// ErrUnauthorized: the service refused our credentials (HTTP 401 or 403). An operator
	// fixes the token; records wait and are never dead-lettered for it.
	ErrUnauthorized = errors.New("moderation: sensitive-word service refused our credentials")
	// ErrRejected: the service refused the request as malformed or too large (400, 413, and
	// the other 4xx). That is a bug on our side (see IsRetryable); the *StatusError carries
	// the service's code, e.g. "too_many_items", "body_too_large", "bad_request".
	ErrRejected = errors.New("moderation: sensitive-word service rejected the request")
	// ErrMismatch: the reply does not answer the request item for item: a different count,
	// or different ids, or the same ids in another order. The *MismatchError names the ids.
	// No result of such a reply is used: a verdict must never be attached to the wrong record.
	ErrMismatch = errors.New("moderation: reply does not match the request items")
	// ErrBadReply: a 200 reply that is not the documented JSON (unparsable, too large, an
	// unknown verdict, a score outside [0,1], a bad hit position).
	ErrBadReply = errors.New("moderation: malformed reply from the sensitive-word service")
	// ErrTooManyItems: Check was given more than Config.MaxItems items; nothing was sent. The
	// caller must split its batch.
	ErrTooManyItems = errors.New("moderation: too many items for one request")
	// ErrInvalidItem: an item has an empty id or the same id as another item of the batch;
	// nothing was sent. Ids are how replies are matched to records.
	ErrInvalidItem = errors.New("moderation: invalid item")
)

// StatusError is a non-200 answer of the service. It wraps ErrUnavailable, ErrUnauthorized or
// ErrRejected according to StatusCode (see IsRetryable).
type StatusError struct {
	StatusCode int    // HTTP status
	Code       string // the service's snake_case code ("too_many_items"), "" if the body had none
	Message    string // the service's message, or the start of a non-JSON body
	// RetryAfter is the service's Retry-After (429, 503), 0 when absent.
	RetryAfter time.Duration
}

func (e *StatusError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v: HTTP %d", e.Unwrap(), e.StatusCode)
	if e.Code != "" {
		fmt.Fprintf(&b, " %s", e.Code)
	}
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	return b.String()
}

// Unwrap returns the sentinel of the status class.
func (e *StatusError) Unwrap() error { return classifyStatus(e.StatusCode) }

// MismatchError says how a reply failed to match the request. It wraps ErrMismatch.
type MismatchError struct {
	Sent, Received int // item counts
	// Missing are ids sent but absent from the reply.
	Missing []string
	// Unexpected are ids in the reply that were not sent, or that it repeats.
	Unexpected []string
	// Misplaced are ids sent and answered, but at another position than they were sent.
	Misplaced []string
}

func (e *MismatchError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v: sent %d items, received %d", ErrMismatch, e.Sent, e.Received)
	for _, l := range []struct {
		name string
		ids  []string
	}{{"missing", e.Missing}, {"unexpected", e.Unexpected}, {"misplaced", e.Misplaced}} {
		if len(l.ids) > 0 {
			fmt.Fprintf(&b, "; %s %s", l.name, listIDs(l.ids))
		}
	}
	return b.String()
}

func (e *MismatchError) Unwrap() error { return ErrMismatch }

// Affected returns the sent ids whose answer is missing or was misplaced, in request order of
// first appearance (Missing, then Misplaced): after its retries, a caller dead-letters or
// flags only these records. Every other record of the batch was answered at its own position.
func (e *MismatchError) Affected() []string {
	return slices.Concat(e.Missing, e.Misplaced)
}

// listIDs prints at most 10 ids, so one bad reply of 1000 items does not make a 1000-id error.
func listIDs(ids []string) string {
	const show = 10
	if len(ids) <= show {
		return fmt.Sprintf("%q", ids)
	}
	return fmt.Sprintf("%q and %d more", ids[:show], len(ids)-show)
}

// IsRetryable reports whether err, returned by Client.Check, is worth retrying: true means the
// records are not at fault and must wait (retry with backoff, never dead-letter), false means
// the request itself is wrong and sending it again cannot help. This is the one place that
// decides; the reason for each case:
func IsRetryable(err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, ErrUnavailable):
		// Network errors, timeouts, 5xx, 429, 408: an outage or overload that passes. 404: a
		// wrong URL or a service not deployed yet; treating it as permanent would dead-letter
		// the whole stream for a typo, so it waits for an operator like an outage.
		return true
	case errors.Is(err, ErrUnauthorized):
		// 401/403: the token is missing, wrong or rotated. An operator fixes credentials; the
		// records are fine and must never go to the DLQ for it. This is the mid-run rule: at
		// start-up a stage asks the service once and stops on IsAuthError instead, so a wrong
		// token fails fast rather than holding up the stream without a word.
		return true
	case errors.Is(err, ErrMismatch):
		// Wrong item count or order: a fault of the service (or of something between us). A
		// retry usually gets a correct reply; after a few, the caller decides, and dead-letters
		// or flags only MismatchError.Affected, never the whole batch.
		return true
	case errors.Is(err, ErrBadReply):
		// A 200 whose body is not the contract: a broken service, proxy or version skew, not
		// a property of the records.
		return true
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The caller's context ended (shutdown, rebalance): the records were not checked and
		// must be checked later, by whoever owns them then.
		return true
	case errors.Is(err, ErrRejected), errors.Is(err, ErrTooManyItems), errors.Is(err, ErrInvalidItem):
		// 400 (malformed request, duplicate or overlong id), 413 too_many_items, 415, and the
		// other 4xx, and what Check refuses before sending: the request we built is wrong, a
		// bug on our side (batch larger than the service's --max-items, ids not unique or
		// longer than 256 bytes). The same request fails the same way again, so retrying
		// only stalls the stream: fix the caller, split the batch. One exception is the
		// caller's to handle: 413 body_too_large for a batch of a single item means that one
		// text exceeds the service's --max-body-bytes, a property of that record.
		return false
	default:
		// Not an error of Check.
		return false
	}
}

// IsAuthError reports whether err means the service refused our token (401/403) or the TLS
// handshake failed (untrusted certificate, a plaintext port). See IsRetryable for what the
// pipeline does with it mid-run, and pipelines.Preflight for start-up.
func IsAuthError(err error) bool {
	return errors.Is(err, ErrUnauthorized) || secure.IsTLSError(err)
}

// classifyStatus maps a non-200 HTTP status to its sentinel (see IsRetryable).
func classifyStatus(status int) error {
	switch {
	case status >= 500, status == 429, status == 408, status == 404:
		return ErrUnavailable
	case status == 401, status == 403:
		return ErrUnauthorized
	case status >= 400:
		return ErrRejected
	default: // 1xx, 2xx other than 200, 3xx: nothing this contract knows
		return ErrBadReply
	}
}
