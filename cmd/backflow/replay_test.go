package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestReplayUsageErrorsExit2: bad flags are usage errors (exit 2), found before any service
// is asked.
func TestReplayUsageErrorsExit2(t *testing.T) {
	t.Setenv("BACKFLOW_KAFKA_BROKERS", "127.0.0.1:1")
	plan := filepath.Join(t.TempDir(), "plan.csv")
	if err := os.WriteFile(plan, []byte("t,0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, args := range [][]string{
		{"replay", "--topic", "t", "--to-earliest"},                                     // no group
		{"replay", "--group", "g", "--topic", "t"},                                      // no spec
		{"replay", "--group", "g", "--topic", "t", "--to-earliest", "--to-latest"},      // two specs
		{"replay", "--group", "g", "--to-earliest"},                                     // no scope
		{"replay", "--group", "g", "--to-earliest", "--all-topics", "--topic", "t"},     // two scopes
		{"replay", "--group", "g", "--topic", "t:x", "--to-earliest"},                   // bad partition
		{"replay", "--group", "g", "--topic", "t", "--by-duration", "-6h"},              // negative
		{"replay", "--group", "g", "--topic", "t", "--by-duration", "P1W"},              // not ISO days/time
		{"replay", "--group", "g", "--topic", "t", "--to-datetime", "yesterday"},        // not RFC 3339
		{"replay", "--group", "g", "--topic", "t", "--to-offset", "-1"},                 // negative offset
		{"replay", "--group", "g", "--from-file", plan},                                 // two columns
		{"replay", "--group", "g", "--from-file", plan + ".missing"},                    // no file
		{"replay", "--group", "g", "--from-file", plan, "--topic", "t", "--all-topics"}, // file and two scopes
		{"replay", "--group", "g", "--to-current", "--to-earliest", "--topic", "t"},     // two specs, one Kafka's newer
		{"replay", "--group", "g", "--all-topics", "--to-earliest", "--new-epoch", "--reset-state"},
		{"replay", "--group", "g", "--all-topics", "--to-earliest", "--execute", "--dry-run"},
		{"offsets", "reset", "--group", "g", "--to-earliest"}, // the alias checks too
		{"replay", "status"}, // no group
		{"replay", "status", "--group", "g", "--interval", "0s"},
	} {
		code, _, errOut := runReplayCLI(t, ctx, args...)
		if code != exitUsage {
			t.Errorf("%v: exit %d, want %d (%s)", args, code, exitUsage, errOut)
		}
	}
}
