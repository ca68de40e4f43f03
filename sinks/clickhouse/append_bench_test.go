package clickhouse

import (
	"context"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
	"github.com/backflowhq/backflow/test/testenv"
)

// BenchmarkAppend is the ClickHouse append per row on the real server (deploy/local/stack):
// AppendStruct of an inference row against a positional Append of the same values, as
// bench/ceiling does; a flush's three tables appended column by column, as the sink does,
// against AppendStruct per row; and Send of a whole 10,000-row batch (network and server
// included). Rows are appended to a batch prepared on a database of the benchmark's own, and
// the appending batches are aborted, so nothing is written but by send.
func BenchmarkAppend(b *testing.B) {
	testenv.Integration(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	db := testenv.ID("bench_")
	testenv.Database(b, ctx, db, func(ctx context.Context) (driver.Conn, error) {
		return chschema.Open(ctx, chschema.Conn{Addr: testenv.Get(testenv.ClickHouseAddr)})
	})
	conn, err := chschema.Open(ctx, chschema.Conn{Addr: testenv.Get(testenv.ClickHouseAddr), Database: db})
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	if _, err := chschema.Migrate(ctx, conn); err != nil {
		b.Fatal(err)
	}
	rows, err := MapRecord(&benchEnriched()[1])
	if err != nil {
		b.Fatal(err)
	}
	row := *rows.Inference
	row.LandedTimeMs = time.Now().UnixMilli()
	sql := chschema.InsertSQL(TableInference, InferenceRow{})
	const batch = 10000
	prepare := func(b *testing.B) driver.Batch {
		bt, err := conn.PrepareBatch(ctx, sql)
		if err != nil {
			b.Fatal(err)
		}
		return bt
	}
	appendRows := func(name string, add func(driver.Batch, *InferenceRow) error) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			bt := prepare(b)
			n := 0
			for b.Loop() {
				if err := add(bt, &row); err != nil {
					b.Fatal(err)
				}
				if n++; n == batch {
					b.StopTimer()
					bt.Abort()
					bt, n = prepare(b), 0
					b.StartTimer()
				}
			}
			bt.Abort()
		})
	}
	appendRows("struct", func(bt driver.Batch, r *InferenceRow) error { return bt.AppendStruct(r) })
	appendRows("values", func(bt driver.Batch, r *InferenceRow) error {
		return bt.Append(r.SourceTopic, r.RequestID, r.Model, r.ModelVersion, r.EventTime, r.LatencyMs, r.PromptTokens,
			r.CompletionTokens, r.CachedTokens, r.RiskScore, r.Labels, r.LabelScores, r.Status, r.Error, r.Region, r.FinishReason,
			r.EmbeddingDim, r.OutputChars, r.ModerationStatus, r.Verdict, r.ModerationRisk, r.Categories, r.HitCount, r.SchemaID,
			r.Epoch, r.SourcePartition, r.SourceOffset, r.IngestTime, r.Version, r.EventTimeMs, r.LandedTimeMs)
	})
	// A flush of 10,000 records in loadgen's mix (per request: a REQUEST, an inference result
	// and a RESPONSE, one of them with a hit), its rows appended to one batch per table as
	// WriteBatch appends them (columns), and as it did before, with AppendStruct per row
	// (struct). ns/record is per source record.
	var inf []InferenceRow
	var gw []GatewayRow
	var hits []HitRow
	for i := range batch {
		recs := benchEnriched()
		e := recs[i%len(recs)]
		e.SourceOffset = int64(i)
		r, err := MapRecord(&e)
		if err != nil {
			b.Fatal(err)
		}
		if r.Inference != nil {
			inf = append(inf, *r.Inference)
		} else {
			gw = append(gw, *r.Gateway)
		}
		hits = append(hits, r.Hits...)
	}
	sqls := []string{chschema.InsertSQL(TableInference, InferenceRow{}), chschema.InsertSQL(TableGateway, GatewayRow{}), chschema.InsertSQL(TableHits, HitRow{})}
	flush := func(name string, add func(bts []driver.Batch) error) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				bts := make([]driver.Batch, len(sqls))
				for i, q := range sqls {
					if bts[i], err = conn.PrepareBatch(ctx, q); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				if err := add(bts); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				for i, bt := range bts {
					if bt.Rows() != []int{len(inf), len(gw), len(hits)}[i] {
						b.Fatalf("batch %d holds %d rows", i, bt.Rows())
					}
					bt.Abort()
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/record")
		})
	}
	flush("flush-struct", func(bts []driver.Batch) error {
		for i := range inf {
			if err := bts[0].AppendStruct(&inf[i]); err != nil {
				return err
			}
		}
		for i := range gw {
			if err := bts[1].AppendStruct(&gw[i]); err != nil {
				return err
			}
		}
		for i := range hits {
			if err := bts[2].AppendStruct(&hits[i]); err != nil {
				return err
			}
		}
		return nil
	})
	flush("flush-columns", func(bts []driver.Batch) error {
		if err := appendColumns(bts[0], inferenceColumns(inf)); err != nil {
			return err
		}
		if err := appendColumns(bts[1], gatewayColumns(gw)); err != nil {
			return err
		}
		return appendColumns(bts[2], hitColumns(hits))
	})
	b.Run("send-10000", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			bt := prepare(b)
			for range batch {
				if err := bt.AppendStruct(&row); err != nil {
					b.Fatal(err)
				}
			}
			if err := bt.Send(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "rows/s")
	})
}
