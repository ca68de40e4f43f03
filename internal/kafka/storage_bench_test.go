package kafka

import (
	"fmt"
	"testing"

	"github.com/lovoo/goka/storage"
)

// BenchmarkTableStorage compares goka's own LevelDB storage, with the offset stored once per
// 1,000 writes (as the storage before the batched one did, once a second), with GokaStorage's
// batched one, on a table partition's mix of work: per op a lookup and a write, as goka's
// callbacks make them, and an acknowledged offset. A third of the keys are new (a first claim, a new request entry),
// the rest are recent keys written again (a request's later records) or hot keys (a busy tenant
// or model).
func BenchmarkTableStorage(b *testing.B) {
	for _, bc := range []struct {
		name        string
		build       func(dir string) storage.Builder
		offsetEvery int
	}{
		{"goka", func(dir string) storage.Builder { return storage.BuilderWithOptions(dir, LevelDBOptions()) }, 1000},
		{"batched", GokaStorage, 1},
	} {
		b.Run(bc.name, func(b *testing.B) {
			st, err := bc.build(b.TempDir())("bench-table", 0)
			if err != nil {
				b.Fatal(err)
			}
			if err := st.Open(); err != nil {
				b.Fatal(err)
			}
			if err := st.MarkRecovered(); err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			value := make([]byte, 200)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var key string
				switch i % 3 {
				case 0:
					key = fmt.Sprintf("req-%012d", i) // new
				case 1:
					key = fmt.Sprintf("req-%012d", i-1-(i/3)%300) // recent
				default:
					key = fmt.Sprintf("tenant-%02d", i%50) // hot
				}
				if _, err := st.Get(key); err != nil {
					b.Fatal(err)
				}
				if err := st.Set(key, value); err != nil {
					b.Fatal(err)
				}
				if i%bc.offsetEvery == 0 {
					if err := st.SetOffset(int64(i)); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
