package conf

import (
	"testing"
	"time"
)

// TestParseDuration: replay --by-duration took 7d but the config key ingest.dedupe_window: 7d
// was refused; every duration now takes the same forms.
func TestParseDuration(t *testing.T) {
	for _, tt := range []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{"500ms", 500 * time.Millisecond, false},
		{"1h30m", 90 * time.Minute, false},
		{"7d", 7 * 24 * time.Hour, false},
		{"1d12h", 36 * time.Hour, false},
		{"P1DT6H", 30 * time.Hour, false},
		{"pt30m", 30 * time.Minute, false},
		{"P7D", 7 * 24 * time.Hour, false},
		{"0s", 0, false},
		{"30", 0, true},
		{"forever", 0, true},
		{"P", 0, true},
		{"P1DT", 0, true},
		{"7dd", 0, true},
		{"", 0, true},
	} {
		got, err := ParseDuration(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v (error: %v)", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}
