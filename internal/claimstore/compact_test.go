package claimstore

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// compactFixture writes, into dir, an hour-0 segment of keys old-0..99, then in hour 1 keys
// k0..k999 each written three times (values of 10, 30 and 50 bytes: the newest is the
// longest), old-5 deleted, old-6 rewritten, with a changelog offset after every write. It
// returns the store before hour 1's segment is sealed, and the bytes hour 1's segment holds
// once only each key's newest record and one offset record are left.
func compactFixture(t *testing.T, dir string, cfg Config, c *clock) (*Store, int64) {
	t.Helper()
	s := openAt(t, dir, cfg, c)
	off := int64(0)
	set := func(k, v string) {
		must0(t, s.Set(k, []byte(v)))
		off++
		must0(t, s.SetOffset(off))
	}
	for i := range 100 {
		set(fmt.Sprintf("old-%d", i), "old")
	}
	c.t = t0.Add(time.Hour)
	var want int64
	for round, n := range []int{10, 30, 50} {
		for i := range 1000 {
			k := fmt.Sprintf("k%d", i)
			v := fmt.Sprintf("%d-%d-", round, i)
			for len(v) < n {
				v += "x"
			}
			set(k, v)
			if round == 2 {
				want += int64(align8(recHeader + len(k) + n))
			}
		}
	}
	must0(t, s.Delete("old-5"))
	want += int64(align8(recHeader + len("old-5")))
	set("old-6", "rewritten")
	want += int64(align8(recHeader + len("old-6") + len("rewritten")))
	want += int64(align8(recHeader + 8)) // the offset record
	return s, want
}

// checkCompacted reads every key of compactFixture from s.
func checkCompacted(t *testing.T, s *Store) {
	t.Helper()
	for i := range 1000 {
		k := fmt.Sprintf("k%d", i)
		want := fmt.Sprintf("2-%d-", i)
		for len(want) < 50 {
			want += "x"
		}
		if got := get(t, s, k); got != want {
			t.Fatalf("%s = %q, want %q", k, got, want)
		}
	}
	for k, want := range map[string]string{"old-5": "<nil>", "old-6": "rewritten", "old-7": "old", "old-99": "old", "tick": "x"} {
		if got := get(t, s, k); got != want {
			t.Fatalf("%s = %q, want %q", k, got, want)
		}
	}
}

// logSize is the size of segment id's log on disk.
func logSize(t *testing.T, dir string, id int) int64 {
	t.Helper()
	st, err := os.Stat(filepath.Join(dir, fmt.Sprintf("%016d.log", id)))
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// TestSealCompactsTheLog: a sealed segment's log holds each key's newest record (a deletion
// too, which hides an older segment's value) and the segment's last changelog offset, nothing
// else; every key reads its newest value, before and after a reopen.
func TestSealCompactsTheLog(t *testing.T) {
	dir := t.TempDir()
	c := &clock{t0}
	cfg := Config{Window: 28 * time.Hour, Segments: 28} // an hour a segment
	s, want := compactFixture(t, dir, cfg, c)
	before := logSize(t, dir, 1) + int64(len(s.segs[1].buf))
	c.t = t0.Add(2 * time.Hour)
	must0(t, s.Set("tick", []byte("x"))) // seals hour 1's segment
	if got := logSize(t, dir, 1); got != want {
		t.Fatalf("sealed log of %d bytes, want %d (each key's newest record and an offset record; %d before the seal)", got, want, before)
	}
	if before < 2*want {
		t.Fatalf("the log held %d bytes before the seal, want at least twice the %d it keeps", before, want)
	}
	g := s.segs[1]
	if !g.sealed() || g.size != want || g.records != 1002 || g.keys != 1002 {
		t.Fatalf("segment 1: sealed %v, %d bytes, %d records, %d keys; want true, %d, 1002, 1002", g.sealed(), g.size, g.records, g.keys, want)
	}
	if !g.hasOffset || g.offset != 3101 {
		t.Fatalf("segment 1's offset %d (%v), want 3101", g.offset, g.hasOffset)
	}
	// The log ends with the offset record.
	var last record
	n := 0
	_, err := g.scanFrom(0, func(_ uint32, r record) { last, n = r, n+1 })
	must0(t, err)
	if n != 1003 || last.kind != kindOffset || int64(leUint64(last.value)) != 3101 {
		t.Fatalf("%d records, the last of kind %d offset %d; want 1003, %d, 3101", n, last.kind, leUint64(last.value), kindOffset)
	}
	for _, ext := range []string{".active", ".log.tmp"} {
		if _, err := os.Stat(g.path + ext); !os.IsNotExist(err) {
			t.Fatalf("a sealed segment has %s: %v", ext, err)
		}
	}
	checkCompacted(t, s)
	must0(t, s.SetOffset(3102))
	must0(t, s.Close())

	r := openAt(t, dir, cfg, c)
	checkCompacted(t, r)
	if off := must(r.GetOffset(-1)); off != 3102 {
		t.Fatalf("offset %d after a reopen, want 3102", off)
	}
	if got := r.segs[1].offset; got != 3101 {
		t.Fatalf("segment 1's offset %d after a reopen, want 3101", got)
	}
	must0(t, r.Close())
}

// TestSealCompactionSurvivesACrash: a crash after the compacted log was renamed into place
// and before its index was written leaves a compacted log without an index; one before the
// rename leaves the whole log (and maybe the unfinished new one). Either way Open scans the
// segment, seals it, and finds every key as it was, the log compacted.
func TestSealCompactionSurvivesACrash(t *testing.T) {
	c := &clock{t0}
	cfg := Config{Window: 28 * time.Hour, Segments: 28}

	t.Run("after the rename", func(t *testing.T) {
		dir := t.TempDir()
		s, want := compactFixture(t, dir, cfg, c)
		c.t = t0.Add(2 * time.Hour)
		must0(t, s.Set("tick", []byte("x")))
		must0(t, s.SetOffset(3102))
		must0(t, s.MarkRecovered())
		s.closeFiles() // a crash: Close writes nothing
		g1 := filepath.Join(dir, fmt.Sprintf("%016d", 1))
		for _, f := range []string{g1 + ".idx", g1 + ".bloom", filepath.Join(dir, unionFile)} {
			os.Remove(f)
		}
		r := openAt(t, dir, cfg, c)
		defer r.Close()
		if st := r.Stats(); st.OpenScanned < want {
			t.Fatalf("open scanned %d bytes, want at least segment 1's %d", st.OpenScanned, want)
		}
		if got := logSize(t, dir, 1); got != want || !r.segs[1].sealed() {
			t.Fatalf("segment 1: %d bytes, sealed %v; want %d, true", got, r.segs[1].sealed(), want)
		}
		checkCompacted(t, r)
		if off := must(r.GetOffset(-1)); off != 3102 {
			t.Fatalf("offset %d, want 3102", off)
		}
	})

	t.Run("before the rename", func(t *testing.T) {
		dir := t.TempDir()
		c.t = t0
		s, want := compactFixture(t, dir, cfg, c)
		must0(t, s.MarkRecovered()) // writes the buffer: segment 1's whole log is on disk
		s.closeFiles()
		full := logSize(t, dir, 1)
		g1 := filepath.Join(dir, fmt.Sprintf("%016d", 1))
		// A half-written new log, and the newer segment "tick" would have started.
		must0(t, os.WriteFile(g1+".log.tmp", []byte("half a log"), 0o644))
		c.t = t0.Add(2 * time.Hour)
		r := openAt(t, dir, cfg, c)
		must0(t, r.Set("tick", []byte("x"))) // seals segment 1: it is the active one
		if got := logSize(t, dir, 1); got != want || full < 2*want {
			t.Fatalf("segment 1: %d bytes (%d before), want %d", got, full, want)
		}
		checkCompacted(t, r)
		must0(t, r.MarkRecovered())
		r.closeFiles()
		if _, err := os.Stat(g1 + ".log.tmp"); !os.IsNotExist(err) {
			t.Fatalf("the unfinished log stays: %v", err)
		}

		// The same with segment 1 not the newest on disk: Open seals it itself.
		dir2 := t.TempDir()
		c.t = t0
		s2, _ := compactFixture(t, dir2, cfg, c)
		must0(t, s2.MarkRecovered())
		s2.closeFiles()
		must0(t, os.WriteFile(filepath.Join(dir2, fmt.Sprintf("%016d.log.tmp", 1)), []byte("half"), 0o644))
		must0(t, os.WriteFile(filepath.Join(dir2, fmt.Sprintf("%016d.log", 2)), nil, 0o644))
		c.t = t0.Add(2 * time.Hour)
		r2 := openAt(t, dir2, cfg, c)
		defer r2.Close()
		if got := logSize(t, dir2, 1); got != want || !r2.segs[1].sealed() {
			t.Fatalf("segment 1 after the open: %d bytes, sealed %v; want %d, true", got, r2.segs[1].sealed(), want)
		}
		must0(t, r2.Set("tick", []byte("x")))
		checkCompacted(t, r2)
		if off := must(r2.GetOffset(-1)); off != 3101 {
			t.Fatalf("offset %d, want 3101", off)
		}
	})
}

// TestSealCompactsAfterACleanReopen: the newest segment's index, read back from the .active
// file a clean Close left, points into the log the seal compacts; the positions it holds are
// moved with the records.
func TestSealCompactsAfterACleanReopen(t *testing.T) {
	dir := t.TempDir()
	c := &clock{t0}
	cfg := Config{Window: 28 * time.Hour, Segments: 28}
	s, want := compactFixture(t, dir, cfg, c)
	must0(t, s.Close())
	r := openAt(t, dir, cfg, c)
	if st := r.Stats(); st.OpenScanned != 0 {
		t.Fatalf("the reopen scanned %d bytes: the .active file was not used", st.OpenScanned)
	}
	c.t = t0.Add(2 * time.Hour)
	must0(t, r.Set("tick", []byte("x")))
	if got := logSize(t, dir, 1); got != want || !r.segs[1].sealed() {
		t.Fatalf("segment 1: %d bytes, sealed %v; want %d, true", got, r.segs[1].sealed(), want)
	}
	checkCompacted(t, r)
	must0(t, r.Close())
	r = openAt(t, dir, cfg, c)
	defer r.Close()
	checkCompacted(t, r)
}
