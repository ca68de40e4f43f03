package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
)

// TestCheckConfigStreams is check-config against a registry (srfake) holding the example
// agent-task-event schema: every problem of a stream at once, at its key and line, each once,
// with the field path meant; and a registry that does not answer is exit 1 and names
// --offline, not a problem of the file.
func TestCheckConfigStreams(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	avsc, err := os.ReadFile(filepath.Join("..", "..", "deploy", "streams", "agent-task-event.avsc"))
	must(t, err)
	if _, _, err := reg.RegisterSchema("agent-task-event-value", sr.Schema{Schema: string(avsc), Type: sr.TypeAvro}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		subject, file string
		typ           sr.SchemaType
		refs          []sr.SchemaReference
	}{
		{"shop-common.proto", "shop-common.proto", sr.TypeProtobuf, nil},
		{"shop-order-value", "shop-order.proto", sr.TypeProtobuf, []sr.SchemaReference{{Name: "shop-common.proto", Subject: "shop-common.proto", Version: 1}}},
	} {
		text, err := os.ReadFile(filepath.Join("..", "..", "deploy", "streams", r.file))
		must(t, err)
		if _, _, err := reg.RegisterSchema(r.subject, sr.Schema{Schema: string(text), Type: r.typ, References: r.refs}); err != nil {
			t.Fatal(err)
		}
	}
	for subject, schema := range map[string]string{
		"json-events-value": `{"type": "object", "properties": {"id": {"type": "string"}, "at": {"type": "string", "format": "date-time"}}, "required": ["id", "at"]}`,
		"json-text-value":   `{"type": "string"}`,
	} {
		if _, _, err := reg.RegisterSchema(subject, sr.Schema{Schema: schema, Type: sr.TypeJSON}); err != nil {
			t.Fatal(err)
		}
	}
	closed := srfake.New()
	closedURL := closed.URL()
	closed.Close()
	dir := t.TempDir()
	write := func(body string) string {
		p := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+".yaml")
		must(t, os.WriteFile(p, []byte(body), 0o600))
		return p
	}
	tests := []struct {
		name     string
		yaml     string
		registry string
		code     int
		stderr   []string
		not      []string
		problems int
	}{
		{
			// Regression: a registry refusing connections made a valid file invalid (exit 2),
			// as a problem of streams[0].subject, a key the file does not set.
			name: "the registry does not answer", registry: closedURL, code: exitFailure,
			yaml:   "streams:\n  - name: agent-task-event\n    topic: agent-task-event\n    dedupe_key: event_id\n",
			stderr: []string{"the streams were not checked: the registry did not answer", "(registry.url)", "connection refused", "check-config --offline checks the file without it"},
			not:    []string{"streams[0].subject", "problem(s)"},
		},
		{
			// Regression: a bad name hid the schema's problems, and was reported three times
			// (name, and the table and group made from it).
			name: "a bad name and the schema's problems, all at once", code: exitUsage, problems: 3,
			yaml: "streams:\n  - name: Bad Name!\n    topic: agent-task-event\n    dedupe_key: nope\n    event_time: agent.model\n",
			stderr: []string{`streams[0].name (line 2): name: "Bad Name!"`, "streams[0].dedupe_key (line 4): field nope: not in the schema",
				"streams[0].event_time (line 5): field agent.model is Nullable(String): an event time must be"},
			not: []string{"streams[0].table", "streams[0].group"},
		},
		{
			name: "a nested field by its column gets its dotted path", code: exitUsage, problems: 1,
			yaml:   "streams:\n  - name: agent\n    topic: agent-task-event\n    dedupe_key: agent_id\n",
			stderr: []string{"streams[0].dedupe_key (line 4): field agent_id: not in the schema; did you mean agent.id? (subject agent-task-event-value"},
		},
		{
			name: "a field path the file already refused is not checked again", code: exitUsage, problems: 1,
			yaml:   "streams:\n  - name: agent\n    topic: agent-task-event\n    dedupe_key: agent..id\n",
			stderr: []string{`streams[0].dedupe_key (line 4): "agent..id" is not an Avro field path`},
		},
		{
			name: "no schema under the topic's subject is a problem at the topic", code: exitUsage, problems: 1,
			yaml:   "streams:\n  - name: other\n    topic: other-events\n",
			stderr: []string{"streams[0].topic (line 3): the registry has no schema under subject other-events-value (the topic's, as subject is not set)"},
		},
		{
			name: "a Protobuf subject's fields are checked as an Avro one's", code: exitUsage, problems: 2,
			yaml: "streams:\n  - name: shop\n    topic: shop-order\n    dedupe_key: orderid\n    event_time: customer\n",
			stderr: []string{"streams[0].dedupe_key (line 4): field orderid: not in the schema; did you mean order_id? (subject shop-order-value",
				"streams[0].event_time (line 5): field customer: a record, not a single value"},
		},
		{
			name: "a valid Protobuf stream passes", code: exitOK,
			yaml: "streams:\n  - name: shop\n    topic: shop-order\n    dedupe_key: order_id\n    event_time: created\n    screen: [customer.tier]\n",
			not:  []string{"problem(s)"},
		},
		{
			name: "a Protobuf stream may read a nested message, whose fields are checked", code: exitUsage, problems: 1,
			yaml:   "streams:\n  - name: shop\n    topic: shop-order\n    message: shop.v1.Order.Item\n    dedupe_key: skus\n",
			stderr: []string{"streams[0].dedupe_key (line 5): field skus: not in the schema; did you mean sku?"},
		},
		{
			name: "a message the Protobuf file lacks is one line at message", code: exitUsage, problems: 1,
			yaml:   "streams:\n  - name: shop\n    topic: shop-order\n    message: Refund\n",
			stderr: []string{"streams[0].message (line 4): subject shop-order-value version 1: the stream's message Refund: the Protobuf schema has no message Refund"},
		},
		{
			name: "a message for a JSON Schema subject is one line at message", code: exitUsage, problems: 1,
			yaml:   "streams:\n  - name: json\n    topic: json-events\n    message: Event\n",
			stderr: []string{"streams[0].message (line 4):", "is JSON, and only a Protobuf schema has messages to choose from"},
		},
		{
			name: "a JSON Schema subject's fields are checked as an Avro one's", code: exitUsage, problems: 1,
			yaml:   "streams:\n  - name: json\n    topic: json-events\n    dedupe_key: id\n    event_time: id\n",
			stderr: []string{"streams[0].event_time (line 5): field id is String: an event time must be"},
		},
		{
			name: "a JSON Schema whose root is no object is one line at the topic", code: exitUsage, problems: 1,
			yaml:   "streams:\n  - name: json\n    topic: json-text\n",
			stderr: []string{"streams[0].topic (line 3): subject json-text-value version 1: the JSON Schema's root is not an object with properties: fix the schema registered there"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range addressVars {
				t.Setenv(k, v)
			}
			url := reg.URL()
			if tt.registry != "" {
				url = tt.registry
			}
			t.Setenv("BACKFLOW_REGISTRY_URL", url)
			code, out, errOut := runCLIErr(t, "check-config", "--config", write(tt.yaml))
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, out, errOut)
			}
			for _, w := range tt.stderr {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
			for _, w := range tt.not {
				if strings.Contains(errOut, w) {
					t.Errorf("stderr has %q:\n%s", w, errOut)
				}
			}
			if tt.problems > 0 && (!strings.Contains(errOut, fmt.Sprintf("%d problem(s)", tt.problems)) || strings.Count(errOut, "\n") != tt.problems+1) {
				t.Errorf("stderr does not hold exactly %d problems:\n%s", tt.problems, errOut)
			}
		})
	}
}
