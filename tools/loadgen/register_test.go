package loadgen

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/backflowhq/backflow/avro"
)

// TestRunWaitsForAnOverloadedRegistry: a registry that answers the first schema registrations
// with HTTP 500 (an overloaded registry's "acquisition timeout") is waited for: the run sends
// every request once it takes the schemas, and none is lost or failed.
func TestRunWaitsForAnOverloadedRegistry(t *testing.T) {
	fake := srfake.New()
	t.Cleanup(fake.Close)
	upstream, err := url.Parse(fake.URL())
	if err != nil {
		t.Fatal(err)
	}
	var refused, registered atomic.Int64
	proxy := httputil.NewSingleHostReverseProxy(upstream)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			if refused.Load() < 3 {
				refused.Add(1)
				http.Error(w, `{"error_code":500,"message":"java.sql.SQLException: Sorry, acquisition timeout!"}`, http.StatusInternalServerError)
				return
			}
			registered.Add(1)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	reg, err := avro.NewRegistryClient(avro.RegistryConn{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	cl := fakeCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := Run(ctx, Config{Requests: 20, Seed: 1}, cl, reg, Options{RunID: "reg"})
	if err != nil {
		t.Fatalf("run: %v (%v)", err, st)
	}
	if refused.Load() != 3 || registered.Load() < 2 || st.Requests != 20 || st.Failed != 0 || st.PerTopic["model-inference-result"] < 20 {
		t.Fatalf("%d registrations refused, %d taken; stats %v: want 3 refused, then 20 requests sent, none failed", refused.Load(), registered.Load(), st)
	}
}

// fakeCluster is a producer client (ProducerOpts) on an in-process cluster that holds the two
// source topics, 3 partitions each; both close when t ends.
func fakeCluster(t *testing.T) *kgo.Client {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "model-inference-result", "gateway-log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	cl, err := kgo.NewClient(append(ProducerOpts(), kgo.SeedBrokers(cluster.ListenAddrs()...))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}
