package ingest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	sizelist "github.com/backflowhq/backflow/internal/sizes"

	"github.com/backflowhq/backflow/internal/claimstore"
)

// BenchmarkClaimBytes measures what ingest's dedupe table costs in bytes per request, for each
// count of requests in CLAIM_BYTES_SIZES (default "100k,300k,1M"): the requests are spread over
// the 7-day window in one table partition, each written as ingest writes it (a lookup, Decide,
// the codec, a Set per record: the REQUEST log, then the inference result 1 to 1,500 records
// later and the RESPONSE log 1,500 to 3,000 later, offsets of 10^9 and up in 12 partitions a
// topic), so the partition holds the window's 28 time segments, the newest active. It reports:
//
//   - disk-B/req: the store's files (logs, index files, filters) per request;
//   - sealed-B/req and active-B/req: the same for the sealed segments and for the active one,
//     per request each holds (logs only: sealed-log-B/req), and active-share: the share of the
//     requests the active segment holds;
//   - changelog-B/req: the key and value bytes of the records the table wrote to its changelog
//     (as Kafka stores them before compaction), and compacted-B/req after compaction, which
//     keeps each key's newest record; Kafka adds a record's framing (about 8 bytes) to each.
//
// Run with -benchtime 1x; each -count run uses another seed, counting from CLAIM_BYTES_SEED
// (default 1), so that runs in separate processes differ too.
func BenchmarkClaimBytes(b *testing.B) {
	sizes := []int{100_000, 300_000, 1_000_000}
	if s := os.Getenv("CLAIM_BYTES_SIZES"); s != "" {
		var err error
		if sizes, err = sizelist.Parse(s); err != nil {
			b.Fatalf("CLAIM_BYTES_SIZES: %v", err)
		}
	}
	if s := os.Getenv("CLAIM_BYTES_SEED"); s != "" && claimBytesSeed == 0 {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			b.Fatalf("CLAIM_BYTES_SEED: %v", err)
		}
		claimBytesSeed = seed - 1
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			for b.Loop() {
				claimBytesSeed++
				claimBytes(b, n, claimBytesSeed)
			}
		})
	}
}

var claimBytesSeed uint64

// claimBytesKey is request req's id: 36 bytes, like a UUID.
func claimBytesKey(req int) string {
	h := uint64(req)*0x9E3779B97F4A7C15 + 1
	l := uint64(req)*0xBF58476D1CE4E5B9 + 7
	s := fmt.Sprintf("%016x%016x", h, l)
	return s[:8] + "-" + s[8:12] + "-4" + s[13:16] + "-8" + s[17:20] + "-" + s[20:32]
}

func claimBytes(b *testing.B, n int, seed uint64) {
	const (
		window     = 7 * 24 * time.Hour
		partitions = 12
	)
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	clock := start
	step := window / time.Duration(n)
	dir := filepath.Join(b.TempDir(), "store")
	s, err := claimstore.Open(dir, claimstore.Config{Window: window, Clock: func() time.Time { return clock },
		DropEvery: time.Minute, FlushEvery: window})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.MarkRecovered(); err != nil {
		b.Fatal(err)
	}
	rnd := rand.New(rand.NewPCG(seed, 99))
	var next [2][partitions]int64 // per topic and partition: the next offset
	for t := range next {
		for p := range next[t] {
			next[t][p] = 1_000_000_000 + rnd.Int64N(1_000_000_000)
		}
	}
	var codec StateCodec
	var changelog, records int64
	newest := make(map[string]int, n) // key → bytes of its newest changelog record
	write := func(req, kind int) {
		key := claimBytesKey(req)
		slot, topic, t := "gateway-log/REQUEST", "gateway-log", 0
		switch kind {
		case 1:
			slot, topic, t = "model-inference-result", "model-inference-result", 1
		case 2:
			slot = "gateway-log/RESPONSE"
		}
		// The gateway's two records share a partition (keyed by requestId); the inference
		// result is in its topic's partition of the same key.
		p := int32(uint64(req) * 0x9E3779B97F4A7C15 >> 60 % partitions)
		o := Origin{topic, p, next[t][p]}
		next[t][p]++
		var st *State
		raw, err := s.Get(key)
		if err != nil {
			b.Fatal(err)
		}
		if raw != nil {
			v, err := codec.Decode(raw)
			if err != nil {
				b.Fatal(err)
			}
			st = v.(*State)
		}
		d, nst := Decide(st, slot, o, 0, clock, window)
		if d != DecideClaim || nst == nil {
			b.Fatalf("request %d record %d: %v", req, kind, d)
		}
		v, err := codec.Encode(nst)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Set(key, v); err != nil {
			b.Fatal(err)
		}
		records++
		changelog += int64(len(key) + len(v))
		newest[key] = len(key) + len(v)
		if err := s.SetOffset(records); err != nil {
			b.Fatal(err)
		}
	}
	// A wheel of the records still to come, by the record count they fall due at.
	var wheel [3001][][2]int
	count, due := 0, 0
	for req := range n {
		clock = clock.Add(step)
		write(req, 0)
		count++
		for k, d := range [2]int{1 + rnd.IntN(1500), 1500 + rnd.IntN(1500)} {
			w := &wheel[(count+d)%len(wheel)]
			*w = append(*w, [2]int{req, k + 1})
		}
		for ; due <= count; due++ {
			w := &wheel[due%len(wheel)]
			for len(*w) > 0 {
				r := (*w)[0]
				*w = (*w)[1:]
				write(r[0], r[1])
				count++
			}
		}
	}
	for ; due < count+len(wheel); due++ { // the records still due
		w := &wheel[due%len(wheel)]
		for _, r := range *w {
			write(r[0], r[1])
			count++
		}
		*w = nil
	}
	if records != 3*int64(n) {
		b.Fatalf("%d records, want %d", records, 3*n)
	}
	if err := s.MarkRecovered(); err != nil { // writes the buffer
		b.Fatal(err)
	}
	st := s.Stats()
	if st.Keys < n || st.Segments < 28 {
		b.Fatalf("%d keys in %d segments, want at least %d in 28", st.Keys, st.Segments, n)
	}

	// The files, by segment: a log with an index file is sealed.
	entries, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	size := map[string]int64{}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			b.Fatal(err)
		}
		size[e.Name()] = info.Size()
	}
	var sealed, sealedLog, active, total int64
	var sealedLogs, activeLogs []string
	for name, sz := range size {
		total += sz
		id, ok := strings.CutSuffix(name, ".log")
		if !ok {
			continue
		}
		if _, isSealed := size[id+".idx"]; isSealed {
			sealed += sz + size[id+".idx"] + size[id+".bloom"]
			sealedLog += sz
			sealedLogs = append(sealedLogs, filepath.Join(dir, name))
		} else {
			active += sz
			activeLogs = append(activeLogs, filepath.Join(dir, name))
		}
	}
	// The requests each part holds: the distinct keys of its logs (a request whose records
	// straddle two segments counts in both parts, once in each).
	sealedKeys, activeKeys := distinctKeys(b, sealedLogs), distinctKeys(b, activeLogs)
	if sealedKeys+activeKeys < int64(n) {
		b.Fatalf("%d + %d keys in the logs, want at least %d", sealedKeys, activeKeys, n)
	}
	var compacted int64
	for _, v := range newest {
		compacted += int64(v)
	}
	b.ReportMetric(float64(total)/float64(n), "disk-B/req")
	b.ReportMetric(float64(sealed)/float64(sealedKeys), "sealed-B/req")
	b.ReportMetric(float64(sealedLog)/float64(sealedKeys), "sealed-log-B/req")
	b.ReportMetric(float64(active)/float64(max(activeKeys, 1)), "active-B/req")
	b.ReportMetric(float64(activeKeys)/float64(n), "active-share")
	b.ReportMetric(float64(changelog)/float64(n), "changelog-B/req")
	b.ReportMetric(float64(compacted)/float64(n), "compacted-B/req")
	b.ReportMetric(float64(st.Segments), "segments")
}

// distinctKeys counts the distinct keys of segment logs (their record layout:
// internal/claimstore/segment.go).
func distinctKeys(b *testing.B, paths []string) int64 {
	keys := map[string]struct{}{}
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		for off := 0; off+20 <= len(data); {
			kind := data[off+4]
			klen := int(data[off+6]) | int(data[off+7])<<8
			vlen := int(data[off+8]) | int(data[off+9])<<8 | int(data[off+10])<<16 | int(data[off+11])<<24
			if kind == 1 || kind == 2 {
				keys[string(data[off+20:off+20+klen])] = struct{}{}
			}
			off += (20 + klen + vlen + 7) &^ 7
		}
	}
	return int64(len(keys))
}
