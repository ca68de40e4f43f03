// Command bench-ceiling is the yardstick `make bench` measures backflow against: the least a
// program built on backflow's own libraries must do to move the source topics into the same
// ClickHouse tables. franz-go consumes both topics in one consumer group, hamba/avro decodes each
// record with its writer schema (fetched once per id from the registry), and clickhouse-go inserts
// one batch per table with the columns named, then the group commits what was inserted.
//
// It does no dedupe, no moderation, no dead-letter topic, no ledger and no feature store, and it
// skips any record that does not decode. It is not a product: it exists so that the benchmark can
// say how close backflow comes to what the libraries allow.
//
// Connections come from the same variables as backflow (BACKFLOW_KAFKA_BROKERS,
// BACKFLOW_REGISTRY_URL, BACKFLOW_CLICKHOUSE_ADDR, BACKFLOW_CLICKHOUSE_DATABASE). It runs until
// SIGINT or SIGTERM, flushes and commits what it holds, and prints one JSON line of totals.
package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	hamba "github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/backflowhq/backflow/avro"
)

// The same columns, in the same order, as backflow's sink writes (sinks/clickhouse/rows.go).
const (
	inferenceInsert = `INSERT INTO inference_results (source_topic, request_id, model, model_version, event_time, latency_ms,
		prompt_tokens, completion_tokens, cached_tokens, risk_score, labels, label_scores, status, error, region, finish_reason,
		embedding_dim, output_chars, moderation_status, verdict, moderation_risk, categories, hit_count, schema_id, epoch,
		source_partition, source_offset, ingest_time, version, event_time_ms, landed_time_ms) VALUES`
	gatewayInsert = `INSERT INTO gateway_logs (source_topic, request_id, phase, event_time, tenant_id, user_id, route, model,
		status_code, latency_ms, prompt_tokens, completion_tokens, prompt_chars, response_chars, moderation_status, verdict,
		moderation_risk, categories, hit_count, schema_id, epoch, source_partition, source_offset, ingest_time, version,
		event_time_ms, landed_time_ms) VALUES`
)

type options struct {
	group, inferenceTopic, gatewayTopic string
	batchRows                           int
	batchInterval                       time.Duration
}

type totals struct {
	Records  int64  `json:"records"`
	Rows     int64  `json:"rows"`
	Skipped  int64  `json:"skipped"` // did not decode
	Flushes  int64  `json:"flushes"`
	Duration string `json:"duration"`
}

func main() {
	var o options
	flag.StringVar(&o.group, "group", "bench-ceiling", "Kafka consumer group")
	flag.StringVar(&o.inferenceTopic, "inference-topic", avro.TopicInferenceResult, "inference results topic")
	flag.StringVar(&o.gatewayTopic, "gateway-topic", avro.TopicGatewayLog, "gateway log topic")
	flag.IntVar(&o.batchRows, "batch-rows", 10000, "flush at this many records (backflow's sink default)")
	flag.DurationVar(&o.batchInterval, "batch-interval", time.Second, "flush this long after the first buffered record")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		log.Fatalf("bench-ceiling: %v", err)
	}
}

func env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// consumer holds the decode cache and the open batches.
type consumer struct {
	o       options
	reg     *sr.Client
	schemas map[uint32]hamba.Schema
	conn    driver.Conn
	inf, gw driver.Batch
	n       int // rows in the open batches
	polled  int // records polled since the last commit (rows and skips)
	first   time.Time
	t       totals
}

func run(ctx context.Context, o options) error {
	start := time.Now()
	reg, err := sr.NewClient(sr.URLs(env("BACKFLOW_REGISTRY_URL", avro.RegistryConn{}.Endpoint())))
	if err != nil {
		return err
	}
	conn, err := ch.Open(&ch.Options{Protocol: ch.Native, Addr: []string{env("BACKFLOW_CLICKHOUSE_ADDR", "127.0.0.1:19000")},
		Auth: ch.Auth{Database: env("BACKFLOW_CLICKHOUSE_DATABASE", "default"), Username: "default"}})
	if err != nil {
		return err
	}
	defer conn.Close()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(strings.Split(env("BACKFLOW_KAFKA_BROKERS", "127.0.0.1:19092"), ",")...),
		kgo.ConsumerGroup(o.group),
		kgo.ConsumeTopics(o.inferenceTopic, o.gatewayTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	c := &consumer{o: o, reg: reg, schemas: map[uint32]hamba.Schema{}, conn: conn}
	for ctx.Err() == nil {
		wait := o.batchInterval
		if c.n > 0 {
			wait = max(time.Until(c.first.Add(o.batchInterval)), time.Millisecond)
		}
		pctx, cancel := context.WithTimeout(ctx, wait)
		fs := cl.PollRecords(pctx, o.batchRows-c.n)
		cancel()
		if fs.IsClientClosed() {
			break
		}
		var ferr error
		fs.EachRecord(func(r *kgo.Record) {
			if ferr == nil {
				ferr = c.add(ctx, r)
			}
		})
		if ferr != nil {
			cl.AllowRebalance()
			return ferr
		}
		if c.n >= o.batchRows || (c.n > 0 && time.Since(c.first) >= o.batchInterval) || (c.n == 0 && c.polled > 0) {
			if err := c.flush(ctx, cl); err != nil {
				cl.AllowRebalance()
				return err
			}
		}
		cl.AllowRebalance()
	}
	fctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = c.flush(fctx, cl)
	c.t.Duration = time.Since(start).Round(time.Millisecond).String()
	out, _ := json.Marshal(c.t)
	fmt.Println(string(out))
	return err
}

// schema returns the writer schema of id, fetched once.
func (c *consumer) schema(ctx context.Context, id uint32) (hamba.Schema, error) {
	if s, ok := c.schemas[id]; ok {
		return s, nil
	}
	ss, err := c.reg.SchemaByID(ctx, int(id))
	if err != nil {
		return nil, err
	}
	s, err := hamba.Parse(ss.Schema)
	if err != nil {
		return nil, err
	}
	c.schemas[id] = s
	return s, nil
}

// add decodes r and appends its row; a record that does not decode is skipped.
func (c *consumer) add(ctx context.Context, r *kgo.Record) error {
	c.t.Records++
	c.polled++
	v := r.Value
	if len(v) < 5 || v[0] != 0 {
		c.t.Skipped++
		return nil
	}
	id := binary.BigEndian.Uint32(v[1:5])
	s, err := c.schema(ctx, id)
	if err != nil {
		c.t.Skipped++ // unknown schema id (poison); an outage would show as skips too
		return nil
	}
	if c.inf == nil {
		if c.inf, err = c.conn.PrepareBatch(ctx, inferenceInsert); err != nil {
			return err
		}
		if c.gw, err = c.conn.PrepareBatch(ctx, gatewayInsert); err != nil {
			return err
		}
	}
	now := time.Now().UTC()
	version := uint64(r.Offset)
	if r.Topic == c.o.inferenceTopic {
		var in avro.InferenceResult
		if err := hamba.Unmarshal(s, v[5:], &in); err != nil {
			c.t.Skipped++
			return nil
		}
		labels, scores := make([]string, len(in.Labels)), make([]float32, len(in.Labels))
		for i, l := range in.Labels {
			labels[i], scores[i] = l.Name, l.Score
		}
		err = c.inf.Append(r.Topic, in.RequestID, in.Model, in.ModelVersion, in.EventTime, uint32(in.LatencyMs),
			uint32(in.PromptTokens), uint32(in.CompletionTokens), uint32(in.CachedTokens), in.RiskScore, labels, scores,
			in.Status, in.Error, in.Region, in.FinishReason, uint16(len(in.Embedding)), uint32(utf8.RuneCountInString(in.OutputText)),
			"", "", float32(0), []string{}, uint16(0), int32(id), int32(0), r.Partition, r.Offset, now, version,
			in.EventTime.UnixMilli(), int64(0))
	} else {
		var g avro.GatewayLog
		if err := hamba.Unmarshal(s, v[5:], &g); err != nil {
			c.t.Skipped++
			return nil
		}
		err = c.gw.Append(r.Topic, g.RequestID, g.Phase, g.EventTime, g.TenantID, g.UserID, g.Route, g.Model,
			uint16(g.StatusCode), uint32(g.LatencyMs), uint32(g.PromptTokens), uint32(g.CompletionTokens),
			uint32(utf8.RuneCountInString(g.PromptText)), uint32(utf8.RuneCountInString(g.ResponseText)),
			"", "", float32(0), []string{}, uint16(0), int32(id), int32(0), r.Partition, r.Offset, now, version,
			g.EventTime.UnixMilli(), int64(0))
	}
	if err != nil {
		c.t.Skipped++
		return nil
	}
	if c.n == 0 {
		c.first = time.Now()
	}
	c.n++
	c.t.Rows++
	return nil
}

// flush sends both batches, then commits everything polled (all of it is in the batches).
// landed_time_ms is not stamped per row here: appended rows cannot be changed, so the
// ceiling reports no latency.
func (c *consumer) flush(ctx context.Context, cl *kgo.Client) error {
	if c.inf != nil {
		for _, b := range []driver.Batch{c.inf, c.gw} {
			if b.Rows() == 0 {
				b.Abort()
				continue
			}
			if err := b.Send(); err != nil {
				return fmt.Errorf("insert: %w", err)
			}
		}
		c.inf, c.gw, c.n = nil, nil, 0
		c.t.Flushes++
	}
	if c.polled == 0 {
		return nil
	}
	c.polled = 0
	return cl.CommitUncommittedOffsets(ctx)
}
