package clickhouse

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/backflowhq/backflow/sinks"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
)

// Writer is the ClickHouse side of every Sink (sinks.BatchWriter): each WriteBatch is one
// attempt at one Batch, one INSERT. The built-in mapping inserts its tables at once, so
// WriteBatch may be called concurrently: each insert takes a connection of its own from the
// pool. Rows written twice collapse (ReplacingMergeTree by key and version).
type Writer struct {
	conn    driver.Conn
	timeout time.Duration
	// sameBlock: a retried attempt sends the very block the failed one sent (cluster mode,
	// see forCluster).
	sameBlock bool
	// cluster is the connection's settings in cluster mode (zero on one server), and hosts a
	// connection to each of the cluster's hosts once SyncReplicas needed them.
	cluster chschema.Conn
	mu      sync.Mutex
	hosts   []driver.Conn
}

var _ sinks.BatchWriter[Batch] = (*Writer)(nil)

// NewWriter returns the batch writer over conn; each insert may take insertTimeout at most.
func NewWriter(conn driver.Conn, insertTimeout time.Duration) *Writer {
	return &Writer{conn: conn, timeout: insertTimeout}
}

// WriteBatch is one attempt at inserting b: one PrepareBatch with the columns named, b's rows
// appended as b encodes them. Rows that carry landed_time_ms (stamped) get the moment this
// attempt started. Rows the driver cannot append fail with ErrClickHouseRejected.
func (w *Writer) WriteBatch(ctx context.Context, b Batch) error {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	if s, ok := b.(stamped); ok {
		s.stamp(w.landedTime(s))
	}
	return insert(ctx, w.conn, b)
}

// Exec and QueryRow run a statement on the writer's connections (rollup.Conn: the rollup loop
// re-aggregates with INSERT ... SELECT, which has no rows to append). Exec is bounded by the
// insert timeout.
func (w *Writer) Exec(ctx context.Context, query string, args ...any) error {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	return w.conn.Exec(ctx, query, args...)
}

// QueryRow: see Exec.
func (w *Writer) QueryRow(ctx context.Context, query string, args ...any) driver.Row {
	return w.conn.QueryRow(ctx, query, args...)
}

// Retryable implements sinks.BatchWriter with IsRetryable: an outage, a timeout or an
// overloaded server is retried; a rejected batch (IsRejected) is bisected to its bad rows,
// which are dead-lettered; a fatal error (IsFatal) stops the sink uncommitted.
func (w *Writer) Retryable(err error) bool { return IsRetryable(err) }

// Close implements sinks.BatchWriter: it closes the connection pool (and the hosts').
func (w *Writer) Close() error {
	w.mu.Lock()
	for _, h := range w.hosts {
		h.Close()
	}
	w.hosts = nil
	w.mu.Unlock()
	return w.conn.Close()
}

// forCluster sets w up for c: in cluster mode a retried insert must be the same block, byte for
// byte, so that each shard's replicated table drops it if the failed attempt landed there
// after all (insert deduplication by block hash, within the last
// replicated_deduplication_window blocks, 100 by default). The rows are the same slice on
// every attempt; only landed_time_ms would differ, so it keeps the first attempt's stamp.
func (w *Writer) forCluster(c chschema.Conn) *Writer {
	w.sameBlock = c.Cluster != ""
	if c.Cluster != "" {
		w.cluster = c
	}
	return w
}

// SyncReplicas waits until every replica of table's _local tables holds every part any of
// them has (SYSTEM SYNC REPLICA on each host), in cluster mode; nothing on one server. A read
// through a Distributed table asks one replica of each shard, which may not have fetched the
// newest parts yet: the rollup loop (rollup.Syncer) syncs before it re-aggregates from a table
// what a flush has just landed there. A host that cannot be reached fails it (and the rollup is
// retried): an answer without that host's parts could be short.
func (w *Writer) SyncReplicas(ctx context.Context, table string) error {
	if w.cluster.Cluster == "" {
		return nil
	}
	hosts, err := w.hostConns(ctx)
	if err != nil {
		return err
	}
	for _, h := range hosts {
		if err := h.Exec(ctx, "SYSTEM SYNC REPLICA "+chschema.QuoteIdent(table+chschema.LocalSuffix)); err != nil {
			return fmt.Errorf("clickhouse: sync the replicas of %s: %w", table+chschema.LocalSuffix, err)
		}
	}
	return nil
}

// hostConns connects to every host of the cluster, once.
func (w *Writer) hostConns(ctx context.Context) ([]driver.Conn, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.hosts != nil {
		return w.hosts, nil
	}
	hosts, err := chschema.ClusterHosts(ctx, w.conn, w.cluster.Cluster)
	if err != nil {
		return nil, err
	}
	var conns []driver.Conn
	for _, h := range hosts {
		c := w.cluster
		c.Addr = h.Addr
		hc, err := chschema.Open(ctx, c)
		if err != nil {
			for _, o := range conns {
				o.Close()
			}
			return nil, fmt.Errorf("clickhouse: host %s: %w", h.Addr, err)
		}
		conns = append(conns, hc)
	}
	w.hosts = conns
	return conns, nil
}

// landedTime is the landed_time_ms for an attempt at s: its start, or, with sameBlock, the
// stamp a previous attempt at the same rows left on them.
func (w *Writer) landedTime(s stamped) int64 {
	if prev := s.landed(); w.sameBlock && prev != 0 {
		return prev
	}
	return time.Now().UnixMilli()
}
