package main

// Stream-formats mode: a pair's two backlogs (its format's from loadgen, the same records as
// Avro), the drain's config, and the summary (streams.go has the mode itself).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	hamba "github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.yaml.in/yaml/v3"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/tools/loadgen"
)

// made is what fillPair created (to delete after) and counted.
type made struct {
	topics, subjects []string
	avsc             string // the Avro schema's file
	counts           map[string]streamBacklog
}

// streamDecoder is the product's decoder of a Protobuf or JSON Schema stream.
type streamDecoder interface {
	Frame(b []byte) (int, []byte, error)
	Writer(ctx context.Context, id int) (hamba.Schema, error)
	Decode(id int, body []byte, writer, reader hamba.Schema) (map[string]any, error)
}

// fillPair fills p's two backlogs: p's format from loadgen, then the same records as Avro.
func (h *harness) fillPair(ctx context.Context, tag string, p streamPair) (map[string]backlog, made, error) {
	own, avroTopic := tag+"."+p.Stream+"."+p.Format, tag+"."+p.Stream+"."+formatAvro
	refPrefix := tag + "."
	mk := made{topics: []string{own, avroTopic}, subjects: []string{own + "-value", avroTopic + "-value"}, counts: map[string]streamBacklog{}}
	if p.Format == formatProtobuf {
		mk.subjects = append(mk.subjects, refPrefix+"shop-common.proto") // the import loadgen registers
	}
	tctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := h.st.createTopics(tctx, partitions, own, avroTopic); err != nil {
		return nil, mk, err
	}
	text, err := os.ReadFile(p.SchemaFile)
	if err != nil {
		return nil, mk, err
	}
	reg, err := avro.NewRegistryClient(h.conn.Registry)
	if err != nil {
		return nil, mk, err
	}
	cl, err := h.conn.Kafka.NewClient(loadgen.ProducerOpts()...)
	if err != nil {
		return nil, mk, err
	}
	defer cl.Close()
	cfg := loadgen.StreamConfig{Topic: own, Schema: string(text), SchemaType: p.schemaType(), ImportPaths: []string{filepath.Dir(p.SchemaFile)},
		ReferencePrefix: refPrefix, KeyField: p.DedupeKey, TimeField: p.EventTime, Records: h.opt.records, Seed: streamSeed}
	say("pre-filling %s: %d originals from loadgen (%s)", own, h.opt.records, p.SchemaFile)
	next, start := 10, time.Now()
	st, err := loadgen.RunStream(ctx, cfg, cl, reg, loadgen.Options{RunID: tag, Progress: func(n int) {
		if n*100/h.opt.records >= next {
			say("  loadgen %d%% (%d records, %.0f/s)", next, n, float64(n)/time.Since(start).Seconds())
			next += 10
		}
	}})
	if err != nil {
		return nil, mk, fmt.Errorf("loadgen: %w", err)
	}
	counts := streamBacklog{Topic: own, Originals: st.Originals, Duplicates: st.Duplicates, Poison: st.PoisonTotal()}
	say("backlog %s: %s", own, st)

	ss, err := reg.SchemaByVersion(ctx, own+"-value", -1)
	if err != nil {
		return nil, mk, fmt.Errorf("the schema loadgen registered: %w", err)
	}
	parsed, err := avro.ParseStreamSchema(ctx, reg, ss.ID, ss.Schema, "") // the file's first message, as the demo declares it
	if err != nil {
		return nil, mk, err
	}
	avsc, err := json.MarshalIndent(parsed.Schema, "", "  ")
	if err != nil {
		return nil, mk, err
	}
	mk.avsc = filepath.Join(h.tmp, p.Stream+".avsc")
	if err := os.WriteFile(mk.avsc, append(avsc, '\n'), 0o644); err != nil {
		return nil, mk, err
	}
	var dec streamDecoder
	if p.Format == formatProtobuf {
		dec, err = avro.NewProtoDecoder(reg, avro.DecoderConfig{}, parsed.Message)
	} else {
		dec, err = avro.NewJSONDecoder(reg, avro.DecoderConfig{})
	}
	if err != nil {
		return nil, mk, err
	}
	enc, err := avro.NewTextEncoder[any](reg, string(avsc), avroTopic+"-value")
	if err != nil {
		return nil, mk, err
	}
	say("pre-filling %s: the same records as Avro (%s)", avroTopic, mk.avsc)
	ac := counts
	ac.Topic = avroTopic
	if ac.Transcoded, ac.Copied, err = h.transcode(ctx, own, avroTopic, dec, enc); err != nil {
		return nil, mk, fmt.Errorf("the Avro backlog: %w", err)
	}
	say("backlog %s: %d values written as Avro, %d copied as they were (poison %d)", avroTopic, ac.Transcoded, ac.Copied, ac.Poison)
	mk.counts[p.Format], mk.counts[formatAvro] = counts, ac
	out := map[string]backlog{}
	for f, c := range mk.counts {
		bl := backlog{tag: tag, inference: c.Topic, stats: st}
		if bl.records, err = h.st.endOffsets(ctx, c.Topic); err != nil {
			return nil, mk, err
		}
		out[f] = bl
	}
	if out[formatAvro].records != out[p.Format].records {
		return nil, mk, fmt.Errorf("the Avro backlog has %d records, %s's %d", out[formatAvro].records, p.Format, out[p.Format].records)
	}
	return out, mk, nil
}

// transcode copies every record of from to the same partition of to, with its key: a value
// dec reads is written again with enc, one it refuses is copied as it is. It returns how many
// of each.
func (h *harness) transcode(ctx context.Context, from, to string, dec streamDecoder, enc *avro.Encoder[any]) (written, copied int, err error) {
	ends, err := h.st.adm.ListEndOffsets(ctx, from)
	if err != nil {
		return 0, 0, err
	}
	want := map[int32]int64{}
	offsets := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
			offsets[o.Partition] = kgo.NewOffset().AtStart()
		}
	})
	cons, err := h.conn.Kafka.NewClient(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{from: offsets}), kgo.FetchMaxBytes(16<<20))
	if err != nil {
		return 0, 0, err
	}
	defer cons.Close()
	prod, err := h.conn.Kafka.NewClient(loadgen.ProducerOpts()...)
	if err != nil {
		return 0, 0, err
	}
	defer prod.Close()
	var mu sync.Mutex
	var perr error
	done := func(_ *kgo.Record, err error) {
		if err != nil {
			mu.Lock()
			perr = errors.Join(perr, err)
			mu.Unlock()
		}
	}
	for len(want) > 0 {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			return written, copied, err
		}
		fs.EachRecord(func(r *kgo.Record) {
			value, ok := toAvro(ctx, dec, enc, r.Value)
			if ok {
				written++
			} else {
				copied++
			}
			prod.Produce(ctx, &kgo.Record{Topic: to, Partition: r.Partition, Key: r.Key, Value: value}, done)
			if r.Offset+1 >= want[r.Partition] {
				delete(want, r.Partition)
			}
		})
	}
	if err := prod.Flush(ctx); err != nil {
		return written, copied, err
	}
	mu.Lock()
	defer mu.Unlock()
	return written, copied, perr
}

// toAvro is value read by dec and written with enc, or value itself (false) when dec refuses it.
func toAvro(ctx context.Context, dec streamDecoder, enc *avro.Encoder[any], value []byte) ([]byte, bool) {
	id, body, err := dec.Frame(value)
	if err != nil {
		return value, false
	}
	w, err := dec.Writer(ctx, id)
	if err != nil {
		return value, false
	}
	rec, err := dec.Decode(id, body, w, nil)
	if err != nil {
		return value, false
	}
	out, err := enc.Encode(ctx, rec)
	if err != nil {
		return value, false
	}
	return out, true
}

// streamRunConfig is backflow run's config for one drain: the stage stream-<name> alone, over
// topic, with the run's group and DLQ topic, migrations on start.
func streamRunConfig(p streamPair, topic, group, dlq string) string {
	doc := map[string]any{
		"stages":           []string{"stream-" + p.Stream},
		"shutdown_timeout": "30s",
		"metrics":          map[string]any{"addr": "127.0.0.1:0", "lag_interval": "2s"},
		"sink_clickhouse":  map[string]any{"migrate": true, "dlq_topic": dlq},
		"streams": []map[string]any{{"name": p.Stream, "topic": topic, "group": group,
			"dedupe_key": p.DedupeKey, "event_time": p.EventTime}},
	}
	b, err := yaml.Marshal(doc)
	if err != nil {
		panic(err) // maps of strings always marshal
	}
	return "# backflow run's config for one stream-formats drain (written by bench-harness)\n" + string(b)
}

// deleteSubjects deletes registry subjects, soft then for good (best effort: one that does not
// exist is no error).
func (h *harness) deleteSubjects(subjects ...string) {
	cl := http.Client{Timeout: 10 * time.Second}
	for _, s := range subjects {
		for _, q := range []string{"", "?permanent=true"} {
			req, err := http.NewRequest(http.MethodDelete, strings.TrimRight(h.conn.Registry.URL, "/")+"/subjects/"+s+q, nil)
			if err != nil {
				return
			}
			if resp, err := cl.Do(req); err == nil {
				resp.Body.Close()
			}
		}
	}
}
