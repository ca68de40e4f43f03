package clickhouse

import (
	"testing"

	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
)

// TestLandedTimeKeptAcrossAttempts: in cluster mode a retried insert keeps the first
// attempt's landed_time_ms (the same block, which the replicated tables drop if it landed);
// on one server each attempt stamps its own start, as before.
func TestLandedTimeKeptAcrossAttempts(t *testing.T) {
	rows := inferenceBatch([]InferenceRow{{LandedTimeMs: 1234}}).(stamped)
	if got := (&Writer{}).forCluster(chschema.Conn{Cluster: "c"}).landedTime(rows); got != 1234 {
		t.Fatalf("cluster mode, stamped rows: landed %d, want 1234", got)
	}
	if got := (&Writer{}).forCluster(chschema.Conn{}).landedTime(rows); got == 1234 {
		t.Fatal("single mode kept the old stamp")
	}
	if got := (&Writer{}).forCluster(chschema.Conn{Cluster: "c"}).landedTime(gatewayBatch([]GatewayRow{{}}).(stamped)); got == 0 {
		t.Fatal("cluster mode, fresh rows: no stamp")
	}
}
