package ops

import (
	"runtime/debug"
	"runtime/metrics"
	"strconv"
)

// The Go runtime's garbage collector settings backflow runs with unless the operator sets the
// runtime's own GOGC or GOMEMLIMIT.
//
// Why: allocation and GC marking were a quarter to a third of each stage's CPU. GOGC=200
// halves how often the collector runs: in one sitting of alternating 300k-record drains
// (docs/benchmarks.md) it took backflow's CPU per record to about 0.82 of GOGC=100's. It also
// lets the heap grow to about three times what is live, so a soft memory limit keeps each
// process's memory bounded: near the limit the collector runs as often as it must (at most
// about half the CPU, by the runtime's own cap), so a process whose live heap approaches it
// (a very large batch_rows, say) trades CPU for memory. Raise GOMEMLIMIT then.
const (
	DefaultGCPercent   = 200
	DefaultMemoryLimit = 256 << 20 // bytes
)

// GCSettings are the collector's settings in effect, and where they came from.
type GCSettings struct {
	GCPercent   int    // the GOGC in effect ("off" is -1)
	MemoryLimit int64  // bytes; math.MaxInt64: none
	Source      string // "defaults", "environment" or "defaults, GOGC from the environment", ...
}

// TuneGC applies DefaultGCPercent and DefaultMemoryLimit where getenv has no GOGC or
// GOMEMLIMIT (which the runtime has already applied), and returns what is in effect.
func TuneGC(getenv func(string) string) GCSettings {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(DefaultGCPercent)
	}
	if getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(DefaultMemoryLimit)
	}
	return ReadGC(getenv)
}

// ReadGC returns the settings in effect, read from runtime/metrics (reading them through
// debug.SetGCPercent would switch the collector off for a moment in a running process), with
// their source told from getenv as TuneGC would have applied them.
func ReadGC(getenv func(string) string) GCSettings {
	m := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}}
	metrics.Read(m)
	s := GCSettings{GCPercent: int(int32(m[0].Value.Uint64())), MemoryLimit: int64(m[1].Value.Uint64())} // GOGC=off reads as -1
	var fromEnv []string
	for _, v := range []string{"GOGC", "GOMEMLIMIT"} {
		if getenv(v) != "" {
			fromEnv = append(fromEnv, v)
		}
	}
	switch len(fromEnv) {
	case 0:
		s.Source = "defaults"
	case 2:
		s.Source = "environment"
	default:
		s.Source = "defaults, " + fromEnv[0] + " from the environment"
	}
	return s
}

// String is the settings as a log line's value: "GOGC=200 GOMEMLIMIT=256MiB (defaults)".
func (s GCSettings) String() string {
	gogc := strconv.Itoa(s.GCPercent)
	if s.GCPercent < 0 {
		gogc = "off"
	}
	limit := "none"
	if s.MemoryLimit < 1<<62 {
		limit = strconv.FormatInt(s.MemoryLimit>>20, 10) + "MiB"
	}
	out := "GOGC=" + gogc + " GOMEMLIMIT=" + limit
	if s.Source != "" {
		out += " (" + s.Source + ")"
	}
	return out
}
