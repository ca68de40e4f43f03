package chaos

import (
	"slices"
	"testing"

	"github.com/backflowhq/backflow/pipelines"
)

// TestStreamStageConfig: the config a stream scenario starts its stage with loads, declares
// the stream on the env's private names, dead-letters into the stream's own DLQ topic and
// marks no rollups; the stream's group is one of the groups the lag counts.
func TestStreamStageConfig(t *testing.T) {
	e := &Env{ID: "c1796600000000000000", Dir: t.TempDir(), Replication: 1, Inf: "inf-c1", GW: "gw-c1", Enriched: "enriched-c1", DLQ: "dlq-c1",
		Control: "control-c1", IngestGroup: "ingest-c1", SinkGroup: "sinkch-c1", MirrorGroup: "mirror-c1", FeaturesGroup: "features-c1"}
	s := e.protoStream()
	path, err := e.Config("stream", "stream-"+s.Name, s.extra())
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"BACKFLOW_KAFKA_BROKERS": "127.0.0.1:1", "BACKFLOW_REGISTRY_URL": "http://127.0.0.1:2",
		"BACKFLOW_CLICKHOUSE_ADDR": "127.0.0.1:3", "BACKFLOW_REDIS_ADDR": "127.0.0.1:4", "BACKFLOW_SENSITIVE_WORDS_URL": "http://127.0.0.1:5"}
	l, err := pipelines.Load(path, func(k string) string { return vars[k] })
	if err != nil {
		t.Fatal(err)
	}
	c := l.Config
	if len(c.Streams) != 1 || len(c.Stages) != 1 || c.Stages[0] != "stream-shop-order" {
		t.Fatalf("stages %v, streams %+v", c.Stages, c.Streams)
	}
	st := c.Streams[0].WithDefaults()
	if st.Topic != "shop-"+e.ID || st.Group != "stream-shop-"+e.ID || st.DedupeKey != "order_id" || st.EventTime != "created" || st.Table != "shop_order" {
		t.Errorf("stream %+v", st)
	}
	if c.SinkClickHouse.DLQTopic != "sdlq-"+e.ID || c.SinkClickHouse.Rollups {
		t.Errorf("sink_clickhouse: dlq_topic %q, rollups %v; want %q and false", c.SinkClickHouse.DLQTopic, c.SinkClickHouse.Rollups, "sdlq-"+e.ID)
	}
	e.StreamGroups = map[string][]string{s.Group: {s.Topic}}
	if g := e.Groups(); !slices.Equal(g[s.Group], []string{s.Topic}) || len(g) != 6 {
		t.Errorf("groups %v", g)
	}
}
