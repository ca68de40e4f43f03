package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func runCLI(t *testing.T, args ...string) (code int, stdout string) {
	t.Helper()
	stdout, _, err := execRoot(context.Background(), args...)
	return classify(err), stdout
}

// execRoot runs the CLI in-process with ctx and returns its stdout, stderr and what Execute
// returned.
func execRoot(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	root := newRootCmd()
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err = root.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

func TestHelpListsSubcommands(t *testing.T) {
	code, out := runCLI(t, "--help")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"ping", "version", "Where to start", "backflow run --env-file .stack/env", "backflow help environment", "--env-file", "Exit codes"} {
		if !strings.Contains(out, want) {
			t.Errorf("--help does not mention %q", want)
		}
	}
	if strings.Contains(out, "BACKFLOW_KAFKA_SASL_USERNAME") {
		t.Errorf("--help lists the variables; they belong to 'backflow help environment'")
	}
	code, out = runCLI(t, "help", "environment")
	for _, want := range []string{"BACKFLOW_KAFKA_BROKERS", "BACKFLOW_KAFKA_SASL_PASSWORD *", "none; required where used, e.g. kafka-1:9092,kafka-2:9092", "--env-file"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("help environment: exit %d, does not mention %q", code, want)
		}
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{{"--bogus"}, {"nosuchcommand"}, {"ping", "extra"}, {"ping", "--timeout", "0s"}, {"--env-file", "/nonexistent", "ping"}} {
		if code, _ := runCLI(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}
}

func TestBadConfigExit2(t *testing.T) {
	t.Setenv("BACKFLOW_CLICKHOUSE_ADDR", "no-port")
	if code, _ := runCLI(t, "ping"); code != exitUsage {
		t.Fatalf("exit %d, want %d", code, exitUsage)
	}
}

func TestEnvFileDoesNotOverrideEnvironment(t *testing.T) {
	path := filepath.Join(t.TempDir(), "env")
	if err := os.WriteFile(path, []byte("BACKFLOW_TEST_A=file\nBACKFLOW_TEST_B=file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BACKFLOW_TEST_A", "env")
	t.Setenv("BACKFLOW_TEST_B", "")
	os.Unsetenv("BACKFLOW_TEST_B")
	root := newRootCmd()
	root.AddCommand(&cobra.Command{Use: "noop", RunE: func(*cobra.Command, []string) error { return nil }})
	root.SetArgs([]string{"--env-file", path, "noop"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if a, b := os.Getenv("BACKFLOW_TEST_A"), os.Getenv("BACKFLOW_TEST_B"); a != "env" || b != "file" {
		t.Fatalf("A=%q B=%q, want A from the environment and B from the file", a, b)
	}
}

// TestProfilesWritten: --cpu-profile, --alloc-profile and --block-profile leave gzipped pprof files after a
// command, also one that failed while running; an unwritable path is a usage error.
func TestProfilesWritten(t *testing.T) {
	t.Setenv("BACKFLOW_CLICKHOUSE_ADDR", "no-port") // ping fails in its RunE: bad configuration
	dir := t.TempDir()
	cpu, alloc, block := filepath.Join(dir, "cpu.pprof"), filepath.Join(dir, "alloc.pprof"), filepath.Join(dir, "block.pprof")
	for _, args := range [][]string{{"version"}, {"ping"}} {
		os.Remove(cpu)
		os.Remove(alloc)
		os.Remove(block)
		code := execute(context.Background(), append([]string{"--cpu-profile", cpu, "--alloc-profile", alloc, "--block-profile", block}, args...))
		if want := map[bool]int{true: exitOK, false: exitUsage}[args[0] == "version"]; code != want {
			t.Fatalf("%v: exit %d, want %d", args, code, want)
		}
		for _, p := range []string{cpu, alloc, block} {
			b, err := os.ReadFile(p)
			if err != nil || len(b) < 20 || b[0] != 0x1f || b[1] != 0x8b {
				t.Fatalf("%v: %s is not a gzipped profile (%d bytes, %v)", args, p, len(b), err)
			}
		}
	}
	if code := execute(context.Background(), []string{"--cpu-profile", filepath.Join(dir, "no", "such", "dir"), "version"}); code != exitUsage {
		t.Fatalf("unwritable --cpu-profile: exit %d, want %d", code, exitUsage)
	}
}

// TestHintForARefusedConnection: an error that ends in a refused dial (franz-go's "unable to
// dial", clickhouse-go's ping) named no setting; the command now says what to check.
func TestHintForARefusedConnection(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, Err: errors.New("connect: connection refused")}
	got := hintFor(fmt.Errorf("replay: list groups: %w", dial))
	if !strings.Contains(got, "nothing answered at 127.0.0.1:1") || !strings.Contains(got, "backflow ping") {
		t.Errorf("hint %q", got)
	}
	if h := hintFor(errors.New("group x has no committed offsets")); h != "" {
		t.Errorf("a hint for an error that says enough: %q", h)
	}
}

// TestDurationFlagsTakeOneForm: every duration flag of every command takes backflow's one
// duration form, days and ISO-8601 included, as the config's keys do. Before, the commands'
// own duration flags were pflag's, which refuse 7d: dashboard --range 7d was an error.
func TestDurationFlagsTakeOneForm(t *testing.T) {
	var walk func(c *cobra.Command)
	n := 0
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if f.Value.Type() != "duration" {
				return
			}
			n++
			for in, want := range map[string]string{"7d": "168h0m0s", "1d12h": "36h0m0s", "PT30M": "30m0s", "90s": "1m30s"} {
				if err := f.Value.Set(in); err != nil {
					t.Errorf("%s --%s %s: %v", c.CommandPath(), f.Name, in, err)
				} else if _, ok := f.Value.(durationFlag); ok && f.Value.String() != want {
					t.Errorf("%s --%s %s reads as %s, want %s", c.CommandPath(), f.Name, in, f.Value, want)
				}
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd())
	if n < 10 {
		t.Fatalf("%d duration flags in the tree, want the commands' 10 or more", n)
	}
}
