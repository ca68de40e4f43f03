package chschema

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"

	"github.com/backflowhq/backflow/internal/conf"
)

func exampleSchema(t *testing.T, name string) avro.Schema {
	t.Helper()
	b, err := os.ReadFile("../../../deploy/streams/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return avro.MustParse(string(b))
}

// TestStreamTables: the example streams' tables, as derived from their schemas on 18.16.
func TestStreamTables(t *testing.T) {
	agent := StreamConfig{Name: "agent-task-event", Topic: "agent-task-event", DedupeKey: "event_id", EventTime: "event_time"}
	cols, err := agent.Columns(exampleSchema(t, "agent-task-event.avsc"), Capabilities{})
	if err != nil {
		t.Fatal(err)
	}
	ddl := agent.Spec(cols).CreateDDL()
	t.Logf("%s\n%s", ddl, agent.ViewDDL())
	for _, want := range []string{"CREATE TABLE IF NOT EXISTS agent_task_event (", "`event_id` UUID,", "`agent_model` Nullable(String),",
		"`tool_calls_latency_ms` Array(Nullable(Int32)),", "`cost_usd` Decimal(12, 6),", "`attrs_keys` Array(String),", "`result` String,",
		"`_partition` Int32,", "`_offset` UInt64,", "`_schema_id` UInt32\n", ") ENGINE = ReplacingMergeTree(`_offset`)",
		"PARTITION BY toYYYYMMDD(`event_time`)", "ORDER BY (toStartOfMinute(`event_time`), `event_id`)"} {
		if !strings.Contains(ddl, want) {
			t.Errorf("DDL lacks %q", want)
		}
	}
	if agent.ViewDDL() != "CREATE VIEW IF NOT EXISTS v_agent_task_event AS SELECT * FROM agent_task_event FINAL" {
		t.Errorf("view: %s", agent.ViewDDL())
	}

	training := StreamConfig{Name: "training-data-pipeline", Topic: "training-data-pipeline", Table: "training_data", DedupeKey: "record_id",
		DedupeWindow: 24 * time.Hour, EventTime: "event_time", Exclude: []string{"debug"}, Rename: map[string]string{"user_tenant": "tenant_id"},
		Screen: []string{"feedback_text"}}
	if err := training.Validate(); err != nil {
		t.Fatal(err)
	}
	cols, err = training.Columns(exampleSchema(t, "training-data-pipeline.avsc"), Capabilities{})
	if err != nil {
		t.Fatal(err)
	}
	ddl = training.Spec(cols).CreateDDL()
	t.Logf("%s\n%s", ddl, training.ViewDDL())
	for _, want := range []string{"`tenant_id` String,", "`labels_score` Array(Float32),", "`features_values` Array(Float64),", "`_window` UInt64,\n",
		"`_sensitive_words` Array(String)\n",
		"ORDER BY (toStartOfMinute(`event_time`), `record_id`, `_window`)"} {
		if !strings.Contains(ddl, want) {
			t.Errorf("DDL lacks %q", want)
		}
	}
	if strings.Contains(ddl, "debug") || strings.Contains(ddl, "user_tenant") {
		t.Errorf("excluded or renamed column left:\n%s", ddl)
	}

	// v2 adds two columns; v3 changes a type: the error names the field.
	v1, _ := agent.Columns(exampleSchema(t, "agent-task-event.avsc"), Capabilities{})
	v2, err := agent.Columns(exampleSchema(t, "agent-task-event.v2.avsc"), Capabilities{})
	if err != nil {
		t.Fatal(err)
	}
	stmts, err := PlanEvolution("agent_task_event", v1, v2)
	if err != nil || len(stmts) != 2 || stmts[0] != "ALTER TABLE agent_task_event ADD COLUMN `priority` Int32" {
		t.Errorf("v2 plan %q %v", stmts, err)
	}
	v3, _ := agent.Columns(exampleSchema(t, "agent-task-event.v3.avsc"), Capabilities{})
	if _, err := PlanEvolution("agent_task_event", v2, v3); err == nil || !strings.Contains(err.Error(), "field attempt changed type") {
		t.Errorf("v3 plan: %v", err)
	}
}

func TestStreamColumnsNameTheField(t *testing.T) {
	s := exampleSchema(t, "training-data-pipeline.avsc")
	for _, tc := range []struct {
		name    string
		cfg     StreamConfig
		field   string
		wantErr string
	}{
		{"nullable key", StreamConfig{DedupeKey: "session_id"}, "DedupeKey", "field session_id is Nullable(String): a dedupe key must be a single non-null value"},
		{"missing key", StreamConfig{DedupeKey: "nope"}, "DedupeKey", "field nope: not in the schema"},
		{"record key", StreamConfig{DedupeKey: "user"}, "DedupeKey", "field user: a record, not a single value"},
		{"excluded time", StreamConfig{EventTime: "event_time", Exclude: []string{"event_time"}}, "EventTime", "left out by include or exclude"},
		{"time not a time", StreamConfig{EventTime: "rating"}, "EventTime", "field rating is Nullable(Int32): an event time must be"},
		{"include missing", StreamConfig{Include: []string{"user.name"}}, "Include", "field user.name: not in the schema"},
		{"rename missing", StreamConfig{Rename: map[string]string{"usr": "u"}}, "Rename", "rename usr: no such column"},
		{"screen a number", StreamConfig{Screen: []string{"rating"}}, "Screen", "field rating is Nullable(Int32): only a string (or an optional string) is screened"},
		{"screen missing", StreamConfig{Screen: []string{"comment"}}, "Screen", "field comment: not in the schema"},
		// Regression: a nested field named by its column (user_tenant for user.tenant), or
		// misspelt, was "not in the schema" with no word on the path meant.
		{"a nested field by its column", StreamConfig{DedupeKey: "user_tenant"}, "DedupeKey", "field user_tenant: not in the schema; did you mean user.tenant?"},
		{"a misspelt field", StreamConfig{EventTime: "event_tme"}, "EventTime", "field event_tme: not in the schema; did you mean event_time?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Name, tc.cfg.Topic = "s", "t"
			_, err := tc.cfg.Columns(s, Capabilities{})
			fes := conf.Fields(err)
			if len(fes) != 1 || fes[0].Field != tc.field || !strings.Contains(fes[0].Error(), tc.wantErr) {
				t.Fatalf("got %v (%+v), want %s: %s", err, fes, tc.field, tc.wantErr)
			}
		})
	}
}

// TestStreamDDLOnACluster: a stream's DDL goes through the migrations' cluster rewriting: a
// replicated <table>_local on every shard, a Distributed table sharded by the dedupe key, the
// view and the added columns ON CLUSTER (the Distributed table's ADD COLUMN on each host).
func TestStreamDDLOnACluster(t *testing.T) {
	agent := StreamConfig{Name: "agent-task-event", Topic: "agent-task-event", DedupeKey: "event_id", EventTime: "event_time"}
	cols, err := agent.Columns(exampleSchema(t, "agent-task-event.avsc"), Capabilities{})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{agent.WithDefaults().Table: true}
	var got []clusterStmt
	for _, stmt := range append([]string{agent.Spec(cols).CreateDDL()}, agent.ViewAfter([]string{"ALTER TABLE agent_task_event ADD COLUMN `priority` Int32"})...) {
		cs, err := clusterStatements(stmt, "c1", "db", DefaultZooKeeperPath, names)
		if err != nil {
			t.Fatalf("%s: %v", firstLine(stmt), err)
		}
		got = append(got, cs...)
	}
	want := []struct {
		prefix  string
		perHost bool
	}{
		{"CREATE TABLE IF NOT EXISTS `db`.agent_task_event_local ON CLUSTER c1 (", false},
		{"CREATE TABLE IF NOT EXISTS `db`.agent_task_event ON CLUSTER c1 AS `db`.agent_task_event_local ENGINE = Distributed(c1, `db`, agent_task_event_local, cityHash64(toString(`event_id`)))", false},
		{"ALTER TABLE `db`.agent_task_event_local ON CLUSTER c1 ADD COLUMN `priority` Int32", false},
		{"ALTER TABLE agent_task_event ADD COLUMN `priority` Int32", true},
		{"DROP TABLE IF EXISTS `db`.v_agent_task_event ON CLUSTER c1", false},
		{"CREATE VIEW IF NOT EXISTS `db`.v_agent_task_event ON CLUSTER c1 AS SELECT * FROM `db`.agent_task_event FINAL", false},
	}
	if len(got) != len(want) {
		t.Fatalf("%d statements, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i].SQL, w.prefix) || got[i].PerHost != w.perHost {
			t.Errorf("statement %d:\n%s (per host %v)\nwant it to start\n%s (per host %v)", i, got[i].SQL, got[i].PerHost, w.prefix, w.perHost)
		}
	}
	if !strings.Contains(got[0].SQL, "ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/db/agent_task_event_local', '{replica}', `_offset`)") {
		t.Errorf("local table: %s", got[0].SQL)
	}
	if got[2].Column != "priority" || got[3].Column != "priority" {
		t.Errorf("ADD COLUMN statements do not name their column for the already-there check: %+v", got[2:4])
	}
}

// TestStreamValidateReportsABadNameOnce: the table and group made from a bad name are not
// reported as problems of their own. Regression: one bad name was three problems (name,
// table, group), at keys the file did not set.
func TestStreamValidateReportsABadNameOnce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    StreamConfig
		fields []string
	}{
		{"a bad name", StreamConfig{Name: "Bad Name!", Topic: "t"}, []string{"Name"}},
		{"a bad name with a bad table given", StreamConfig{Name: "Bad Name!", Topic: "t", Table: "v_x"}, []string{"Name", "Table"}},
		{"no topic", StreamConfig{Name: "s"}, []string{"Topic"}},
		{"a good name", StreamConfig{Name: "s", Topic: "t"}, nil},
		{"a message that is no Protobuf name", StreamConfig{Name: "s", Topic: "t", Message: "shop.v1/Order"}, []string{"Message"}},
		{"a nested message", StreamConfig{Name: "s", Topic: "t", Message: "shop.v1.Order.Item"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, fe := range conf.Fields(tc.cfg.Validate()) {
				got = append(got, fe.Field)
			}
			if strings.Join(got, ",") != strings.Join(tc.fields, ",") {
				t.Fatalf("errors at %v, want %v: %v", got, tc.fields, tc.cfg.Validate())
			}
		})
	}
}
