package stackclean

import (
	"strings"
	"testing"
	"time"
)

func TestIDStamp(t *testing.T) {
	before := time.Now()
	a, b := ID("run"), ID("run")
	if a == b || !strings.HasPrefix(a, "run") {
		t.Fatalf("IDs %q and %q, want two different ones starting with run", a, b)
	}
	for _, name := range []string{"inf-" + a, "it_" + a, "\x01\x02tenant-007p" + a, a + "-loop"} {
		at, ok := Stamp(name)
		if !ok || at.Before(before.Add(-time.Second)) || at.After(time.Now()) {
			t.Errorf("Stamp(%q) = %v, %v; want the time the ID was made", name, at, ok)
		}
	}
	for _, name := range []string{"backflow.enriched", "model-inference-result", "backflow-ingest", "default",
		"tenant-0001", "x12345678901234567890y", "x123456789012345678y"} { // 20 and 18 digits
		if at, ok := Stamp(name); ok {
			t.Errorf("Stamp(%q) = %v: a name without an ID has no stamp", name, at)
		}
	}
}

func TestMatch(t *testing.T) {
	a := ID("fe")
	time.Sleep(time.Millisecond)
	mid := time.Now()
	time.Sleep(time.Millisecond)
	b := ID("fe")
	cases := []struct {
		m    Match
		name string
		want bool
	}{
		{Match{}, "inf-" + a, true},
		{Match{}, "backflow.dlq", false},
		{Match{Contains: a}, "inf-" + a, true},
		{Match{Contains: a}, "inf-" + b, false},
		{Match{Since: mid}, "inf-" + a, false},
		{Match{Since: mid}, "inf-" + b, true},
		{Match{Until: mid}, "inf-" + a, true},
		{Match{Until: mid}, "inf-" + b, false},
	}
	for _, c := range cases {
		if got := c.m.OK(c.name); got != c.want {
			t.Errorf("%+v.OK(%q) = %v, want %v", c.m, c.name, got, c.want)
		}
	}
}

func TestIsBenchmark(t *testing.T) {
	for name, want := range map[string]bool{
		ID(BenchmarkTag + "dash_10m_new_"): true,
		ID("it_pt"):                        false,
		ID("inf-run"):                      false,
		"backflow.enriched":                false,
	} {
		if got := IsBenchmark(name); got != want {
			t.Errorf("IsBenchmark(%q) = %v, want %v", name, got, want)
		}
	}
}
