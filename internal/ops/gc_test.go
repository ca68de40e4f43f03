package ops

import (
	"runtime/debug"
	"strings"
	"testing"
)

// TestTuneGC: with neither GOGC nor GOMEMLIMIT set, the defaults apply; a variable the operator
// set is left as the runtime applied it.
func TestTuneGC(t *testing.T) {
	prevGC := debug.SetGCPercent(100)
	prevLimit := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetGCPercent(prevGC); debug.SetMemoryLimit(prevLimit) })

	none := func(string) string { return "" }
	s := TuneGC(none)
	if s.GCPercent != DefaultGCPercent || s.MemoryLimit != DefaultMemoryLimit || s.Source != "defaults" ||
		s.String() != "GOGC=200 GOMEMLIMIT=256MiB (defaults)" {
		t.Fatalf("defaults: %+v (%s)", s, s)
	}

	debug.SetGCPercent(150) // as the runtime would have from GOGC=150
	debug.SetMemoryLimit(1 << 30)
	env := map[string]string{"GOGC": "150"}
	s = TuneGC(func(k string) string { return env[k] })
	if s.GCPercent != 150 || s.MemoryLimit != DefaultMemoryLimit || s.Source != "defaults, GOGC from the environment" {
		t.Fatalf("GOGC set: %+v", s)
	}
	debug.SetMemoryLimit(1 << 30)
	env["GOMEMLIMIT"] = "1GiB"
	s = TuneGC(func(k string) string { return env[k] })
	if s.GCPercent != 150 || s.MemoryLimit != 1<<30 || s.Source != "environment" || s.String() != "GOGC=150 GOMEMLIMIT=1024MiB (environment)" {
		t.Fatalf("both set: %+v (%s)", s, s)
	}
}

// TestReadGCOff: GOGC=off reads as -1 through runtime/metrics, and reading changes nothing.
func TestReadGCOff(t *testing.T) {
	prev := debug.SetGCPercent(-1)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	env := map[string]string{"GOGC": "off", "GOMEMLIMIT": "1GiB"}
	s := ReadGC(func(k string) string { return env[k] })
	if s.GCPercent != -1 || s.Source != "environment" || !strings.HasPrefix(s.String(), "GOGC=off ") {
		t.Fatalf("GOGC off: %+v (%s)", s, s)
	}
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Fatalf("GOGC after ReadGC = %d, want -1 (unchanged)", got)
	}
}
