package loadgen_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/test/testenv"
	"github.com/backflowhq/backflow/tools/loadgen"
)

// TestLoadgenAgainstStack sends traffic with poison and duplicates to the real Kafka and
// registry, then reads every record back: each must be in the manifest at its exact
// (topic, partition, offset); each valid one must decode with its requestId and phase; each
// poison one must fail with exactly the class the manifest says.
func TestLoadgenAgainstStack(t *testing.T) {
	testenv.Integration(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	kcfg := kafka.Conn{Brokers: kafka.ParseBrokers(testenv.Get(testenv.KafkaBrokers)), ClientID: "loadgen-test"}
	reg, err := avro.NewRegistryClient(avro.RegistryConn{URL: testenv.Get(testenv.RegistryURL)})
	if err != nil {
		t.Fatal(err)
	}
	suffix := testenv.ID("")
	cfg := loadgen.Config{
		InferenceTopic: "lg-inference-" + suffix, GatewayTopic: "lg-gateway-" + suffix,
		Requests: 1500, PoisonRate: 0.03, DuplicateRate: 0.05, CrossPartitionShare: 0.5, Seed: 11,
	}
	prod, err := kcfg.NewClient(loadgen.ProducerOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	testenv.RemoveTopics(t, kcfg, cfg.InferenceTopic, cfg.GatewayTopic)
	testenv.Subjects(t, reg, cfg.InferenceTopic+"-value", cfg.GatewayTopic+"-value")
	if err := loadgen.EnsureTopics(ctx, prod, 3, 1, cfg.InferenceTopic, cfg.GatewayTopic); err != nil {
		t.Fatal(err)
	}

	var manifest bytes.Buffer
	progressCalls := 0
	st, err := loadgen.Run(ctx, cfg, prod, reg, loadgen.Options{RunID: "it" + suffix, Manifest: &manifest,
		Progress: func(int) { progressCalls++ }})
	if err != nil {
		t.Fatalf("run: %v (stats %v)", err, st)
	}
	t.Log(st)
	m, err := loadgen.ParseManifest(&manifest)
	if err != nil {
		t.Fatal(err)
	}
	if st.Failed != 0 || len(m.Entries) != st.Records || st.Requests != 1500 || progressCalls != 1500 {
		t.Fatalf("stats %+v, manifest entries %d, progress calls %d", st, len(m.Entries), progressCalls)
	}
	if st.Originals != 4500 || st.PoisonTotal() != 135 || st.CrossPartition == 0 || len(st.Poison) != len(loadgen.AllPoisonKinds) {
		t.Fatalf("unexpected shape: %v", st)
	}

	infDec, _ := avro.NewDecoder[avro.InferenceResult](reg, avro.InferenceResultSchema, avro.DecoderConfig{})
	gwDec, _ := avro.NewDecoder[avro.GatewayLog](reg, avro.GatewayLogSchema, avro.DecoderConfig{})
	cons, err := kcfg.NewClient(kgo.ConsumeTopics(cfg.InferenceTopic, cfg.GatewayTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxPartitionBytes(4<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	want := m.ByLocation()
	keyPart := kgo.StickyKeyPartitioner(nil)
	consumed, crossSeen := 0, 0
	for consumed < len(m.Entries) {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records", consumed, len(m.Entries))
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			consumed++
			e, ok := want[loadgen.Location{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}]
			if !ok {
				t.Fatalf("record %s/%d/%d is not in the manifest", r.Topic, r.Partition, r.Offset)
			}
			if string(r.Key) != e.RequestID {
				t.Fatalf("key %q at %s/%d/%d, manifest says %q", r.Key, r.Topic, r.Partition, r.Offset, e.RequestID)
			}
			var reqID, phase string
			if r.Topic == cfg.InferenceTopic {
				v, _, derr := infDec.Decode(ctx, r.Value)
				reqID, err = v.RequestID, derr
			} else {
				v, _, derr := gwDec.Decode(ctx, r.Value)
				reqID, phase, err = v.RequestID, v.Phase, derr
			}
			if e.Valid() {
				if err != nil || reqID != e.RequestID || phase != e.Phase {
					t.Fatalf("%s record %+v decoded as %q/%q, %v", e.Kind, e, reqID, phase, err)
				}
				home := keyPart.ForTopic(r.Topic).Partition(&kgo.Record{Key: r.Key}, 3)
				if e.CrossPartition != (int(r.Partition) != home) {
					t.Fatalf("record %+v in partition %d, key's partition %d", e, r.Partition, home)
				}
				if e.CrossPartition {
					crossSeen++
				}
				return
			}
			var de *avro.DecodeError
			if !errors.As(err, &de) || de.ErrorClass() != e.Class {
				t.Fatalf("poison %+v decoded with %v, want class %s", e, err, e.Class)
			}
		})
	}
	if consumed != len(m.Entries) || crossSeen != st.CrossPartition {
		t.Fatalf("consumed %d (manifest %d), cross-partition seen %d (stats %d)", consumed, len(m.Entries), crossSeen, st.CrossPartition)
	}
}
