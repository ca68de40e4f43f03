package clickhouse

import (
	"context"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/internal/dlq"
	"github.com/backflowhq/backflow/internal/rollup"
)

// enrichedMapping is the built-in tables' mapping (New): an enriched record becomes its row in
// inference_results or gateway_logs and its rows in moderation_hits (MapRecord, rows.go).
type enrichedMapping struct {
	dec *avro.Decoder[avro.EnrichedRecord]
	log *slog.Logger
}

// Map decodes rec, waiting out a registry outage, and maps it. A record that does not
// decode for good is a bug of ingest's, not an outage: it goes to the DLQ (with the decoder's
// class) so that the partition is not blocked forever.
func (en *enrichedMapping) Map(ctx context.Context, r Waiter, rec *kgo.Record) (Row, error, error) {
	var e avro.EnrichedRecord
	err := r.Await(ctx, "registry", avro.IsRetryable, func() (err error) {
		e, _, err = en.dec.Decode(ctx, rec.Value)
		return err
	})
	switch {
	case err == nil:
	case !avro.IsRetryable(err):
		en.log.Warn("clickhouse sink: enriched record does not decode; sending it to the DLQ",
			"partition", rec.Partition, "offset", rec.Offset, "err", err)
		return nil, err, nil
	default: // ctx ended during the outage
		return nil, nil, ctx.Err()
	}
	rows, err := MapRecord(&e)
	if err != nil {
		return nil, dlq.WithClass("invalid", err), nil
	}
	return rows, nil, nil
}

// Insert inserts the three tables at once (Lander.InsertAll).
func (en *enrichedMapping) Insert(ctx context.Context, in Lander, rows []Row) (map[int]error, error) {
	var (
		inf    []InferenceRow
		infOwn []int
		gw     []GatewayRow
		gwOwn  []int
		hits   []HitRow
		hitOwn []int
	)
	for i, r := range rows {
		rs := r.(Rows)
		if rs.Inference != nil {
			inf, infOwn = append(inf, *rs.Inference), append(infOwn, i)
		}
		if rs.Gateway != nil {
			gw, gwOwn = append(gw, *rs.Gateway), append(gwOwn, i)
		}
		for _, h := range rs.Hits {
			hits, hitOwn = append(hits, h), append(hitOwn, i)
		}
	}
	return in.InsertAll(ctx, Owned{inferenceBatch(inf), infOwn}, Owned{gatewayBatch(gw), gwOwn}, Owned{hitBatch(hits), hitOwn})
}

// Tally: a record is one row in inference_results or gateway_logs and its hits, at its event
// time, in its epoch.
func (r Rows) Tally() Tally {
	t := Tally{HitRows: len(r.Hits), EventTime: r.EventTime()}
	switch {
	case r.Inference != nil:
		t.Rows, t.Epoch = 1, r.Inference.Epoch
	case r.Gateway != nil:
		t.Rows, t.Epoch = 1, r.Gateway.Epoch
	}
	return t
}

// Marks: a record lands in inference_results or gateway_logs, and its hits in moderation_hits,
// at its event time.
func (r Rows) Marks(add func(source string, at time.Time)) {
	t := r.EventTime()
	switch {
	case r.Inference != nil:
		add(rollup.InferenceResults, t)
	case r.Gateway != nil:
		add(rollup.GatewayLogs, t)
	}
	if len(r.Hits) > 0 {
		add(rollup.ModerationHits, t)
	}
}
