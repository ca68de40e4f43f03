package loadgen

import (
	"context"
	"os"
	"testing"

	hamba "github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/test/testenv"
)

// TestStreamTrafficDecodes: every original and duplicate a stream generator plans for the
// example schemas decodes with its writer schema and carries its key; each poison record fails
// to decode with the class its kind names.
func TestStreamTrafficDecodes(t *testing.T) {
	for _, tc := range []struct{ file, key string }{{"agent-task-event.avsc", "event_id"}, {"training-data-pipeline.avsc", "record_id"}} {
		t.Run(tc.file, func(t *testing.T) {
			b, err := os.ReadFile("../../deploy/streams/" + tc.file)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			reg := newFakeRegistry(t)
			g, err := NewStreamGenerator(StreamConfig{Topic: "t", Schema: string(b), KeyField: tc.key, TimeField: "event_time",
				Records: 300, DuplicateRate: 0.1, PoisonRate: 0.05, MaxRecordBytes: 4096}, "run", reg)
			if err != nil {
				t.Fatal(err)
			}
			dec, err := avro.NewGenericDecoder(reg, avro.DecoderConfig{MaxRecordBytes: 4096})
			if err != nil {
				t.Fatal(err)
			}
			var planned []Planned
			for range 300 {
				p, err := g.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				planned = append(planned, p...)
			}
			planned = append(planned, g.Drain()...)
			kinds := map[Kind]int{}
			for _, p := range planned {
				kinds[p.Kind]++
				id, body, err := dec.Frame(p.Value)
				var m map[string]any
				if err == nil {
					var w hamba.Schema
					if w, err = dec.Writer(ctx, id); err == nil {
						m, err = dec.Decode(id, body, w, w)
					}
				}
				switch {
				case p.Kind == KindPoison && err == nil:
					t.Errorf("poison %s decoded", p.Poison)
				case p.Kind == KindPoison && err.(*avro.DecodeError).ErrorClass() != p.Poison.Class():
					t.Errorf("poison %s: class %s, want %s", p.Poison, err.(*avro.DecodeError).ErrorClass(), p.Poison.Class())
				case p.Kind != KindPoison && err != nil:
					t.Errorf("%s record %s: %v", p.Kind, p.RequestID, err)
				case p.Kind != KindPoison && m[tc.key] != p.RequestID:
					t.Errorf("record %s has key %v", p.RequestID, m[tc.key])
				}
			}
			if kinds[KindOriginal] != 300 || kinds[KindDuplicate] == 0 || kinds[KindPoison] != 15 {
				t.Errorf("kinds %v", kinds)
			}
		})
	}
}

func newFakeRegistry(t *testing.T) *sr.Client {
	t.Helper()
	cl, _ := testenv.FakeRegistry(t)
	return cl
}
