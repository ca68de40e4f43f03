// Package pipelinetest fills a private ClickHouse database with demo-like data for integration
// tests of what reads the sunk tables (the dashboards): loadgen's traffic on private topics,
// through the real ingest stage, ClickHouse sink and DLQ mirror on the local stack. Start with
// Run. Everything it creates (topics, groups, subjects, the database) is removed when the test
// ends.
package pipelinetest

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/internal/moderation"
	"github.com/backflowhq/backflow/processors/ingest"
	"github.com/backflowhq/backflow/sinks/clickhouse"
	"github.com/backflowhq/backflow/test/testenv"
	"github.com/backflowhq/backflow/tools/loadgen"
)

// Data is what Run made.
type Data struct {
	ClickHouse  clickhouse.Conn // points at the private database
	Conn        driver.Conn     // open on it; closed when the test ends
	Kafka       kafka.Conn
	Admin       *kgo.Client // a plain client on the stack's Kafka; closed when the test ends
	Manifest    *loadgen.Manifest
	Ingest      ingest.Config // its topic and group names
	SinkGroup   string        // the ClickHouse sink's consumer group
	MirrorGroup string        // the DLQ mirror's consumer group
}

// Run migrates a fresh database, sends cfg's traffic (its topics are replaced by private ones),
// then runs ingest, the ClickHouse sink and the DLQ mirror, each until its group committed the
// end of what it reads, and stops them. The test fails if any step does.
func Run(t *testing.T, ctx context.Context, cfg loadgen.Config) *Data {
	t.Helper()
	testenv.Integration(t)
	id := fmt.Sprintf("pt%d", time.Now().UnixNano())
	d := &Data{Kafka: kafka.Conn{Brokers: kafka.ParseBrokers(testenv.Get(testenv.KafkaBrokers)), ClientID: "pipelinetest"}}
	d.ClickHouse, d.Conn = database(t, ctx, id)
	if _, err := clickhouse.Migrate(ctx, d.Conn); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	reg, err := avro.NewRegistryClient(avro.RegistryConn{URL: testenv.Get(testenv.RegistryURL)})
	if err != nil {
		t.Fatal(err)
	}
	if d.Admin, err = d.Kafka.NewClient(); err != nil {
		t.Fatal(err)
	}
	d.Ingest = ingest.Config{Group: "ingest-" + id, InferenceTopic: "inf-" + id, GatewayTopic: "gw-" + id,
		EnrichedTopic: "enriched-" + id, DLQTopic: "dlq-" + id, ControlTopic: "control-" + id,
		BackoffMin: 20 * time.Millisecond, BackoffMax: 500 * time.Millisecond, BreakerOpen: time.Second}
	d.SinkGroup, d.MirrorGroup = "sinkch-"+id, "dlqm-"+id
	sinkDLQ := "sinkdlq-" + id
	if err := loadgen.EnsureTopics(ctx, d.Admin, 3, 1, d.Ingest.InferenceTopic, d.Ingest.GatewayTopic, sinkDLQ); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		adm := kadm.NewClient(d.Admin)
		adm.DeleteTopics(ctx, d.Ingest.InferenceTopic, d.Ingest.GatewayTopic, d.Ingest.EnrichedTopic, d.Ingest.DLQTopic,
			d.Ingest.ControlTopic, d.Ingest.LoopTopic(), d.Ingest.TableTopic(), sinkDLQ)
		adm.DeleteGroup(ctx, d.Ingest.Group)
		adm.DeleteGroup(ctx, d.SinkGroup)
		adm.DeleteGroup(ctx, d.MirrorGroup)
		for _, sub := range []string{d.Ingest.InferenceTopic + "-value", d.Ingest.GatewayTopic + "-value", d.Ingest.EnrichedTopic + "-value"} {
			reg.DeleteSubject(ctx, sub, sr.SoftDelete)
		}
		d.Admin.Close()
	})

	// Traffic.
	cfg.InferenceTopic, cfg.GatewayTopic = d.Ingest.InferenceTopic, d.Ingest.GatewayTopic
	prod, err := d.Kafka.NewClient(loadgen.ProducerOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	st, err := loadgen.Run(ctx, cfg, prod, reg, loadgen.Options{RunID: id, Manifest: &buf})
	prod.Close()
	if err != nil || st.Failed != 0 {
		t.Fatalf("loadgen: %v (%v)", err, st)
	}
	if d.Manifest, err = loadgen.ParseManifest(&buf); err != nil {
		t.Fatal(err)
	}
	t.Logf("loadgen: %v", st)

	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	// Ingest.
	mod, err := moderation.New(moderation.Conn{URL: testenv.Get(testenv.SensitiveURL)})
	if err != nil {
		t.Fatal(err)
	}
	d.runUntilCommitted(t, ctx, "ingest", d.Ingest.Group, []string{d.Ingest.InferenceTopic, d.Ingest.GatewayTopic}, func(ctx context.Context) error {
		return ingest.Run(ctx, d.Ingest, ingest.RunConfig{Kafka: d.Kafka, Registry: reg, Checker: mod, StorageDir: t.TempDir(), Logger: quiet})
	})
	// The ClickHouse sink, then the DLQ mirror.
	sink, err := clickhouse.New(clickhouse.Config{Group: d.SinkGroup, Topic: d.Ingest.EnrichedTopic, DLQTopic: sinkDLQ,
		BatchRows: 2000, BatchInterval: 200 * time.Millisecond, FromStart: true, BackoffMin: 20 * time.Millisecond, BackoffMax: time.Second},
		clickhouse.RunConfig{Kafka: d.Kafka, Registry: reg, ClickHouse: d.ClickHouse, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	d.runUntilCommitted(t, ctx, "sink-clickhouse", d.SinkGroup, []string{d.Ingest.EnrichedTopic}, sink.Run)
	d.runUntilCommitted(t, ctx, "dlq mirror", d.MirrorGroup, []string{d.Ingest.DLQTopic}, func(ctx context.Context) error {
		return clickhouse.RunDLQMirror(ctx, clickhouse.MirrorConfig{Group: d.MirrorGroup, Topic: d.Ingest.DLQTopic,
			BatchInterval: 100 * time.Millisecond, FromStart: true}, d.Kafka, d.ClickHouse, quiet)
	})
	return d
}

// database creates a database of its own on the stack's ClickHouse and drops it when the test
// ends.
func database(t *testing.T, ctx context.Context, id string) (clickhouse.Conn, driver.Conn) {
	t.Helper()
	base := clickhouse.Conn{Addr: testenv.Get(testenv.ClickHouseAddr)}
	admin, err := clickhouse.Open(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	db := "it_" + id
	if err := admin.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+db); err != nil {
			t.Errorf("drop database %s: %v", db, err)
		}
		admin.Close()
	})
	cfg := base
	cfg.Database = db
	conn, err := clickhouse.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return cfg, conn
}

// runUntilCommitted runs stage until group committed the end offset of every partition of
// topics, then stops it and checks it returned no error.
func (d *Data) runUntilCommitted(t *testing.T, ctx context.Context, name, group string, topics []string, stage func(context.Context) error) {
	t.Helper()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- stage(runCtx) }()
	adm := kadm.NewClient(d.Admin)
	for {
		ends, err1 := adm.ListEndOffsets(ctx, topics...)
		offs, err2 := adm.FetchOffsets(ctx, group)
		if err1 == nil && err2 == nil && len(ends) == len(topics) {
			behind, parts := 0, 0
			ends.Each(func(e kadm.ListedOffset) {
				parts++
				if c, ok := offs.Lookup(e.Topic, e.Partition); (!ok && e.Offset > 0) || (ok && c.At != e.Offset) {
					behind++
				}
			})
			if behind == 0 && parts > 0 {
				break
			}
		}
		select {
		case err := <-done:
			stop()
			t.Fatalf("%s stopped before group %s committed the end of %v: %v", name, group, topics, err)
		case <-ctx.Done():
			stop()
			t.Fatalf("%s: group %s did not commit the end of %v: %v %v", name, group, topics, err1, err2)
		case <-time.After(100 * time.Millisecond):
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}
