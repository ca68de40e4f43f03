package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/backflowhq/backflow/internal/dlq"
)

// runDLQ runs the CLI in-process with ctx and returns the exit code, stdout and stderr.
func runDLQ(t *testing.T, ctx context.Context, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	stdout, stderr, err := execRoot(ctx, args...)
	return classify(err), stdout, stderr
}

func TestDLQUsageErrorsExit2(t *testing.T) {
	// Kafka is never asked: every case fails before a client is built.
	t.Setenv("BACKFLOW_KAFKA_BROKERS", "127.0.0.1:1")
	for _, args := range [][]string{
		{"dlq", "bogus"},
		{"dlq", "list", "extra"},
		{"dlq", "list", "--limit", "-1"},
		{"dlq", "list", "--topic", "no spaces allowed"},
		{"dlq", "list", "--timeout", "0s"},
		{"dlq", "tail", "--limit", "-2"},
		{"dlq", "list", "--class", "bad_magic"},             // a loadgen poison kind, not a class (listed total 0, exit 0)
		{"dlq", "redrive", "--class", "bad_magic"},          // the same for redrive
		{"dlq", "redrive"},                                  // no selector
		{"dlq", "redrive", "--all", "--class", "corrupt"},   // conflicting
		{"dlq", "redrive", "--offsets", "0:1", "--all"},     // conflicting
		{"dlq", "redrive", "--offsets", "0:x"},              // bad position
		{"dlq", "redrive", "--offsets", "-1:4"},             // negative partition
		{"dlq", "redrive", "--offsets", "0:1,"},             // empty element
		{"dlq", "redrive", "--all", "--execute", "extra"},   // positional argument
		{"dlq", "redrive", "--all", "--topic", "bad topic"}, // bad topic
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		code, _, stderr := runDLQ(t, ctx, args...)
		cancel()
		if code != exitUsage {
			t.Errorf("%v: exit %d, want %d (stderr %q)", args, code, exitUsage, stderr)
		}
	}
}

func TestDLQHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"dlq"}},
		{[]string{"dlq", "--help"}, []string{"list", "tail", "redrive", "Examples:"}},
		{[]string{"dlq"}, []string{"list", "tail", "redrive"}},
		{[]string{"dlq", "list", "--help"}, []string{"snapshot", "--class", "--origin-topic", "--limit", "--json", "backflow.dlq", "Examples:"}},
		{[]string{"dlq", "tail", "--help"}, []string{"Ctrl-C", "--json", "Examples:"}},
		{[]string{"dlq", "redrive", "--help"}, []string{"--offsets", "--class", "--all", "--execute", "dry run", "backflow.redrive.count", "Examples:"}},
	} {
		code, out, _ := runDLQ(t, context.Background(), tc.args...)
		if code != exitOK {
			t.Errorf("%v: exit %d", tc.args, code)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v does not mention %q", tc.args, w)
			}
		}
	}
}

func TestParseOffsets(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []dlq.Pos
		wantErr bool
	}{
		{"one", "0:12", []dlq.Pos{{Partition: 0, Offset: 12}}, false},
		{"several with spaces and a duplicate", "0:12, 2:7,0:12", []dlq.Pos{{Partition: 0, Offset: 12}, {Partition: 2, Offset: 7}}, false},
		{"no colon", "12", nil, true},
		{"not a number", "a:1", nil, true},
		{"negative offset", "0:-1", nil, true},
		{"partition too large", "4294967296:1", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseOffsets(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v, wantErr %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for _, p := range tt.want {
				if !got[p] {
					t.Errorf("missing %v in %v", p, got)
				}
			}
		})
	}
}

func TestOneLine(t *testing.T) {
	if got := oneLine("a\nb\tc\rd"); got != "a b c d" {
		t.Errorf("oneLine = %q", got)
	}
}

// TestDLQHelpListsEveryClass: dlq --help named five classes and missed incompatible_schema;
// it lists every class a stage writes, from the registry the classifying packages fill.
func TestDLQHelpListsEveryClass(t *testing.T) {
	code, out, _ := runDLQ(t, context.Background(), "dlq", "--help")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	classes := dlq.Classes()
	if len(classes) < 10 {
		t.Fatalf("%d classes registered, want every class of avro, ingest and the ClickHouse sink: %v", len(classes), classes)
	}
	for _, c := range append(classes, dlq.Class{Name: "incompatible_schema"}) {
		if !strings.Contains(out, "  "+c.Name+" ") {
			t.Errorf("dlq --help does not list class %s", c.Name)
		}
	}
}
