// Package pipelinetest gives integration tests a private pipeline on the shared local stack
// (Env: names made from one ID, clients, and the removal of everything it made when the test
// ends), and fills a private ClickHouse database with demo-like data for tests of what reads
// the sunk tables (the dashboards): loadgen's traffic on private topics, through the real
// ingest stage, ClickHouse sink and DLQ mirror. Start with NewEnv, or Run.
package pipelinetest

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/backflowhq/backflow/processors/ingest"
	"github.com/backflowhq/backflow/sinks/clickhouse"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
	"github.com/backflowhq/backflow/sinks/clickhouse/dlqmirror"
	"github.com/backflowhq/backflow/test/testenv"
	"github.com/backflowhq/backflow/tools/loadgen"
)

// Data is what Run made.
type Data struct {
	*Env
	ClickHouse chschema.Conn // points at the private database
	Conn       driver.Conn   // open on it; closed when the test ends
	Manifest   *loadgen.Manifest
}

// Run migrates a fresh database, sends cfg's traffic (its topics are replaced by private ones),
// then runs ingest, the ClickHouse sink and the DLQ mirror, each until its group committed the
// end of what it reads, and stops them. The test fails if any step does.
func Run(t *testing.T, ctx context.Context, cfg loadgen.Config) *Data {
	t.Helper()
	return RunWith(t, ctx, cfg, nil)
}

// RunWith is Run with more source records: after cfg's traffic is sent, and before ingest
// starts, produce writes what it wants to the private source topics (d.Ingest.InferenceTopic,
// d.Ingest.GatewayTopic), for example records of a writer schema loadgen does not use.
func RunWith(t *testing.T, ctx context.Context, cfg loadgen.Config, produce func(ctx context.Context, d *Data) error) *Data {
	t.Helper()
	d := &Data{Env: NewEnv(t, "pt")}
	d.ClickHouse, d.Conn = d.Database(t, ctx, "")
	if _, err := chschema.Migrate(ctx, d.Conn); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	d.SourceTopics(t, ctx, 3, d.SinkDLQ)
	d.Manifest = d.Load(t, ctx, cfg)
	if produce != nil {
		if err := produce(ctx, d); err != nil {
			t.Fatalf("produce more source records: %v", err)
		}
	}

	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	mod := d.Moderation(t)
	testenv.RunUntilCommitted(t, ctx, d.Admin, "ingest", d.Ingest.Group, []string{d.Ingest.InferenceTopic, d.Ingest.GatewayTopic}, func(ctx context.Context) error {
		return ingest.Run(ctx, d.Ingest, ingest.RunConfig{Kafka: d.Kafka, Registry: d.Registry, SensitiveWords: mod, StorageDir: t.TempDir(), Logger: quiet})
	})
	// The ClickHouse sink, then the DLQ mirror.
	sink, err := clickhouse.New(clickhouse.Config{Group: d.SinkGroup, Topic: d.Ingest.EnrichedTopic, DLQTopic: d.SinkDLQ,
		BatchRows: 2000, BatchInterval: 200 * time.Millisecond, FromStart: true, BackoffMin: 20 * time.Millisecond, BackoffMax: time.Second},
		clickhouse.RunConfig{Kafka: d.Kafka, Registry: d.Registry, ClickHouse: d.ClickHouse, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	testenv.RunUntilCommitted(t, ctx, d.Admin, "sink-clickhouse", d.SinkGroup, []string{d.Ingest.EnrichedTopic}, sink.Run)
	testenv.RunUntilCommitted(t, ctx, d.Admin, "dlq mirror", d.MirrorGroup, []string{d.Ingest.DLQTopic}, func(ctx context.Context) error {
		return dlqmirror.Run(ctx, dlqmirror.Config{Group: d.MirrorGroup, Topic: d.Ingest.DLQTopic,
			BatchInterval: 100 * time.Millisecond, FromStart: true}, d.Kafka, d.ClickHouse, quiet)
	})
	return d
}
