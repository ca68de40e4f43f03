package kafka_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/test/testenv"
)

// TestLagMonitor: 10 records on partition 0 and 4 on partition 1 of a real topic; a group
// commits 4 and 1. A poll must export committed 4/1, end 10/4 and lag 6/3. After the group
// commits 10/4, the next poll exports lag 0 and a positive consume rate on both partitions.
func TestLagMonitor(t *testing.T) {
	cfg := testenv.Kafka(t, "backflow-smoke")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topic := testenv.CreateTopic(t, ctx, cfg, "lag", 2)
	group := testenv.ID("lag-")
	testenv.Groups(t, cfg, group)
	cl, err := cfg.NewClient(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := range 14 {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(min(i/10, 1)), Value: []byte("x")})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	commit := func(p0, p1 int64) {
		t.Helper()
		var os kadm.Offsets
		os.AddOffset(topic, 0, p0, -1)
		os.AddOffset(topic, 1, p1, -1)
		if err := adm.CommitAllOffsets(ctx, group, os); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	mon := kafka.NewLagMonitor(cl, []string{group}, time.Second, reg, slog.New(slog.DiscardHandler))
	gauge := func(name string, p string) float64 {
		t.Helper()
		v, err := testutil.GatherAndCount(reg, name)
		if err != nil || v == 0 {
			t.Fatalf("%s: %d series, %v", name, v, err)
		}
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["group"] == group && labels["topic"] == topic && labels["partition"] == p {
					return m.GetGauge().GetValue()
				}
			}
		}
		t.Fatalf("%s has no series for partition %s", name, p)
		return 0
	}

	commit(4, 1)
	if err := mon.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, p string
		want    float64
	}{
		{kafka.MetricConsumerCommitted, "0", 4}, {kafka.MetricConsumerCommitted, "1", 1},
		{kafka.MetricConsumerEnd, "0", 10}, {kafka.MetricConsumerEnd, "1", 4},
		{kafka.MetricConsumerLag, "0", 6}, {kafka.MetricConsumerLag, "1", 3},
		{kafka.MetricConsumerRate, "0", 0},
	} {
		if got := gauge(c.name, c.p); got != c.want {
			t.Errorf("%s{partition=%s} = %v, want %v", c.name, c.p, got, c.want)
		}
	}
	time.Sleep(100 * time.Millisecond)
	commit(10, 4)
	if err := mon.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"0", "1"} {
		if lag, rate := gauge(kafka.MetricConsumerLag, p), gauge(kafka.MetricConsumerRate, p); lag != 0 || rate <= 0 {
			t.Errorf("partition %s after catching up: lag %v (want 0), rate %v (want > 0)", p, lag, rate)
		}
	}
}
