package sensitivewords

import (
	"fmt"
	"log/slog"
	"time"
)

// Defaults of Config.
const (
	DefaultMaxItems        = 1000
	DefaultMaxBodyBytes    = 8 << 20 // 8 MiB
	DefaultMaxHitsPerItem  = 256
	DefaultBlockThreshold  = 0.9
	DefaultReviewThreshold = 0.4
	DefaultReloadInterval  = 2 * time.Second
	// MaxIDBytes bounds an item id.
	MaxIDBytes = 256
)

// Config is what a Server needs. Only DictionaryPath is required.
type Config struct {
	// DictionaryPath is the TSV dictionary file (see ParseDictionary). Required. Watch reloads
	// it when its modification time or size changes; Reload reloads it on demand (SIGHUP).
	DictionaryPath string
	// Token, when not empty, is the bearer token /v1/check and /debug/faults require
	// ("Authorization: Bearer <token>"). /healthz and /metrics stay open for probes and
	// scrapers. Read it from a file or the environment, never from a flag. Default: none.
	Token string
	// MaxItems is the most items one /v1/check request may carry; more is 413 too_many_items.
	// Default: DefaultMaxItems (1000).
	MaxItems int
	// MaxBodyBytes is the largest /v1/check request body; more is 413 body_too_large.
	// Default: DefaultMaxBodyBytes (8 MiB).
	MaxBodyBytes int64
	// MaxHitsPerItem caps the hits listed per item, so that a pathological text cannot blow up
	// the reply; the score and categories still count every hit. Default:
	// DefaultMaxHitsPerItem (256).
	MaxHitsPerItem int
	// BlockThreshold and ReviewThreshold turn a score into a verdict (see Thresholds).
	// Defaults: DefaultBlockThreshold (0.9) and DefaultReviewThreshold (0.4).
	BlockThreshold  float64
	ReviewThreshold float64
	// ReloadInterval is how often Watch looks at the dictionary file's modification time and
	// size. Default: DefaultReloadInterval (2 s).
	ReloadInterval time.Duration
	// TestFaults enables fault injection (Faults, POST /debug/faults) for tests of the
	// pipeline's error handling. Off, no fault can trigger and /debug/faults is 404.
	// Default: false.
	TestFaults bool
	// Faults are the faults injected from the start; only with TestFaults.
	Faults Faults
	// Logger receives start-up, reload and request-error logs; texts are never logged.
	// Default: slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.MaxItems == 0 {
		c.MaxItems = DefaultMaxItems
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxHitsPerItem == 0 {
		c.MaxHitsPerItem = DefaultMaxHitsPerItem
	}
	if c.BlockThreshold == 0 {
		c.BlockThreshold = DefaultBlockThreshold
	}
	if c.ReviewThreshold == 0 {
		c.ReviewThreshold = DefaultReviewThreshold
	}
	if c.ReloadInterval == 0 {
		c.ReloadInterval = DefaultReloadInterval
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports the first bad field by name, with its value.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.DictionaryPath == "":
		return fmt.Errorf("%w: dictionary path: empty, want the TSV dictionary file", ErrConfig)
	case c.MaxItems < 1:
		return fmt.Errorf("%w: max items: %d, want at least 1", ErrConfig, c.MaxItems)
	case c.MaxBodyBytes < 1024:
		return fmt.Errorf("%w: max body bytes: %d, want at least 1024", ErrConfig, c.MaxBodyBytes)
	case c.MaxHitsPerItem < 1:
		return fmt.Errorf("%w: max hits per item: %d, want at least 1", ErrConfig, c.MaxHitsPerItem)
	case !(c.ReviewThreshold > 0 && c.ReviewThreshold <= 1):
		return fmt.Errorf("%w: review threshold: %v, want a number in (0,1]", ErrConfig, c.ReviewThreshold)
	case !(c.BlockThreshold > 0 && c.BlockThreshold <= 1):
		return fmt.Errorf("%w: block threshold: %v, want a number in (0,1]", ErrConfig, c.BlockThreshold)
	case c.ReviewThreshold > c.BlockThreshold:
		return fmt.Errorf("%w: review threshold: %v is above the block threshold %v", ErrConfig, c.ReviewThreshold, c.BlockThreshold)
	case c.ReloadInterval < 0:
		return fmt.Errorf("%w: reload interval: %v, want ≥ 0 (0: the default)", ErrConfig, c.ReloadInterval)
	}
	if !c.TestFaults && c.Faults != (Faults{}) {
		return fmt.Errorf("%w: faults: set without TestFaults (--test-faults): %w", ErrConfig, ErrFaultsDisabled)
	}
	if err := c.Faults.Validate(); err != nil {
		return fmt.Errorf("%w: faults: %w", ErrConfig, err)
	}
	return nil
}
