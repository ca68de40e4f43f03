package feast

import (
	"testing"
	"time"
)

// BenchmarkFeastKeys is the feature sink's serialization per written entity: Feast's entity key
// (v3) with the project, the murmur3 hash field names, and the Value protos of one
// request_features row.
func BenchmarkFeastKeys(b *testing.B) {
	et := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	b.Run("redis-key/request", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = RedisKey("backflow", StringEntity("request_id", "20261129T120000-00000042"))
		}
	})
	b.Run("redis-key/user", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = RedisKey("backflow", StringEntity("tenant_id", "tenant-007"), StringEntity("user_id", "user-00042"))
		}
	})
	b.Run("field-key", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = FieldKey("request_features", "risk_score")
		}
	})
	view := NewView("request_features", "risk_score", "verdict", "categories", "latency_ms", "tokens", "model")
	b.Run("row/request", func(b *testing.B) {
		b.ReportAllocs()
		var args []any
		for b.Loop() {
			args = view.AppendRow(args[:0], et, FloatValue(0.5), StringValue("REVIEW"),
				StringListValue([]string{"demo-fraud"}), Int64Value(431), Int64Value(320), StringValue("model-03"))
		}
	})
}
