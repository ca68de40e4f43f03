package dlqmirror

import (
	"context"
	"fmt"
	"time"

	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/internal/rollup"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
)

// dlq_first (rollup.DLQFirst) is partitioned by the day of its origins' time (migration 0019).
// The DLQ mirror drops the days older than the dead-letter topic's retention: once an hour (and
// on its first flush) it reads the topic's retention.ms and drops every partition whose whole
// day lies before now minus it. A topic kept for ever (retention.ms = -1) keeps every day. The
// day of origin time 0 (an origin whose record had no time) is never dropped.

// dlqSweepEvery is how often the DLQ mirror drops dlq_first's expired days; dlqSweepRetry how
// soon it tries again after a failure (the mirror runs on: the sweep is housekeeping);
// dlqSweepTimeout bounds one sweep, which runs inside a flush.
const (
	dlqSweepEvery   = time.Hour
	dlqSweepRetry   = time.Minute
	dlqSweepTimeout = 30 * time.Second
)

// DropExpiredDLQFirst drops the partitions of dlq_first whose day ends at or before now minus
// retention, and returns their ids (days as YYYYMMDD). retention 0 drops nothing. c says where
// the table lives: on one server it is dlq_first itself; in cluster mode the days are read
// through the Distributed table and dropped ON CLUSTER from dlq_first_local.
func DropExpiredDLQFirst(ctx context.Context, conn rollup.Conn, c chschema.Conn, retention time.Duration, now time.Time) ([]uint32, error) {
	if retention <= 0 {
		return nil, nil
	}
	cutoff := now.Add(-retention).UTC().Truncate(24 * time.Hour) // days before it are wholly expired
	var days []uint32
	q := fmt.Sprintf("SELECT arraySort(groupUniqArray(toYYYYMMDD(origin_time))) FROM %s WHERE origin_time >= toDateTime(86400) AND origin_time < toDateTime(%d)",
		rollup.DLQFirst, cutoff.Unix())
	if err := conn.QueryRow(ctx, q).Scan(&days); err != nil {
		return nil, fmt.Errorf("dlq_first: expired days: %w", err)
	}
	table := rollup.DLQFirst
	if c.Cluster != "" {
		table = chschema.QuoteIdent(c.DatabaseName()) + "." + rollup.DLQFirst + chschema.LocalSuffix + " ON CLUSTER " + c.Cluster
	}
	for i, d := range days {
		if err := conn.Exec(ctx, fmt.Sprintf("ALTER TABLE %s DROP PARTITION %d", table, d)); err != nil {
			return days[:i], fmt.Errorf("dlq_first: drop day %d: %w", d, err)
		}
	}
	return days, nil
}

// topicRetention reads topic's retention.ms, on a client of its own for the one sweep: the loop
// lends its mappings no Kafka client, and the sweep runs once an hour.
func topicRetention(ctx context.Context, k kafka.Conn, topic string) (time.Duration, error) {
	cl, err := k.NewClient()
	if err != nil {
		return 0, fmt.Errorf("dlq mirror: kafka client for the retention of %s: %w", topic, err)
	}
	defer cl.Close()
	return kafka.TopicRetention(ctx, cl, topic)
}
