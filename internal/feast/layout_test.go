package feast

import (
	"encoding/hex"
	"testing"
	"time"
)

// The golden bytes below were computed once with Feast 0.67.0's own Python code
// (feast.infra.online_stores.helpers._redis_key / _mmh3, ValueProto.SerializeToString,
// Timestamp.SerializeToString, entity_key_serialization_version=3).

func TestRedisKeyGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  string
		want string
	}{
		{"tenant", RedisKey("backflow", StringEntity("tenant_id", "tenant-007")),
			"01000000020000000900000074656e616e745f6964020000000a00000074656e616e742d3030376261636b666c6f77"},
		// Two join keys given out of order: Feast sorts them by name; int64 is 8 bytes LE.
		{"multi", RedisKey("backflow", StringEntity("tenant_id", "t1"), EntityValue{JoinKey: "model", Int64: -5, IsInt: true}),
			"0200000002000000050000006d6f64656c020000000900000074656e616e745f69640400000008000000fbffffffffffffff020000000200000074316261636b666c6f77"},
	} {
		if got := hex.EncodeToString([]byte(tc.got)); got != tc.want {
			t.Errorf("%s: key = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestMurmur3Golden(t *testing.T) {
	for in, want := range map[string]string{
		"request_features:risk_score":   "594cb0f5",
		"tenant_features:request_count": "99d07fd3",
		"model_features:latency_max_ms": "a72892f0",
		"a":                             "b269253c",
		"ab":                            "5fd7bf9b",
		"abc":                           "fa93ddb3",
		"abcd":                          "6a67ed43",
		"ünï":                           "eb66a736",
	} {
		view, feat := splitColon(in)
		var got string
		if feat == "" {
			var b [4]byte
			h := Murmur3([]byte(in), 0)
			b[0], b[1], b[2], b[3] = byte(h), byte(h>>8), byte(h>>16), byte(h>>24)
			got = hex.EncodeToString(b[:])
		} else {
			got = hex.EncodeToString([]byte(FieldKey(view, feat)))
		}
		if got != want {
			t.Errorf("mmh3(%q) = %s, want %s", in, got, want)
		}
	}
}

func splitColon(s string) (string, string) {
	for i := 0; i < len(s); i++ {
		if s[i] == ':' {
			return s[:i], s[i+1:]
		}
	}
	return s, ""
}

func TestValueGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  []byte
		want string
	}{
		{"string", StringValue("gpt-x"), "12056770742d78"},
		{"empty string", StringValue(""), "1200"},
		{"int64", Int64Value(123456789), "20959aef3a"},
		{"int64 -1", Int64Value(-1), "20ffffffffffffffffff01"},
		{"int64 0", Int64Value(0), "2000"},
		{"double", DoubleValue(0.25), "29000000000000d03f"},
		{"float", FloatValue(0.75), "350000403f"},
		{"unix ts", UnixTimestampValue(time.Unix(1764000000, 0)), "40808292c906"},
		{"string list", StringListValue([]string{"pii", "violence"}), "620f0a037069690a0876696f6c656e6365"},
		{"empty list", StringListValue(nil), "6200"},
		{"timestamp", Timestamp(time.Date(2026, 11, 29, 22, 0, 0, 123456000, time.UTC)), "08e0c0b2d806108094ef3a"},
		{"timestamp whole", Timestamp(time.Date(2026, 11, 29, 22, 0, 0, 0, time.UTC)), "08e0c0b2d806"},
	} {
		if got := hex.EncodeToString(tc.got); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestViewAppendRow(t *testing.T) {
	ts := time.Date(2026, 11, 29, 22, 0, 0, 0, time.UTC)
	v := NewView("request_features", "risk_score", "model")
	prefix := []any{"kept"}
	args := v.AppendRow(prefix, ts, FloatValue(0.75), StringValue("gpt-x"))
	if len(args) != 7 || args[0] != "kept" {
		t.Fatalf("args = %v, want the prefix and 3 field/value pairs", args)
	}
	for i, want := range []struct{ field, value string }{
		{"594cb0f5", "350000403f"}, // mmh3("request_features:risk_score")
		{hex.EncodeToString([]byte(FieldKey("request_features", "model"))), "12056770742d78"},
		{hex.EncodeToString([]byte("_ts:request_features")), "08e0c0b2d806"},
	} {
		f, val := args[1+2*i].(string), args[2+2*i].([]byte)
		if got := hex.EncodeToString([]byte(f)); got != want.field {
			t.Errorf("field %d = %s, want %s", i, got, want.field)
		}
		if got := hex.EncodeToString(val); got != want.value {
			t.Errorf("value %d = %s, want %s", i, got, want.value)
		}
	}
	op := Op{Key: "k", Build: func(dst []any) []any { return v.AppendRow(dst, ts, FloatValue(0.75), StringValue("gpt-x")) }}
	if row := op.Row(); len(row) != 3 || hex.EncodeToString(row["_ts:request_features"].([]byte)) != "08e0c0b2d806" {
		t.Fatalf("op row = %v", row)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a row with a value missing did not panic")
		}
	}()
	v.AppendRow(nil, ts, FloatValue(0.75))
}
