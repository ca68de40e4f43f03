package procstat

import (
	"os"
	"testing"
	"time"
)

// TestRead reads the test process's own /proc entry after burning some CPU and memory.
func TestRead(t *testing.T) {
	buf := make([]byte, 64<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	for start := time.Now(); time.Since(start) < 200*time.Millisecond; {
	}
	s, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if s.CPU < 0.1 || s.RSS < 64<<20 || s.PeakRSS < s.RSS {
		t.Fatalf("sample %+v: want CPU >= 0.1 s and RSS >= 64 MiB <= peak", s)
	}
	_ = buf[len(buf)-1]
}
