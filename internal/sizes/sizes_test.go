package sizes

import (
	"fmt"
	"testing"
)

func TestParse(t *testing.T) {
	got, err := Parse("100k, 1M,,10m,3,2K")
	if err != nil || fmt.Sprint(got) != "[100000 1000000 10000000 3 2000]" {
		t.Fatalf("Parse = %v, %v", got, err)
	}
	for _, bad := range []string{"1G", "-1k", "0", "x"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) = nil error", bad)
		}
	}
}
