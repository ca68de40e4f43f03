// Package moderation is the pipeline's client of the sensitive-word service (tools/sensitive-words/cmd/sensitive-words,
// API in tools/sensitive-words): the only door through which backflow reaches it. Start with
// Client.Check and IsRetryable.
//
// Check sends one batch of texts in one HTTP call and returns one Result per item, in the
// batch's order. It trusts a reply only when it answers exactly the items sent, in order
// (else *MismatchError, ErrMismatch), so a verdict is never attached to the wrong record.
// Every error wraps one of the sentinels in errors.go; IsRetryable turns it into the
// pipeline's choice: retry with backoff (outages, overload, credentials, mismatches) or not
// (requests that are wrong on our side).
//
// Positions in hits are rune (Unicode code point) offsets into the text as sent, start
// inclusive, end exclusive.
package moderation
