package claimstore

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	sizelist "github.com/backflowhq/backflow/internal/sizes"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/storage"

	"github.com/backflowhq/backflow/internal/kafka"
)

// BenchmarkClaimStoreGrowth measures a table partition's store at steady state with N live
// claims (requestIds), for each N of CLAIMS_BENCH_SIZES (default 1M; e.g. "1M,10M,30M"),
// filled as ingest fills its dedupe table: three records a request (a lookup, then the value
// with one more slot: 48, 104 and 152 bytes), the later two within 3,000 records, the requests
// spread evenly over the 7-day window, so that each size holds its N claims in the same 28
// time segments. Then, with the clock going on (segments expiring as new ones fill, so N
// stays N):
//
//   - claim-cpu-ns/op: process CPU per record of further requests (a lookup and a write), as
//     many as a segment holds and at least 100,000, so the seals they cause are counted;
//   - hit-cpu-ns/op and miss-cpu-ns/op: CPU per lookup of 200,000 random live keys, and of
//     200,000 keys never written (the common case for a first record);
//   - restore-records/s: a fresh store given every record of the fill through Update, as goka
//     restores it from the changelog (records older than the window skipped), CPU-bound;
//   - disk-B/claim and mem-B/claim: the store's files and its index and filters per live claim.
//
// CLAIMS_BENCH_STORE=leveldb runs the same on the LevelDB storage the table used before
// (kafka.GokaStorage; no restore figure). Run with -benchtime 1x; it needs about 500 bytes of
// disk a claim (TMPDIR).
func BenchmarkClaimStoreGrowth(b *testing.B) {
	sizes := []int{1_000_000}
	if s := os.Getenv("CLAIMS_BENCH_SIZES"); s != "" {
		var err error
		if sizes, err = sizelist.Parse(s); err != nil {
			b.Fatalf("CLAIMS_BENCH_SIZES: %v", err)
		}
	}
	kind := os.Getenv("CLAIMS_BENCH_STORE")
	if kind == "" {
		kind = "claimstore"
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("%s/%dk", kind, n/1000), func(b *testing.B) {
			for b.Loop() {
				growth(b, kind, n)
			}
		})
	}
}

func cpuNow(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchKey is request req's id: 36 bytes, like a UUID (built without fmt, whose cost would
// be a fair part of a lookup's).
func benchKey(_ []byte, req int) string {
	const hexdigits = "0123456789abcdef"
	var b [36]byte
	copy(b[:], "00000000-0000-4000-8000-000000000000")
	h := uint64(uint32(req*2654435761)) | uint64(req)<<32
	for i, j := 0, 0; i < 36; i++ {
		if b[i] == '-' || i == 14 || i == 19 {
			continue
		}
		b[i] = hexdigits[h>>(60-4*(j%16))&15]
		j++
		if j == 16 {
			h = uint64(req) * 0x9E3779B97F4A7C15
		}
	}
	return string(b[:])
}

var benchValues = func() [3][]byte {
	var v [3][]byte
	for i, n := range []int{48, 104, 152} {
		v[i] = make([]byte, n)
		for j := range v[i] {
			v[i][j] = byte('a' + j%26)
		}
	}
	return v
}()

// traffic yields the records of requests in the order ingest sees them: a request's first
// record, its second within 1,500 records and its third 1,500 to 3,000 records later, as
// loadgen's backlog interleaves them. The records still to come wait in a wheel of slots by the
// record count they fall due at.
type traffic struct {
	rnd   *rand.Rand
	wheel [3001][]laterRecord
	count int // records yielded
	next  int // the first slot not yet emptied
}

type laterRecord struct{ req, slot int }

func newTraffic() *traffic { return &traffic{rnd: rand.New(rand.NewPCG(7, 11))} }

// run yields the records of requests from to to-1, stepping clock once a request.
func (t *traffic) run(from, to int, clock *time.Time, step time.Duration, yield func(req, slot int)) {
	for req := from; req < to; req++ {
		*clock = clock.Add(step)
		yield(req, 0)
		t.count++
		for slot, d := range [2]int{1 + t.rnd.IntN(1500), 1500 + t.rnd.IntN(1500)} {
			w := &t.wheel[(t.count+d)%len(t.wheel)]
			*w = append(*w, laterRecord{req, slot + 1})
		}
		for ; t.next <= t.count; t.next++ {
			w := &t.wheel[t.next%len(t.wheel)]
			for len(*w) > 0 {
				r := (*w)[0]
				*w = (*w)[1:]
				yield(r.req, r.slot)
				t.count++
			}
		}
	}
}

func growth(b *testing.B, kind string, n int) {
	const window = 7 * 24 * time.Hour
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	clock := start
	step := window / time.Duration(n) // per request: the fill spans the window
	now := func() time.Time { return clock }
	dir := b.TempDir()
	var st storage.Storage
	var cs *Store
	switch kind {
	case "claimstore":
		// FlushEvery: the fake clock runs about a million times as fast as a real one; the
		// buffer is written when full, as it is in a busy partition.
		s, err := Open(dir+"/store", Config{Window: window, Clock: now, DropEvery: time.Minute, FlushEvery: window})
		if err != nil {
			b.Fatal(err)
		}
		st, cs = s, s
	case "leveldb":
		s, err := kafka.GokaStorage(dir)("bench", 0)
		if err != nil {
			b.Fatal(err)
		}
		st = s
	default:
		b.Fatalf("CLAIMS_BENCH_STORE=%q: claimstore or leveldb", kind)
	}
	if err := st.MarkRecovered(); err != nil {
		b.Fatal(err)
	}
	rnd := rand.New(rand.NewPCG(13, 17)) // the lookups' keys
	var kb []byte
	val := make([]byte, 160)
	ops := 0
	op := func(req, slot int) {
		k := benchKey(kb, req)
		if _, err := st.Get(k); err != nil {
			b.Fatal(err)
		}
		v := append(val[:0], benchValues[slot]...)
		binary.LittleEndian.PutUint64(v, uint64(req)) // every value differs
		if err := st.Set(k, v); err != nil {
			b.Fatal(err)
		}
		ops++
		if err := st.SetOffset(int64(ops)); err != nil {
			b.Fatal(err)
		}
	}
	tr := newTraffic()
	run := func(from, to int) { tr.run(from, to, &clock, step, op) }
	fill0 := cpuNow(b)
	run(0, n)
	fillCPU, fillOps := cpuNow(b)-fill0, ops

	// At least a segment's worth (n/28 requests): a segment is sealed once it ends, at a cost
	// that grows with it, so a shorter stretch would see one seal or none by chance.
	more := max(100_000, n/28+1)
	c0, ops0 := cpuNow(b), ops
	run(n, n+more)
	claimCPU := float64((cpuNow(b) - c0).Nanoseconds()) / float64(ops-ops0)
	live := n + more // requests written; the oldest `more` may have expired with their segments

	const lookups = 200_000
	hits := 0
	c1 := cpuNow(b)
	for range lookups {
		// A random key written within the window (the newest n requests).
		v, err := st.Get(benchKey(kb, live-1-rnd.IntN(n-n/100)))
		if err != nil {
			b.Fatal(err)
		}
		if v != nil {
			hits++
		}
	}
	hitCPU := float64((cpuNow(b) - c1).Nanoseconds()) / lookups
	if hits < lookups*99/100 {
		b.Fatalf("only %d of %d live keys found", hits, lookups)
	}
	c2 := cpuNow(b)
	for i := range lookups {
		v, err := st.Get(benchKey(kb, -1-i))
		if err != nil || v != nil {
			b.Fatalf("a key never written: %q, %v", v, err)
		}
	}
	missCPU := float64((cpuNow(b) - c2).Nanoseconds()) / lookups
	b.ReportMetric(float64(fillCPU.Nanoseconds())/float64(fillOps), "fill-cpu-ns/op")
	b.ReportMetric(claimCPU, "claim-cpu-ns/op")
	b.ReportMetric(hitCPU, "hit-cpu-ns/op")
	b.ReportMetric(missCPU, "miss-cpu-ns/op")
	if cs == nil {
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
		return
	}
	stats := cs.Stats()
	b.ReportMetric(float64(stats.DiskBytes)/float64(n), "disk-B/claim")
	b.ReportMetric(float64(stats.MemoryBytes)/float64(n), "mem-B/claim")
	b.ReportMetric(float64(stats.Segments), "segments")
	if err := cs.Close(); err != nil {
		b.Fatal(err)
	}
	reopen(b, dir+"/store", Config{Window: window, Clock: now, DropEvery: time.Minute, FlushEvery: window}, benchKey(kb, live-1))

	// Restore: the fill's records again, in the order they were written, through Update.
	r, err := Open(dir+"/restored", Config{Window: window, Clock: now, FlushEvery: window})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	up := Update(window, now)
	restoreClock, records := start, 0
	c3, w3 := cpuNow(b), time.Now()
	newTraffic().run(0, n+more, &restoreClock, step, func(req, slot int) {
		v := append(val[:0], benchValues[slot]...)
		binary.LittleEndian.PutUint64(v, uint64(req))
		if err := up(restoreCtx{restoreClock}, r, benchKey(kb, req), v); err != nil {
			b.Fatal(err)
		}
		records++
		if err := r.SetOffset(int64(records)); err != nil {
			b.Fatal(err)
		}
	})
	if err := r.MarkRecovered(); err != nil {
		b.Fatal(err)
	}
	restoreCPU, restoreWall := cpuNow(b)-c3, time.Since(w3)
	b.ReportMetric(float64(records)/restoreCPU.Seconds(), "restore-records/cpu-s")
	b.ReportMetric(float64(records)/restoreWall.Seconds(), "restore-records/s")
	b.ReportMetric(float64(r.Stats().Skipped), "restore-skipped")
}

// reopen opens the store in dir again after its clean Close (reopen-ms, what a restart on a
// kept disk pays), then after a crash (crash-reopen-ms: the files a clean Close writes
// removed, so Open rebuilds the newest segment's index from its log and the union filter
// from the sealed indexes), each time finding key.
func reopen(b *testing.B, dir string, cfg Config, key string) {
	open := func(metric string) Stats {
		c, w := cpuNow(b), time.Now()
		s, err := Open(dir, cfg)
		if err != nil {
			b.Fatal(err)
		}
		wall, cpu := time.Since(w), cpuNow(b)-c
		if v, err := s.Get(key); err != nil || v == nil {
			b.Fatalf("%s: key %s not found after the open: %v", metric, key, err)
		}
		st := s.Stats()
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(wall.Microseconds())/1000, metric+"-ms")
		b.ReportMetric(float64(cpu.Microseconds())/1000, metric+"-cpu-ms")
		return st
	}
	st := open("reopen")
	b.ReportMetric(float64(st.OpenScanned), "reopen-scanned")
	for _, pattern := range []string{"*.active", unionFile} {
		files, _ := filepath.Glob(filepath.Join(dir, pattern))
		for _, f := range files {
			if err := os.Remove(f); err != nil {
				b.Fatal(err)
			}
		}
	}
	st = open("crash-reopen")
	b.ReportMetric(float64(st.OpenScanned), "crash-reopen-scanned")
}

type restoreCtx struct{ ts time.Time }

func (restoreCtx) Topic() goka.Stream     { return "bench-table" }
func (restoreCtx) Partition() int32       { return 0 }
func (restoreCtx) Offset() int64          { return 0 }
func (restoreCtx) Headers() goka.Headers  { return nil }
func (c restoreCtx) Timestamp() time.Time { return c.ts }
