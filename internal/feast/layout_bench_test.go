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
	b.Run("hash-fields/request-row", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = HashFields("request_features", et, []Feature{
				{Name: "risk_score", Value: FloatValue(0.5)}, {Name: "verdict", Value: StringValue("REVIEW")},
				{Name: "categories", Value: StringListValue([]string{"demo-fraud"})}, {Name: "latency_ms", Value: Int64Value(431)},
				{Name: "tokens", Value: Int64Value(320)}, {Name: "model", Value: StringValue("model-03")},
			})
		}
	})
}
