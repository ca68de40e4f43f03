package chschema

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Capabilities are the newer ClickHouse features the migrations use where the server has them.
// The zero value is what ClickHouse 18.16 (the local stack's) has: none of them. It renders the
// migrations exactly as they were written for 18.16, the fallback every server accepts.
type Capabilities struct {
	// TTL: table TTL clauses (ALTER TABLE ... MODIFY TTL). 18.16 rejects them with a syntax
	// error. Used by the gated migration 0010_ttl.
	TTL bool
	// LowCardinality: LowCardinality(String) columns without an experimental setting (18.16
	// needs allow_experimental_low_cardinality_type). Used for the short, repetitive text
	// columns (model, tenant, verdict, DLQ class, ...).
	LowCardinality bool
	// DateTime64: DateTime64(3) columns, millisecond event times. 18.16 has only DateTime
	// (seconds). Used for event_time, ingest_time, origin_time and error_time.
	DateTime64 bool
	// AddColumnIfNotExists: ALTER TABLE ... ADD COLUMN IF NOT EXISTS. 18.16 lacks it, and
	// Migrate then skips an ADD COLUMN whose column system.columns already lists; where the
	// server has it, the statement says so itself and is safe to run twice anywhere.
	AddColumnIfNotExists bool
}

// Capability names, as migrations name them in a "-- requires:" line.
const (
	CapTTL                  = "ttl"
	CapLowCardinality       = "low_cardinality"
	CapDateTime64           = "datetime64"
	CapAddColumnIfNotExists = "add_column_if_not_exists"
)

// The first server version (major, minor) that has each capability. They are conservative:
// each is a release where the feature is on by default and no longer marked experimental, so a
// server at or above it surely has it.
var capabilitySince = []struct {
	name         string
	major, minor int
}{
	{CapTTL, 19, 6},
	{CapLowCardinality, 20, 1},
	{CapDateTime64, 20, 1},
	{CapAddColumnIfNotExists, 20, 1},
}

// Has reports whether c holds the capability named name (CapTTL, ...); an unknown name is false.
func (c Capabilities) Has(name string) bool {
	switch name {
	case CapTTL:
		return c.TTL
	case CapLowCardinality:
		return c.LowCardinality
	case CapDateTime64:
		return c.DateTime64
	case CapAddColumnIfNotExists:
		return c.AddColumnIfNotExists
	}
	return false
}

// Names lists the capabilities c holds, in a fixed order ("" when none: say "none").
func (c Capabilities) Names() []string {
	var out []string
	for _, s := range capabilitySince {
		if c.Has(s.name) {
			out = append(out, s.name)
		}
	}
	return out
}

// String is "ttl, low_cardinality, datetime64", or "none".
func (c Capabilities) String() string {
	if n := c.Names(); len(n) > 0 {
		return strings.Join(n, ", ")
	}
	return "none"
}

// ServerVersion is a ClickHouse server's version as SELECT version() reports it:
// "18.16.1", "24.8.4.13", "26.9.2.1".
type ServerVersion struct {
	Raw          string
	Major, Minor int
}

// ParseServerVersion reads the leading "major.minor" of a version() string; what follows
// (patch, build, a "-testing" suffix) is kept in Raw only.
func ParseServerVersion(s string) (ServerVersion, error) {
	s = strings.TrimSpace(s)
	parts := strings.SplitN(s, ".", 3)
	if len(parts) < 2 {
		return ServerVersion{}, fmt.Errorf("clickhouse: server version %q is not major.minor[.patch...]", s)
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(strings.TrimFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	if err1 != nil || err2 != nil || major < 0 || minor < 0 {
		return ServerVersion{}, fmt.Errorf("clickhouse: server version %q is not major.minor[.patch...]", s)
	}
	return ServerVersion{Raw: s, Major: major, Minor: minor}, nil
}

// Capabilities derives what a server of version v has.
func (v ServerVersion) Capabilities() Capabilities {
	var c Capabilities
	for _, s := range capabilitySince {
		if v.Major > s.major || (v.Major == s.major && v.Minor >= s.minor) {
			switch s.name {
			case CapTTL:
				c.TTL = true
			case CapLowCardinality:
				c.LowCardinality = true
			case CapDateTime64:
				c.DateTime64 = true
			case CapAddColumnIfNotExists:
				c.AddColumnIfNotExists = true
			}
		}
	}
	return c
}

// Server asks the server for its version (SELECT version()) and derives its capabilities.
func Server(ctx context.Context, conn driver.Conn) (ServerVersion, error) {
	var raw string
	if err := conn.QueryRow(ctx, "SELECT version()").Scan(&raw); err != nil {
		return ServerVersion{}, fmt.Errorf("clickhouse: read server version: %w", err)
	}
	return ParseServerVersion(raw)
}
