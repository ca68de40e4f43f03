package ops

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// Log formats.
const (
	LogText = "text"
	LogJSON = "json"
)

// NewLogger returns a slog logger writing format ("text" or "json") to w at level ("debug",
// "info", "warn" or "error"). backflow's log lines carry ids, offsets, counts and error
// messages; never record payloads or secrets.
func NewLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	lv, err := ParseLevel(level)
	if err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "", LogText:
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case LogJSON:
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("ops: log format %q, want text or json", format)
}

// ParseLevel parses a log level name.
func ParseLevel(s string) (slog.Level, error) {
	var lv slog.Level
	if s == "" {
		return slog.LevelInfo, nil
	}
	if err := lv.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("ops: log level %q, want debug, info, warn or error", s)
	}
	return lv, nil
}
