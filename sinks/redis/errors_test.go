package redis

import (
	"errors"
	"fmt"
	"testing"
)

// TestIsRetryableWaitsOutAFailover: a Redis Cluster whose master is down, before its
// replica took over, is an outage that sink-features waits out at start-up, not a reason to
// stop.
func TestIsRetryableWaitsOutAFailover(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("redis cluster a:1: %w", ErrClusterDown), true},
		{errors.New("CLUSTERDOWN The cluster is down"), true},
		{errors.New("LOADING Redis is loading the dataset in memory"), true},
		{errors.New("WRONGPASS invalid username-password pair"), false},
	} {
		if got := IsRetryable(tt.err); got != tt.want {
			t.Errorf("IsRetryable(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}
