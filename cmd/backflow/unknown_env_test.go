package main

import (
	"context"
	"os"
	"strings"
	"testing"
)

// TestMisspelledVariableIsWarnedAbout: BACKFLOW_KAFKA_BROKER=... (the variable is
// BACKFLOW_KAFKA_BROKERS) was ignored without a word. Every command warns about a BACKFLOW_*
// variable it does not read, naming the nearest one it does; and as the brokers have no
// default, check-config then says they are not set.
func TestMisspelledVariableIsWarnedAbout(t *testing.T) {
	for _, kv := range os.Environ() { // only the variables this test sets
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "BACKFLOW_") {
			t.Setenv(name, "")
			os.Unsetenv(name)
		}
	}
	for k, v := range addressVars {
		t.Setenv(k, v)
	}
	os.Unsetenv("BACKFLOW_KAFKA_BROKERS")
	t.Setenv("BACKFLOW_KAFKA_BROKER", "kafka-1:9092")
	t.Setenv("BACKFLOW_CLICKHOUSE_HTTP_ADDR", "127.0.0.1:18123") // the local stack's own: no warning
	code, out, errOut := runDLQ(t, context.Background(), "check-config")
	if code != exitUsage || !strings.Contains(errOut, "kafka.brokers: not set") || !strings.Contains(errOut, "1 problem(s)") {
		t.Fatalf("exit %d, want 2 with kafka.brokers not set\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	want := "BACKFLOW_KAFKA_BROKER is set but backflow reads no such variable; did you mean BACKFLOW_KAFKA_BROKERS?"
	if !strings.Contains(errOut, want) {
		t.Errorf("stderr does not say %q:\n%s", want, errOut)
	}
	if strings.Contains(errOut, "BACKFLOW_CLICKHOUSE_HTTP_ADDR") || strings.Count(errOut, "warning") != 1 {
		t.Errorf("want exactly the one warning:\n%s", errOut)
	}
}
