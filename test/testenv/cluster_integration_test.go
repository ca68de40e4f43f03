package testenv_test

import (
	"context"
	"testing"
	"time"

	"github.com/backflowhq/backflow/test/testenv"
)

// TestClusterUpConvergesAfterAMasterCrash kills the Redis master of slot 0 and, once its
// replica has taken over, brings it back with deploy/local/stack --cluster up (StartMissing).
// When up returns, the cluster must have settled, checked from every node apart from the
// script: cluster_state:ok, one view of masters and slots on all six, 3 masters and 3
// replicas with their links up, and the crashed node back as a replica. Before up waited for
// this, it returned while the old master was still rejoining, and the next user of the stack
// found "some slot has no master".
func TestClusterUpConvergesAfterAMasterCrash(t *testing.T) {
	testenv.Integration(t)
	cl := testenv.Cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if _, err := cl.RedisConverged(ctx); err != nil {
		t.Fatalf("the cluster stack was not converged to begin with: %v", err)
	}
	master, err := cl.RedisSlotMaster(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	cl.Kill(t, master)
	t.Logf("killed %s, the master of slot 0", master)

	// Wait for the failover: another node serves slot 0.
	deadline := time.Now().Add(90 * time.Second)
	for {
		now, err := cl.RedisSlotMaster(ctx, 0)
		if err == nil && now != master {
			t.Logf("%s took over slot 0", now)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no replica took over slot 0 from %s within 90 s (last: %q, %v)", master, now, err)
		}
		time.Sleep(500 * time.Millisecond)
	}

	start := time.Now()
	if err := cl.StartMissing(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("deploy/local/stack --cluster up returned in %v", time.Since(start).Round(time.Millisecond))
	view, err := cl.RedisConverged(ctx)
	if err != nil {
		t.Fatalf("up returned before the Redis Cluster converged: %v", err)
	}
	addr := cl.List(testenv.ClusterRedisAddrs)[nodeIndex(t, master)]
	for _, n := range view {
		if n.Addr == addr {
			if n.Master {
				t.Fatalf("%s (%s) came back as a master, want a replica of the node that took over: %+v", master, addr, view)
			}
			return
		}
	}
	t.Fatalf("%s (%s) is not in the cluster's view: %+v", master, addr, view)
}

// nodeIndex is i for redis-(i+1).
func nodeIndex(t *testing.T, name string) int {
	var i int
	for i = 1; i <= 6; i++ {
		if name == "redis-"+string(rune('0'+i)) {
			return i - 1
		}
	}
	t.Fatalf("not a Redis node name: %q", name)
	return 0
}
