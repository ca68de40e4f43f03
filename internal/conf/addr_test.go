package conf

import (
	"strings"
	"testing"
)

func TestCheckHostPort(t *testing.T) {
	for _, tt := range []struct {
		addr                string
		emptyHost, zeroPort bool
		wantErr             string // "" for none
	}{
		{"127.0.0.1:9000", false, false, ""},
		{"[::1]:9000", false, false, ""},
		{"ch.internal:9440", false, false, ""},
		// A regression: a URL passed the old check (host "http", port "//127.0.0.1:18123")
		// and failed later with "too many colons".
		{"http://127.0.0.1:18123", false, false, "is a URL"},
		{"127.0.0.1", false, false, "is not host:port"},
		{":9000", false, false, "has no host"},
		{":9000", true, false, ""},
		{"h:0", false, false, "not a number from 1 to 65535"},
		{"h:0", false, true, ""},
		{"h:http", false, false, "not a number"},
		{"h:70000", false, false, "not a number"},
		{"", false, false, "not set"},
	} {
		err := CheckHostPort(tt.addr, tt.emptyHost, tt.zeroPort)
		if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("CheckHostPort(%q, %v, %v) = %v, want %q", tt.addr, tt.emptyHost, tt.zeroPort, err, tt.wantErr)
		}
	}
}
