package kafka

import (
	"container/heap"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

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

// BenchmarkTableGrowth is one table partition growing large through GokaStorage, as ingest's
// dedupe table does in a long drain: requests whose three records each look their key up and
// write it (the first a miss, the other two within the next 3,000 ops), values of about 200
// bytes in the table codec's shape, an offset acknowledged per write. Then random lookups of
// keys already written, as redeliveries and late records make them. LevelDB compacts in
// goroutines of its own, so the figures are the process's CPU time (getrusage) per op, not
// only the wall time: fill-cpu-ns/op and lookup-cpu-ns/op (the latter includes compactions
// the fill left running). TABLE_GROWTH_REQUESTS sets the requests (default 300,000). Run
// with -benchtime 1x: one iteration is the whole fill.
func BenchmarkTableGrowth(b *testing.B) {
	requests := 300_000
	if s := os.Getenv("TABLE_GROWTH_REQUESTS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			b.Fatal(err)
		}
		requests = n
	}
	const lookups = 200_000
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	rnd := rand.New(rand.NewPCG(7, 11))
	key := func(req int) string { return fmt.Sprintf("run-%08x-%08d", req*2654435761%(1<<32), req) }
	value := func(req, slot int) []byte {
		return fmt.Appendf(nil, "\x01\x03model-inference-result\x00%d\x12gateway-log/REQUEST\x00%d\x13gateway-log/RESPONSE\x00%d\x00epoch=%d seen=%d %016x",
			req%3, req*3, req*3+slot, 0, 1_764_633_600_000+int64(req), rnd.Uint64())
	}
	for b.Loop() {
		dir := b.TempDir()
		st, err := GokaStorage(dir)("bench-growth", 0)
		if err != nil {
			b.Fatal(err)
		}
		if err := st.MarkRecovered(); err != nil {
			b.Fatal(err)
		}
		pending := &laterHeap{} // the requests' later records, by when they fall due
		op := func(req, slot int) {
			k := key(req)
			if _, err := st.Get(k); err != nil {
				b.Fatal(err)
			}
			if err := st.Set(k, value(req, slot)); err != nil {
				b.Fatal(err)
			}
		}
		c0, w0 := cpu(), time.Now()
		ops := 0
		for req := 0; req < requests; req++ {
			op(req, 0)
			ops++
			heap.Push(pending, later{ops + rnd.IntN(1500), req, 1})
			heap.Push(pending, later{ops + 1500 + rnd.IntN(1500), req, 2})
			for pending.Len() > 0 && (*pending)[0].at <= ops {
				p := heap.Pop(pending).(later)
				op(p.req, p.slot)
				ops++
			}
			if err := st.SetOffset(int64(ops)); err != nil {
				b.Fatal(err)
			}
		}
		for pending.Len() > 0 {
			p := heap.Pop(pending).(later)
			op(p.req, p.slot)
			ops++
		}
		fillCPU, fillWall := cpu()-c0, time.Since(w0)
		c1, w1 := cpu(), time.Now()
		for range lookups {
			v, err := st.Get(key(rnd.IntN(requests)))
			if err != nil || v == nil {
				b.Fatalf("lookup: %q, %v", v, err)
			}
		}
		lookCPU, lookWall := cpu()-c1, time.Since(w1)
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(fillCPU.Nanoseconds())/float64(ops), "fill-cpu-ns/op")
		b.ReportMetric(float64(fillWall.Nanoseconds())/float64(ops), "fill-ns/op")
		b.ReportMetric(float64(lookCPU.Nanoseconds())/lookups, "lookup-cpu-ns/op")
		b.ReportMetric(float64(lookWall.Nanoseconds())/lookups, "lookup-ns/op")
		b.ReportMetric(float64(dirSize(b, dir))/(1<<20), "MB-on-disk")
	}
}

// later is a request's record still to come: at the op count it falls due.
type later struct{ at, req, slot int }

type laterHeap []later

func (h laterHeap) Len() int           { return len(h) }
func (h laterHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h laterHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *laterHeap) Push(x any)        { *h = append(*h, x.(later)) }
func (h *laterHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func dirSize(b *testing.B, dir string) int64 {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			n += info.Size()
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}
