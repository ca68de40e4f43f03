package loadgen_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	hamba "github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/test/testenv"
	"github.com/backflowhq/backflow/tools/loadgen"
)

// TestStreamFormatsAgainstStack sends a Protobuf and a JSON Schema stream's traffic (the
// example schemas, the Protobuf one with its import) to the real Kafka and registry, then
// reads every record back: the subject holds the schema with its type (and the import as a
// reference); each record is in the manifest at its exact (topic, partition, offset), keyed
// by its requestId; each valid one decodes with the product's stream decoder to a record
// whose dedupe key is its requestId; each poison one fails with exactly the class the
// manifest says.
func TestStreamFormatsAgainstStack(t *testing.T) {
	testenv.Integration(t)
	for _, tc := range []struct {
		file, key, time string
		typ             sr.SchemaType
	}{
		{"shop-order.proto", "order_id", "created", sr.TypeProtobuf},
		{"page-view.schema.json", "view_id", "at", sr.TypeJSON},
	} {
		t.Run(tc.file, func(t *testing.T) {
			streamAgainstStack(t, tc.file, tc.key, tc.time, tc.typ)
		})
	}
}

func streamAgainstStack(t *testing.T, file, key, timeField string, typ sr.SchemaType) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kcfg := kafka.Conn{Brokers: kafka.ParseBrokers(testenv.Get(testenv.KafkaBrokers)), ClientID: "loadgen-test"}
	reg, err := avro.NewRegistryClient(avro.RegistryConn{URL: testenv.Get(testenv.RegistryURL)})
	if err != nil {
		t.Fatal(err)
	}
	id := testenv.ID("")
	topic, prefix := "lgs-"+id, "lgs-"+id+"-"
	testenv.Subjects(t, reg, topic+"-value", prefix+"shop-common.proto") // the referencing one first
	testenv.Topics(t, ctx, kcfg, 3, topic)
	text, err := os.ReadFile("../../deploy/streams/" + file)
	if err != nil {
		t.Fatal(err)
	}
	prod, err := kcfg.NewClient(loadgen.ProducerOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	cfg := loadgen.StreamConfig{Topic: topic, Schema: string(text), SchemaType: typ, KeyField: key, TimeField: timeField,
		ImportPaths: []string{"../../deploy/streams"}, ReferencePrefix: prefix,
		Records: 600, PoisonRate: 0.03, DuplicateRate: 0.05, CrossPartitionShare: 0.5, Seed: 5}
	var manifest bytes.Buffer
	st, err := loadgen.RunStream(ctx, cfg, prod, reg, loadgen.Options{RunID: "it" + id, Manifest: &manifest})
	if err != nil {
		t.Fatalf("run: %v (stats %v)", err, st)
	}
	m, err := loadgen.ParseManifest(&manifest)
	if err != nil {
		t.Fatal(err)
	}
	kinds := len(loadgen.StreamPoisonKinds)
	if typ == sr.TypeJSON {
		kinds++ // rejected
	}
	if st.Failed != 0 || len(m.Entries) != st.Records || st.Originals != 600 || st.PoisonTotal() != 18 || len(st.Poison) != kinds || st.Duplicates == 0 {
		t.Fatalf("stats %v, manifest entries %d", st, len(m.Entries))
	}

	latest, err := reg.SchemaByVersion(ctx, topic+"-value", -1)
	if err != nil || latest.Type != typ {
		t.Fatalf("subject %s-value: type %v (%v), want %v", topic, latest.Type, err, typ)
	}
	if typ == sr.TypeProtobuf && (len(latest.References) != 1 || latest.References[0].Subject != prefix+"shop-common.proto") {
		t.Fatalf("references %+v", latest.References)
	}
	schema, err := avro.ParseStreamSchema(ctx, reg, latest.ID, latest.Schema, "")
	if err != nil {
		t.Fatal(err)
	}
	var dec interface {
		Frame(b []byte) (int, []byte, error)
		Writer(ctx context.Context, id int) (hamba.Schema, error)
		Decode(id int, body []byte, writer, reader hamba.Schema) (map[string]any, error)
	}
	if typ == sr.TypeProtobuf {
		dec, err = avro.NewProtoDecoder(reg, avro.DecoderConfig{}, schema.Message)
	} else {
		dec, err = avro.NewJSONDecoder(reg, avro.DecoderConfig{})
	}
	if err != nil {
		t.Fatal(err)
	}

	cons, err := kcfg.NewClient(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxPartitionBytes(4<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	want := m.ByLocation()
	consumed := 0
	for consumed < len(m.Entries) {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records", consumed, len(m.Entries))
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			consumed++
			e, ok := want[loadgen.Location{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}]
			if !ok || string(r.Key) != e.RequestID {
				t.Fatalf("record %s/%d/%d (key %q) is not in the manifest as such (%+v)", r.Topic, r.Partition, r.Offset, r.Key, e)
			}
			id, body, err := dec.Frame(r.Value)
			var rec map[string]any
			if err == nil {
				var w hamba.Schema
				if w, err = dec.Writer(ctx, id); err == nil {
					rec, err = dec.Decode(id, body, w, w)
				}
			}
			var de *avro.DecodeError
			switch {
			case e.Valid() && (err != nil || fmt.Sprint(rec[key]) != e.RequestID || id != e.SchemaID):
				t.Fatalf("%s record %+v read back as key %v, schema id %d: %v", e.Kind, e, rec[key], id, err)
			case !e.Valid() && (!errors.As(err, &de) || de.ErrorClass() != e.Class):
				t.Fatalf("poison %+v decoded with %v, want class %s", e, err, e.Class)
			}
		})
	}
}
