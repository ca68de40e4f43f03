package avro_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
)

const pageViewJSON = `{"view_id": "v1", "at": "2026-12-07T03:04:05Z", "user": {"id": "u1"}, "device": "mobile",
	"duration_ms": 1500, "score": 0.5, "items": [{"sku": "a", "qty": 2}, {"sku": "b", "qty": 1}],
	"labels": {"b": "2", "a": "1"}, "context": {"ab": [1, 2]}}`

func jsonFixture(t testing.TB, files ...string) (*sr.Client, []int) {
	t.Helper()
	fake := srfake.New()
	t.Cleanup(fake.Close)
	reg, err := avro.NewRegistryClient(avro.RegistryConn{URL: fake.URL()})
	if err != nil {
		t.Fatal(err)
	}
	var ids []int
	for _, f := range files {
		ss, err := reg.CreateSchema(context.Background(), "page-view-value", sr.Schema{Schema: readProto(t, f), Type: sr.TypeJSON})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ss.ID)
	}
	return reg, ids
}

// TestJSONSchemaTableAndRow: a JSON Schema (nested object, array of objects, enum, date-time,
// an optional and a nullable property, a map, an open object) derives the columns the mapping
// says, and a value fills them with what was written.
func TestJSONSchemaTableAndRow(t *testing.T) {
	reg, ids := jsonFixture(t, "page-view.schema.json")
	ctx := context.Background()
	dec, err := avro.NewJSONDecoder(reg, avro.DecoderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := dec.Writer(ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	cols, err := chschema.DeriveColumns(w, chschema.Capabilities{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cols {
		got = append(got, c.Name+" "+c.Type)
	}
	want := []string{"view_id String", "at DateTime", "user_id String", "user_country Nullable(String)",
		"device Enum8('desktop' = 1, 'mobile' = 2, 'tablet' = 3)", "duration_ms Int64", "score Nullable(Float64)",
		"items_sku Array(String)", "items_qty Array(Int64)", "labels_keys Array(String)", "labels_values Array(String)", "context Nullable(String)"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("columns:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	_, body, err := dec.Frame(append(avro.AppendFrame(nil, ids[0]), pageViewJSON...))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := dec.Decode(ids[0], body, w, nil)
	if err != nil {
		t.Fatal(err)
	}
	vals, err := chschema.RowValues(cols, rec)
	if err != nil {
		t.Fatal(err)
	}
	score, ctxText := 0.5, `{"ab":[1,2]}`
	wantVals := []any{"v1", time.Date(2026, 12, 7, 3, 4, 5, 0, time.UTC), "u1", (*string)(nil), "mobile", int64(1500), &score,
		[]string{"a", "b"}, []int64{2, 1}, []string{"a", "b"}, []string{"1", "2"}, &ctxText}
	for i := range cols {
		if !reflect.DeepEqual(vals[i], wantVals[i]) {
			t.Errorf("%s = %s, want %s", cols[i].Name, show(vals[i]), show(wantVals[i]))
		}
	}
}

// TestJSONSchemaEvolutionAndPoison: v2 (an optional property, an enum value) adds a column and
// extends the enum; a v1 value read as v2 has null there. Text that is not JSON is corrupt, a
// value the schema rejects invalid.
func TestJSONSchemaEvolutionAndPoison(t *testing.T) {
	reg, ids := jsonFixture(t, "page-view.schema.json", "page-view.v2.schema.json")
	ctx := context.Background()
	dec, _ := avro.NewJSONDecoder(reg, avro.DecoderConfig{})
	w1, err := dec.Writer(ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	w2, err := dec.Writer(ctx, ids[1])
	if err != nil {
		t.Fatal(err)
	}
	c1, _ := chschema.DeriveColumns(w1, chschema.Capabilities{})
	c2, _ := chschema.DeriveColumns(w2, chschema.Capabilities{})
	stmts, err := chschema.PlanEvolution("page_view", c1, c2, "view_id")
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(stmts, "\n")
	for _, s := range []string{"ADD COLUMN `referrer` Nullable(String)", "MODIFY COLUMN `device` Enum8('desktop' = 1, 'mobile' = 2, 'tablet' = 3, 'tv' = 4)"} {
		if !strings.Contains(joined, s) {
			t.Errorf("plan lacks %q:\n%s", s, joined)
		}
	}
	rec, err := dec.Decode(ids[0], []byte(pageViewJSON), w1, w2)
	if err != nil || rec["referrer"] != nil || rec["view_id"] != "v1" {
		t.Errorf("v1 value as v2: referrer %#v, view_id %#v (%v)", rec["referrer"], rec["view_id"], err)
	}
	for _, tt := range []struct {
		name, body string
		kind       error
	}{
		{"not JSON", `{"view_id": `, avro.ErrCorrupt},
		{"a required property missing", `{"view_id": "v"}`, avro.ErrInvalid},
		{"a value of the wrong type", strings.Replace(pageViewJSON, `1500`, `"long"`, 1), avro.ErrInvalid},
		{"an enum value not listed", strings.Replace(pageViewJSON, `"mobile"`, `"watch"`, 1), avro.ErrInvalid},
		{"a date-time that is not one", strings.Replace(pageViewJSON, `2026-12-07T03:04:05Z`, `yesterday`, 1), avro.ErrInvalid},
	} {
		if _, err := dec.Decode(ids[0], []byte(tt.body), w1, nil); !errors.Is(err, tt.kind) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.kind)
		}
	}
}
