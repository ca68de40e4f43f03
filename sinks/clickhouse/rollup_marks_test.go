package clickhouse

import (
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/internal/rollup"
)

func TestMarksGroupMinutesByHour(t *testing.T) {
	at := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	got := MarksOf(rollup.InferenceResults, []time.Time{at("2026-12-05T10:59:59Z"), at("2026-12-05T10:00:01Z"), at("2026-12-05T11:00:00Z"),
		at("2026-12-05T10:59:01Z"), {}, at("2026-12-05T10:00:59Z")})
	want := []Mark{
		{Source: "inference_results", Hour: at("2026-12-05T10:00:00Z").Unix(), Minutes: []int64{at("2026-12-05T10:00:00Z").Unix(), at("2026-12-05T10:59:00Z").Unix()}},
		{Source: "inference_results", Hour: at("2026-12-05T11:00:00Z").Unix(), Minutes: []int64{at("2026-12-05T11:00:00Z").Unix()}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("marks %+v, want %+v", got, want)
	}
	for _, m := range got {
		rec := m.Record("backflow.rollups")
		if want := "inference_results/" + strconv.FormatInt(at("2026-12-05T00:00:00Z").Unix(), 10); string(rec.Key) != want {
			t.Fatalf("key %q, want %q: the marks of one day share a key", rec.Key, want)
		}
		back, err := DecodeMark(rec)
		if err != nil || !reflect.DeepEqual(back, m) {
			t.Fatalf("decode %s: %+v, %v", rec.Value, back, err)
		}
	}
}

func TestDecodeMarkRefusesWhatIsNotOne(t *testing.T) {
	for _, tc := range []struct{ name, value string }{
		{"not json", "{"},
		{"unknown table", `{"source":"replay_log","hour":3600,"minutes":[3600]}`},
		{"hour not on the hour", `{"source":"dlq_entries","hour":3660,"minutes":[3660]}`},
		{"no minutes", `{"source":"dlq_entries","hour":3600,"minutes":[]}`},
		{"minute outside its hour", `{"source":"dlq_entries","hour":3600,"minutes":[7200]}`},
		{"minute not on the minute", `{"source":"dlq_entries","hour":3600,"minutes":[3601]}`},
	} {
		if _, err := DecodeMark(&kgo.Record{Value: []byte(tc.value)}); err == nil {
			t.Errorf("%s: %s decoded", tc.name, tc.value)
		}
	}
}
