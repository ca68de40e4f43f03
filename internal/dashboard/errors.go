package dashboard

import "errors"

// Sentinels; test with errors.Is.
var (
	// ErrBadRange: a time range whose end is not after its start, or that cannot be parsed.
	ErrBadRange = errors.New("dashboard: bad time range")
	// ErrUnknownMacro: a panel's SQL holds a macro Expand does not know.
	ErrUnknownMacro = errors.New("dashboard: unknown macro")
	// ErrUnknownPanel: no panel has the id asked for.
	ErrUnknownPanel = errors.New("dashboard: unknown panel")
)
