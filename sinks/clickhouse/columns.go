package clickhouse

import (
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// A batch is appended column by column: each row type lists its columns in the order of its
// `ch` tags (the order schema.InsertSQL names them), one typed slice a column, and each slice goes to
// the driver whole with Batch.Column(i).Append. That costs no reflection per row (AppendStruct)
// and no boxing per value (a positional Append). TestColumnsFollowTags holds every list to its
// struct's tags.

// col is the column of rows that f reads.
func col[T, V any](rows []T, f func(*T) V) []V {
	out := make([]V, len(rows))
	for i := range rows {
		out[i] = f(&rows[i])
	}
	return out
}

func inferenceColumns(rs []InferenceRow) []any {
	type R = InferenceRow
	return []any{
		col(rs, func(x *R) string { return x.SourceTopic }),
		col(rs, func(x *R) string { return x.RequestID }),
		col(rs, func(x *R) string { return x.Model }),
		col(rs, func(x *R) string { return x.ModelVersion }),
		col(rs, func(x *R) time.Time { return x.EventTime }),
		col(rs, func(x *R) uint32 { return x.LatencyMs }),
		col(rs, func(x *R) uint32 { return x.PromptTokens }),
		col(rs, func(x *R) uint32 { return x.CompletionTokens }),
		col(rs, func(x *R) uint32 { return x.CachedTokens }),
		col(rs, func(x *R) float32 { return x.RiskScore }),
		col(rs, func(x *R) []string { return x.Labels }),
		col(rs, func(x *R) []float32 { return x.LabelScores }),
		col(rs, func(x *R) string { return x.Status }),
		col(rs, func(x *R) *string { return x.Error }),
		col(rs, func(x *R) string { return x.Region }),
		col(rs, func(x *R) *string { return x.FinishReason }),
		col(rs, func(x *R) uint16 { return x.EmbeddingDim }),
		col(rs, func(x *R) uint32 { return x.OutputChars }),
		col(rs, func(x *R) string { return x.ModerationStatus }),
		col(rs, func(x *R) string { return x.Verdict }),
		col(rs, func(x *R) float32 { return x.ModerationRisk }),
		col(rs, func(x *R) []string { return x.Categories }),
		col(rs, func(x *R) uint16 { return x.HitCount }),
		col(rs, func(x *R) int32 { return x.SchemaID }),
		col(rs, func(x *R) int32 { return x.Epoch }),
		col(rs, func(x *R) int32 { return x.SourcePartition }),
		col(rs, func(x *R) int64 { return x.SourceOffset }),
		col(rs, func(x *R) time.Time { return x.IngestTime }),
		col(rs, func(x *R) uint64 { return x.Version }),
		col(rs, func(x *R) int64 { return x.EventTimeMs }),
		col(rs, func(x *R) int64 { return x.LandedTimeMs }),
	}
}

func gatewayColumns(rs []GatewayRow) []any {
	type R = GatewayRow
	return []any{
		col(rs, func(x *R) string { return x.SourceTopic }),
		col(rs, func(x *R) string { return x.RequestID }),
		col(rs, func(x *R) string { return x.Phase }),
		col(rs, func(x *R) time.Time { return x.EventTime }),
		col(rs, func(x *R) string { return x.TenantID }),
		col(rs, func(x *R) string { return x.UserID }),
		col(rs, func(x *R) string { return x.Route }),
		col(rs, func(x *R) string { return x.Model }),
		col(rs, func(x *R) uint16 { return x.StatusCode }),
		col(rs, func(x *R) uint32 { return x.LatencyMs }),
		col(rs, func(x *R) uint32 { return x.PromptTokens }),
		col(rs, func(x *R) uint32 { return x.CompletionTokens }),
		col(rs, func(x *R) uint32 { return x.PromptChars }),
		col(rs, func(x *R) uint32 { return x.ResponseChars }),
		col(rs, func(x *R) string { return x.ModerationStatus }),
		col(rs, func(x *R) string { return x.Verdict }),
		col(rs, func(x *R) float32 { return x.ModerationRisk }),
		col(rs, func(x *R) []string { return x.Categories }),
		col(rs, func(x *R) uint16 { return x.HitCount }),
		col(rs, func(x *R) int32 { return x.SchemaID }),
		col(rs, func(x *R) int32 { return x.Epoch }),
		col(rs, func(x *R) int32 { return x.SourcePartition }),
		col(rs, func(x *R) int64 { return x.SourceOffset }),
		col(rs, func(x *R) time.Time { return x.IngestTime }),
		col(rs, func(x *R) uint64 { return x.Version }),
		col(rs, func(x *R) int64 { return x.EventTimeMs }),
		col(rs, func(x *R) int64 { return x.LandedTimeMs }),
	}
}

func hitColumns(rs []HitRow) []any {
	type R = HitRow
	return []any{
		col(rs, func(x *R) string { return x.SourceTopic }),
		col(rs, func(x *R) string { return x.RequestID }),
		col(rs, func(x *R) string { return x.Phase }),
		col(rs, func(x *R) uint32 { return x.Start }),
		col(rs, func(x *R) uint32 { return x.End }),
		col(rs, func(x *R) string { return x.Word }),
		col(rs, func(x *R) string { return x.Category }),
		col(rs, func(x *R) time.Time { return x.EventTime }),
		col(rs, func(x *R) int32 { return x.Epoch }),
		col(rs, func(x *R) int32 { return x.SourcePartition }),
		col(rs, func(x *R) int64 { return x.SourceOffset }),
		col(rs, func(x *R) uint64 { return x.Version }),
	}
}

func ledgerColumns(rs []LedgerRow) []any {
	type R = LedgerRow
	return []any{
		col(rs, func(x *R) string { return x.BatchID }),
		col(rs, func(x *R) string { return x.Group }),
		col(rs, func(x *R) string { return x.Topic }),
		col(rs, func(x *R) int32 { return x.Partition }),
		col(rs, func(x *R) int64 { return x.MinOffset }),
		col(rs, func(x *R) int64 { return x.MaxOffset }),
		col(rs, func(x *R) uint32 { return x.Rows }),
		col(rs, func(x *R) uint32 { return x.HitRows }),
		col(rs, func(x *R) int32 { return x.Epoch }),
		col(rs, func(x *R) time.Time { return x.FlushedAt }),
		col(rs, func(x *R) time.Time { return x.MaxEventTime }),
	}
}

// appendColumns appends cols, one slice per column in the batch's column order, to b. A column
// the driver cannot take (a value out of its type's range, say) fails with
// ErrClickHouseRejected, so the sink bisects the batch down to the rows at fault.
func appendColumns(b driver.Batch, cols []any) error {
	if n := len(b.Columns()); n != len(cols) {
		return fmt.Errorf("%w: the insert has %d columns and the rows %d", ErrClickHouseFatal, n, len(cols))
	}
	for i, c := range cols {
		if err := b.Column(i).Append(c); err != nil {
			return fmt.Errorf("%w: column %d: %w", ErrClickHouseRejected, i, err)
		}
	}
	return nil
}
