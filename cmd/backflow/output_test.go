package main

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
)

// TestColumnsHaveOneName: the same field has the same key (and so the same table header) in
// every row type. Before, COMMITTED, CURRENT-OFFSET and CURRENT named one thing in three
// commands.
func TestColumnsHaveOneName(t *testing.T) {
	keyOf := map[string]string{} // Go field name → json key
	for _, row := range []any{partitionRow{}, topicRow{}, memberRow{}, groupDoc{}, planRow{}, planDoc{}, pingRow{}, versionDoc{},
		statusDoc{}, progressDoc{}} {
		rt := reflect.TypeOf(row)
		for i := range rt.NumField() {
			f := rt.Field(i)
			if f.Anonymous {
				continue
			}
			key := columnKey(f)
			if y, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); y != key {
				t.Errorf("%s.%s: json key %q, yaml key %q", rt.Name(), f.Name, key, y)
			}
			if prev, ok := keyOf[f.Name]; ok && prev != key {
				t.Errorf("%s.%s is %q here and %q elsewhere", rt.Name(), f.Name, key, prev)
			}
			keyOf[f.Name] = key
		}
	}
	for _, h := range []string{"COMMITTED", "CURRENT", "LOG-END", "TARGET", "CONSUMER"} {
		for name, key := range keyOf {
			if columnHeader(reflect.StructField{Tag: reflect.StructTag(`json:"` + key + `"`)}) == h {
				t.Errorf("%s is still a header (field %s)", h, name)
			}
		}
	}
}

func TestWriteTable(t *testing.T) {
	n := rereadNum(-4)
	rows := []planRow{{Topic: "t", Partition: 1, CurrentOffset: -1, NewOffset: 7, Reread: &n, LagAfter: 3}, {Topic: "u", CurrentOffset: 5}}
	var b strings.Builder
	if err := writeTable(&b, rows, "note"); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := [][]string{
		{"TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET", "RE-READ", "LAG-AFTER", "CURRENT-TIME", "NEW-TIME"},
		{"t", "1", "-", "7", "skip", "4", "3", "-", "-"},
		{"u", "0", "5", "0", "-", "0", "-", "-"},
	}
	if len(lines) != len(want) {
		t.Fatalf("table:\n%s", b.String())
	}
	for i, w := range want {
		if got := strings.Fields(lines[i]); !reflect.DeepEqual(got, w) {
			t.Errorf("line %d = %q, want %q", i, got, w)
		}
	}
}

// TestPingShowsAnAddressNotSet: with no address given, ping asks nothing, shows each system as
// NOT-SET and exits 2, naming the variables.
func TestPingShowsAnAddressNotSet(t *testing.T) {
	for k := range addressVars {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	t.Setenv("BACKFLOW_KAFKA_BROKERS", "127.0.0.1:1") // nothing listens: DOWN
	code, out, errOut := runDLQ(t, context.Background(), "ping", "--timeout", "3s", "-o", "json")
	if code != exitUsage {
		t.Fatalf("exit %d, want 2\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	var rows []pingRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	states := map[string]string{}
	for _, r := range rows {
		states[r.System] = r.State
		if r.State == "NOT-SET" && (r.TookMS != 0 || !strings.Contains(r.Detail, "--env-file .stack/env")) {
			t.Errorf("%s: %+v", r.System, r)
		}
	}
	want := map[string]string{"kafka": "DOWN", "registry": "NOT-SET", "clickhouse": "NOT-SET", "redis": "NOT-SET", "sensitive-words": "NOT-SET"}
	if !reflect.DeepEqual(states, want) {
		t.Errorf("states %v, want %v", states, want)
	}
	if !strings.Contains(rows[1].Detail, "BACKFLOW_REGISTRY_URL") {
		t.Errorf("registry row does not name its variable: %+v", rows[1])
	}
}

func TestOutputFlagRefusesOtherFormats(t *testing.T) {
	for _, args := range [][]string{{"version", "-o", "xml"}, {"ping", "-o", "wide"}, {"groups", "-o", "csv"}, {"dlq", "list", "-o", "yaml"},
		{"replay", "--group", "g", "--all-topics", "--to-earliest", "--export", "-o", "json"}} {
		if code, out, errOut := runDLQ(t, context.Background(), args...); code != exitUsage {
			t.Errorf("%v: exit %d, want 2\n%s%s", args, code, out, errOut)
		}
	}
	code, out, _ := runDLQ(t, context.Background(), "version", "-o", "json")
	var v versionDoc
	if err := json.Unmarshal([]byte(out), &v); code != exitOK || err != nil || v.Version != "dev" || !strings.HasPrefix(v.Go, "go1.") {
		t.Errorf("version -o json: exit %d, %v, %+v", code, err, v)
	}
}

// TestWriteTableNoPartitions: a group without partitions shows "-" in every number column,
// as groups printed it before the row types (a negative int32 printed as -1).
func TestWriteTableNoPartitions(t *testing.T) {
	var b strings.Builder
	if err := writeTable(&b, []topicRow{{Group: "g", State: "Empty", Partitions: -1, CurrentOffset: -1, LogEndOffset: -1, Lag: -1}}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if got := strings.Fields(lines[1]); !reflect.DeepEqual(got, []string{"g", "Empty", "0", "-", "-", "-", "-", "-"}) {
		t.Errorf("row %q", got)
	}
}
