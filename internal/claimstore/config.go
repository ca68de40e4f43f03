package claimstore

import (
	"errors"
	"fmt"
	"time"
)

// Config sizes a Store. Zero fields take the defaults given in their comments.
type Config struct {
	// Window is how long a value is kept after it was written: a segment whose newest record
	// is older than Window is dropped whole. Default 168h (ingest's dedupe window).
	Window time.Duration
	// Segments is how many time segments a window is cut into; each covers Window/Segments
	// (6 h by default). More segments hold less in memory (only the newest is indexed in
	// memory) and cost one more Bloom probe per lookup each. Default 28.
	Segments int
	// MaxActiveKeys seals the newest segment early once its index holds this many keys, which
	// bounds the memory of its index (about 16 bytes a key). Default 4,194,304.
	MaxActiveKeys int
	// DropEvery is how often the store checks for segments to drop. Default 1h.
	DropEvery time.Duration
	// FlushEvery is the longest written values stay in the store's buffer (and the newest
	// changelog offset unwritten) once the table is recovered. Default 1s.
	FlushEvery time.Duration
	// BloomFalsePositive is the false-positive rate of each sealed segment's Bloom filter
	// (9.6 bits a key at 1 %; blocked, it passes about 1.2 %: filter.go). Default 0.01.
	BloomFalsePositive float64
	// Clock is the store's time: a value written is as of Clock(), and a segment expires by it.
	// Default time.Now.
	Clock func() time.Time
}

func (c Config) withDefaults() Config {
	if c.Window == 0 {
		c.Window = 7 * 24 * time.Hour
	}
	if c.Segments == 0 {
		c.Segments = 28
	}
	if c.MaxActiveKeys == 0 {
		c.MaxActiveKeys = 1 << 22
	}
	if c.DropEvery == 0 {
		c.DropEvery = time.Hour
	}
	if c.FlushEvery == 0 {
		c.FlushEvery = time.Second
	}
	if c.BloomFalsePositive == 0 {
		c.BloomFalsePositive = 0.01
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	return c
}

// Validate reports every bad field.
func (c Config) Validate() error {
	var errs []error
	if c.Window < 0 {
		errs = append(errs, fmt.Errorf("claimstore: window %v is negative", c.Window))
	}
	if c.Segments < 0 || c.Segments > 10000 {
		errs = append(errs, fmt.Errorf("claimstore: segments %d is outside 1..10000", c.Segments))
	}
	if c.MaxActiveKeys < 0 || c.MaxActiveKeys > 1<<30 {
		errs = append(errs, fmt.Errorf("claimstore: max active keys %d is outside 1..2^30", c.MaxActiveKeys))
	}
	if c.DropEvery < 0 || c.FlushEvery < 0 {
		errs = append(errs, fmt.Errorf("claimstore: drop every %v or flush every %v is negative", c.DropEvery, c.FlushEvery))
	}
	if c.BloomFalsePositive < 0 || c.BloomFalsePositive >= 1 {
		errs = append(errs, fmt.Errorf("claimstore: bloom false-positive rate %v is outside (0, 1)", c.BloomFalsePositive))
	}
	return errors.Join(errs...)
}

// span is the time one segment covers.
func (c Config) span() time.Duration { return c.Window / time.Duration(c.Segments) }
