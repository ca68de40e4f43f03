package replay

import (
	"errors"
	"fmt"
	"strings"
)

// ErrGroupLive: the group has live members; offsets of a live group cannot be moved (its
// members would overwrite them, and the broker rejects the commit). Returned as *LiveError.
var ErrGroupLive = errors.New("replay: group has live members")

// ErrUnknownGroup: the group does not exist (no members, no committed offsets) and the request
// did not say Create.
var ErrUnknownGroup = errors.New("replay: group does not exist")

// ErrNoCommittedOffset: --shift-by needs a committed offset on every partition in scope.
var ErrNoCommittedOffset = errors.New("replay: no committed offset to shift from")

// ErrUnknownPartition: a topic or partition in scope does not exist.
var ErrUnknownPartition = errors.New("replay: unknown topic or partition")

// ErrBadRequest: the request itself is wrong (no scope, two specs, a malformed plan file...).
var ErrBadRequest = errors.New("replay: bad request")

// ErrNotRecorded: the offsets moved but the replay could not be recorded everywhere.
var ErrNotRecorded = errors.New("replay: executed but not recorded")

// Member is a live member of a group.
type Member struct {
	ID       string // member id the coordinator assigned
	ClientID string
	Host     string
	Instance string // static membership id, if any
}

func (m Member) String() string {
	s := m.ClientID + " (" + m.ID
	if m.Instance != "" {
		s += ", instance " + m.Instance
	}
	return s + ", host " + m.Host + ")"
}

// LiveError is ErrGroupLive with the group's state and members.
type LiveError struct {
	Group   string
	State   string
	Members []Member
}

func (e *LiveError) Error() string {
	names := make([]string, len(e.Members))
	for i, m := range e.Members {
		names[i] = m.String()
	}
	return fmt.Sprintf("replay: group %s is %s with %d live member(s): %s; stop them first (offsets of a live group cannot be moved)",
		e.Group, e.State, len(e.Members), strings.Join(names, "; "))
}

func (e *LiveError) Unwrap() error { return ErrGroupLive }

func badRequest(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrBadRequest, fmt.Sprintf(format, a...))
}
