package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	sravro "github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/dlq"
	"github.com/backflowhq/backflow/internal/retry"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
	"github.com/backflowhq/backflow/test/testenv"
)

// Each mapping of this package on its own: the built-in tables (enrichedMapping) and a
// declared stream (streamMapping), each mapping records and inserting rows through an
// inserter over memWriter (sink_test.go); the DLQ mirror's and the rollups' are tested in their
// packages. The loop around them is tested in
// sink_test.go, the whole sink against ClickHouse in sink_integration_test.go.

// testRetrier is a retrier with a short backoff whose retries count in *retries.
func testRetrier(retries *atomic.Int64) *retrier {
	return &retrier{policy: retry.Policy{Min: time.Millisecond, Max: 5 * time.Millisecond}, log: quiet(), retries: retries, pause: func() {}}
}

// enrichedFixture is the built-in mapping over franz-go's fake registry, and the encoder of
// the enriched records it decodes.
func enrichedFixture(t *testing.T) (*enrichedMapping, *sravro.Encoder[sravro.EnrichedRecord], *srfake.Registry) {
	t.Helper()
	reg, fake := testenv.FakeRegistry(t)
	enc, err := sravro.NewEncoder[sravro.EnrichedRecord](reg, sravro.EnrichedSchema, "enriched-value")
	if err != nil {
		t.Fatal(err)
	}
	dec, err := sravro.NewDecoder[sravro.EnrichedRecord](reg, sravro.EnrichedSchema, sravro.DecoderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return &enrichedMapping{dec: dec, log: quiet()}, enc, fake
}

// TestEnrichedMapsRecords: an enriched record becomes MapRecord's rows, counted in the ledger
// as one row, its hits, its event time and its epoch; a record that is not Avro, or is cut
// short, is at fault with its decode class, and one holding neither source part is invalid.
func TestEnrichedMapsRecords(t *testing.T) {
	m, enc, _ := enrichedFixture(t)
	ctx := context.Background()
	e := enriched()
	e.SourceTopic = sravro.TopicInferenceResult
	et := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	e.Inference = &sravro.InferenceResult{RequestID: "req-1", Model: "m", EventTime: et, Status: "OK"}
	value, err := enc.Encode(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	var retries atomic.Int64
	r := testRetrier(&retries)
	got, fault, err := m.Map(ctx, r, &kgo.Record{Value: value})
	if err != nil || fault != nil {
		t.Fatalf("Map = %v, %v", fault, err)
	}
	decoded, _, _ := m.dec.Decode(ctx, value)
	want, _ := MapRecord(&decoded)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("row %+v, want MapRecord's %+v", got, want)
	}
	if c := got.Tally(); c != (Tally{Rows: 1, HitRows: 2, EventTime: et, Epoch: 1}) {
		t.Fatalf("tally %+v, want 1 row, 2 hits, the event time and epoch 1", c)
	}

	neither := enriched()
	noSource, err := enc.Encode(ctx, neither)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		value []byte
		class string
	}{
		{"not framed", []byte("plain text"), sravro.ClassNotFramed},
		{"cut short", value[:len(value)-8], sravro.ClassCorrupt},
		{"neither inference nor gateway", noSource, sravro.ClassInvalid},
	} {
		row, fault, err := m.Map(ctx, r, &kgo.Record{Value: tc.value})
		if err != nil || row != nil || dlq.ClassOf(fault) != tc.class {
			t.Errorf("%s: row %v, fault %v (class %s), err %v; want a fault of class %s", tc.name, row, fault, dlq.ClassOf(fault), err, tc.class)
		}
	}
	if retries.Load() != 0 {
		t.Fatalf("%d retries without an outage", retries.Load())
	}
}

// TestEnrichedWaitsOutTheRegistry: with the registry down, Map retries (each retry
// counted) until the sink stops, and then stops it with the record unmapped, neither a row
// nor a fault.
func TestEnrichedWaitsOutTheRegistry(t *testing.T) {
	m, enc, fake := enrichedFixture(t)
	value, err := enc.Encode(context.Background(), enriched())
	if err != nil {
		t.Fatal(err)
	}
	fake.Close() // the decoder has not met the schema id: it must ask the registry
	var retries atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for retries.Load() < 3 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	row, fault, err := m.Map(ctx, testRetrier(&retries), &kgo.Record{Value: value})
	if !errors.Is(err, context.Canceled) || row != nil || fault != nil || retries.Load() < 3 {
		t.Fatalf("Map with the registry down = %v, %v, %v after %d retries; want the stop's error after 3 or more",
			row, fault, err, retries.Load())
	}
}

// TestEnrichedInsertsThreeTables: a batch's rows go to inference_results, gateway_logs and
// moderation_hits, each row owned by its record; a hit ClickHouse rejects makes its record,
// and only it, rejected, while its other hit and every other row land.
func TestEnrichedInsertsThreeTables(t *testing.T) {
	inf, gw := enriched(), enriched()
	inf.SourceTopic, inf.Inference = sravro.TopicInferenceResult, &sravro.InferenceResult{RequestID: "req-1"}
	gw.SourceTopic, gw.RequestID, gw.Gateway = sravro.TopicGatewayLog, "req-2", &sravro.GatewayLog{RequestID: "req-2", Phase: sravro.PhaseRequest}
	gw.Moderation.Hits = gw.Moderation.Hits[:1]
	var rows []Row
	for _, e := range []sravro.EnrichedRecord{gw, inf} {
		rs, err := MapRecord(&e)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, rs)
	}
	// Reject a moderation_hits batch that holds the word "gun" (req-1's second hit).
	w := &memWriter{reject: func(b Batch) bool {
		h, ok := b.(tableRows[HitRow])
		return ok && slices.ContainsFunc(h.rows, func(r HitRow) bool { return r.Word == "gun" })
	}}
	var retries atomic.Int64
	in := &inserter{w: w, r: testRetrier(&retries), log: quiet(), reject: true}
	rejected, err := (&enrichedMapping{}).Insert(context.Background(), in, rows)
	if err != nil {
		t.Fatal(err)
	}
	if len(rejected) != 1 || rejected[1] == nil || !IsRejected(rejected[1]) {
		t.Fatalf("rejected %v, want record 1 (req-1) alone", rejected)
	}
	landed := map[string][]string{}
	for _, b := range w.batches {
		switch b := b.(type) {
		case landedRows[InferenceRow]:
			for _, r := range b.rows {
				landed[b.Table()] = append(landed[b.Table()], r.RequestID)
			}
		case landedRows[GatewayRow]:
			for _, r := range b.rows {
				landed[b.Table()] = append(landed[b.Table()], r.RequestID+"/"+r.Phase)
			}
		case tableRows[HitRow]:
			for _, r := range b.rows {
				landed[b.Table()] = append(landed[b.Table()], r.RequestID+"/"+r.Word)
			}
		}
	}
	slices.Sort(landed[TableHits])
	if got := fmt.Sprint(landed); got != "map[gateway_logs:[req-2/REQUEST] inference_results:[req-1] moderation_hits:[req-1/kill req-2/kill]]" {
		t.Fatalf("landed %s", got)
	}
}

// streamFixture is the mapping of a stream of evSchema over franz-go's fake registry, and the
// framed value of a record of it.
func streamFixture(t *testing.T) (*streamMapping, func(schema string, rec map[string]any) []byte) {
	t.Helper()
	reg, _ := testenv.FakeRegistry(t)
	dec, err := sravro.NewGenericDecoder(reg, sravro.DecoderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	sc := chschema.StreamConfig{Name: "ev", Topic: "ev", DedupeKey: "id", EventTime: "at", DedupeWindow: time.Hour}.WithDefaults()
	reader := avro.MustParse(evSchema("int"))
	cols, err := sc.Columns(reader, chschema.Capabilities{})
	if err != nil {
		t.Fatal(err)
	}
	m := &streamMapping{sc: sc, dec: dec, log: quiet(), reader: reader, cur: newStreamCols(sc, cols), met: map[int]bool{}}
	encode := func(schema string, rec map[string]any) []byte {
		ss, err := reg.CreateSchema(context.Background(), "ev-value", sr.Schema{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		body, err := avro.Marshal(avro.MustParse(schema), rec)
		if err != nil {
			t.Fatal(err)
		}
		return append(sravro.AppendFrame(nil, ss.ID), body...)
	}
	return m, encode
}

func evSchema(nType string) string {
	return `{"type":"record","name":"Ev","namespace":"t","fields":[{"name":"id","type":"string"},{"name":"n","type":"` + nType +
		`"},{"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}}]}`
}

// TestStreamMapsRecords: a record of the table's schema becomes its row — the schema's values,
// then its partition, offset, schema id and dedupe window — counted in the ledger at its event
// time; a record that is not framed is at fault; a writer schema the table cannot follow stops
// the stream (ErrStreamStopped) before anything reaches ClickHouse.
func TestStreamMapsRecords(t *testing.T) {
	m, encode := streamFixture(t)
	at := time.Date(2026, 11, 30, 10, 30, 0, 0, time.UTC)
	value := encode(evSchema("int"), map[string]any{"id": "e1", "n": 5, "at": at})
	id, _, _ := sravro.Unframe(value)
	var retries atomic.Int64
	r := testRetrier(&retries)
	got, fault, err := m.Map(context.Background(), r, &kgo.Record{Partition: 1, Offset: 7, Value: value})
	if err != nil || fault != nil {
		t.Fatalf("Map = %v, %v", fault, err)
	}
	srow := got.(*streamRow)
	want := []any{"e1", int32(5), at, int32(1), uint64(7), uint32(id), uint64(at.Unix() / 3600)}
	if !reflect.DeepEqual(srow.vals, want) || srow.cols != m.cur {
		t.Fatalf("row %#v, want %#v in the table's current column version", srow.vals, want)
	}
	if c := got.Tally(); c != (Tally{Rows: 1, EventTime: at}) {
		t.Fatalf("tally %+v, want one row at %v", c, at)
	}
	if row, fault, err := m.Map(context.Background(), r, &kgo.Record{Value: []byte("x")}); row != nil || err != nil || !errors.Is(fault, sravro.ErrNotFramed) {
		t.Fatalf("unframed: %v, %v, %v; want a not_framed fault", row, fault, err)
	}
	changed := encode(evSchema("string"), map[string]any{"id": "e2", "n": "five", "at": at})
	if row, fault, err := m.Map(context.Background(), r, &kgo.Record{Value: changed}); row != nil || fault != nil || !errors.Is(err, ErrStreamStopped) {
		t.Fatalf("int to string: %v, %v, %v; want the stream stopped", row, fault, err)
	}
	if retries.Load() != 0 {
		t.Fatalf("%d retries without an outage", retries.Load())
	}
}

// TestStreamInsertsByColumnVersion: rows decoded before and after the table gained a column
// are inserted apart, each batch naming its own columns; a row ClickHouse rejects comes back
// by its index, the other rows land.
func TestStreamInsertsByColumnVersion(t *testing.T) {
	sc := chschema.StreamConfig{Name: "s", Topic: "s"}.WithDefaults()
	v1 := newStreamCols(sc, []chschema.Column{{Name: "a", Field: "a", Type: "String"}})
	v2 := newStreamCols(sc, []chschema.Column{{Name: "a", Field: "a", Type: "String"}, {Name: "b", Field: "b", Type: "Int32"}})
	rows := []Row{
		&streamRow{cols: v1, vals: []any{"x", int32(0), uint64(1), uint32(1)}},
		&streamRow{cols: v1, vals: []any{"bad", int32(0), uint64(2), uint32(1)}},
		&streamRow{cols: v2, vals: []any{"y", int32(4), int32(0), uint64(3), uint32(2)}},
	}
	w := &memWriter{reject: func(b Batch) bool {
		return slices.ContainsFunc(b.(streamBatch).rows, func(r *streamRow) bool { return r.vals[0] == "bad" })
	}}
	var retries atomic.Int64
	in := &inserter{w: w, r: testRetrier(&retries), log: quiet(), reject: true}
	rejected, err := (&streamMapping{sc: sc}).Insert(context.Background(), in, rows)
	if err != nil || len(rejected) != 1 || rejected[1] == nil {
		t.Fatalf("insert = %v, %v; want row 1 rejected", rejected, err)
	}
	var got []string
	for _, b := range w.batches {
		got = append(got, fmt.Sprintf("%s %d", b.Insert(), b.Len()))
	}
	want := []string{"INSERT INTO s (`a`, `_partition`, `_offset`, `_schema_id`) VALUES 1",
		"INSERT INTO s (`a`, `b`, `_partition`, `_offset`, `_schema_id`) VALUES 1"}
	if !slices.Equal(got, want) {
		t.Fatalf("batches %q, want %q", got, want)
	}
}
