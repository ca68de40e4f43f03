package testenv

import (
	"context"
	"errors"
	"testing"

	goredis "github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/internal/dlq"
	"github.com/backflowhq/backflow/internal/feast"
	"github.com/backflowhq/backflow/internal/kafka"
)

// What tests read back to check a stage: the dead-letter entries, and features in Redis.

// DLQEntries reads topic from its start to its end (dlq.Scan) and returns its entries in
// partition and offset order; a record that is not a DLQ entry fails t.
func DLQEntries(t testing.TB, ctx context.Context, k kafka.Conn, topic string) []dlq.Entry {
	t.Helper()
	var out []dlq.Entry
	if err := dlq.Scan(ctx, k, topic, func(r *kgo.Record) error {
		e, err := dlq.Decode(r)
		if err != nil {
			return err
		}
		out = append(out, e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// Int64Feature reads the Int64 value of the feature view:feat from the Redis hash key (Feast's
// layout, internal/feast). found is false, with no error, when the hash or its field is
// absent: a caller that needs the feature says so itself.
func Int64Feature(ctx context.Context, rdb goredis.UniversalClient, key, view, feat string) (v int64, found bool, err error) {
	b, err := rdb.HGet(ctx, key, feast.FieldKey(view, feat)).Bytes()
	if errors.Is(err, goredis.Nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	v, err = feast.DecodeInt64Value(b)
	return v, err == nil, err
}
