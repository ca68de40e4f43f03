package claimstore

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/lovoo/goka"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func openAt(t *testing.T, dir string, cfg Config, c *clock) *Store {
	t.Helper()
	cfg.Clock = c.now
	s, err := Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func get(t *testing.T, s *Store, key string) string {
	t.Helper()
	v, err := s.Get(key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	if v == nil {
		return "<nil>"
	}
	return string(v)
}

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// TestStoreReadsBackFromBufferFileAndReopen: values read back whether they are in the buffer,
// the last written buffer or only in the file, the newest version wins, a deletion hides a
// value, and all of it, with the changelog offset, survives a reopen.
func TestStoreReadsBackFromBufferFileAndReopen(t *testing.T) {
	dir := t.TempDir()
	c := &clock{t0}
	s := openAt(t, dir, Config{}, c)
	if off := must(s.GetOffset(-2)); off != -2 {
		t.Fatalf("empty store: offset %d", off)
	}
	const n = 50_000 // ~3.5 MB of records: several buffer writes, and the index grows
	for i := range n {
		if err := s.Set(fmt.Sprintf("req-%06d", i), []byte(fmt.Sprintf("v1-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < n; i += 3 {
		if err := s.Set(fmt.Sprintf("req-%06d", i), []byte(fmt.Sprintf("v2-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	must0(t, s.Delete("req-000001"))
	must0(t, s.SetOffset(n+n/3))
	check := func(s *Store) {
		t.Helper()
		for _, i := range []int{0, 1, 2, 3, 4, 9_999, 30_001, n - 2, n - 1} {
			want := fmt.Sprintf("v1-%d", i)
			if i%3 == 0 {
				want = fmt.Sprintf("v2-%d", i)
			}
			if i == 1 {
				want = "<nil>"
			}
			if got := get(t, s, fmt.Sprintf("req-%06d", i)); got != want {
				t.Fatalf("req-%06d = %q, want %q", i, got, want)
			}
		}
		if got := get(t, s, "never"); got != "<nil>" {
			t.Fatalf("a key never written reads %q", got)
		}
		if ok, _ := s.Has("req-000001"); ok {
			t.Fatal("a deleted key is there")
		}
	}
	check(s)
	if st := s.Stats(); st.Keys != n || st.Records != n+n/3+2 {
		t.Fatalf("stats %+v, want %d keys and %d records", st, n, n+n/3+2)
	}
	must0(t, s.Close())
	s = openAt(t, dir, Config{}, c)
	defer s.Close()
	check(s)
	if off := must(s.GetOffset(-2)); off != n+n/3 {
		t.Fatalf("reopened: offset %d, want %d", off, n+n/3)
	}
}

func must0(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestStoreCrashKeepsWhatItsOffsetCovers: a store that was never closed (a crash) reopens with
// the values of its last write and the offset written with them; a torn record at the end of
// the log is cut off, and writing goes on after it.
func TestStoreCrashKeepsWhatItsOffsetCovers(t *testing.T) {
	dir := t.TempDir()
	c := &clock{t0}
	s := openAt(t, dir, Config{}, c)
	must0(t, s.MarkRecovered())
	must0(t, s.Set("a", []byte("1")))
	must0(t, s.SetOffset(10)) // within FlushEvery: in memory only
	c.t = c.t.Add(time.Second)
	must0(t, s.Set("b", []byte("2")))
	must0(t, s.SetOffset(11)) // written: a, b and offset 11
	must0(t, s.Set("c", []byte("3")))
	must0(t, s.SetOffset(12)) // not written: lost in the crash
	// The crash: the files stay as they are; append half a record for good measure.
	log := filepath.Join(dir, fmt.Sprintf("%016d.log", 0))
	f := must(os.OpenFile(log, os.O_WRONLY|os.O_APPEND, 0))
	must(f.Write(appendRecord(nil, kindPut, "torn", []byte("xxxxxxxx"), 0)[:25]))
	f.Close()

	r := openAt(t, dir, Config{}, c)
	defer r.Close()
	if off := must(r.GetOffset(-2)); off != 11 {
		t.Fatalf("after the crash: offset %d, want 11", off)
	}
	if get(t, r, "a") != "1" || get(t, r, "b") != "2" || get(t, r, "c") != "<nil>" || get(t, r, "torn") != "<nil>" {
		t.Fatalf("after the crash: a=%s b=%s c=%s torn=%s", get(t, r, "a"), get(t, r, "b"), get(t, r, "c"), get(t, r, "torn"))
	}
	must0(t, r.Set("d", []byte("4")))
	must0(t, r.SetOffset(13))
	must0(t, r.Close())
	r2 := openAt(t, dir, Config{}, c)
	defer r2.Close()
	if get(t, r2, "d") != "4" || get(t, r2, "a") != "1" || must(r2.GetOffset(-2)) != 13 {
		t.Fatalf("written after the cut: d=%s a=%s offset %d", get(t, r2, "d"), get(t, r2, "a"), must(r2.GetOffset(-2)))
	}
	s.closeFiles()
}

// TestStoreSegmentsSealAndExpire: writes over more than a window go to one segment per span;
// sealed segments answer through their filters and index files (also after a reopen); a
// segment is deleted whole once its newest record is older than the window, while a key
// written again later keeps its newer value.
func TestStoreSegmentsSealAndExpire(t *testing.T) {
	dir := t.TempDir()
	c := &clock{t0}
	cfg := Config{Window: 4 * time.Hour, Segments: 4, DropEvery: time.Minute} // 1-hour segments
	s := openAt(t, dir, cfg, c)
	for h := range 6 { // 6 hours, 1,000 keys an hour
		for i := range 1000 {
			must0(t, s.Set(fmt.Sprintf("h%d-%d", h, i), []byte(fmt.Sprintf("%d", h))))
		}
		if h == 4 {
			must0(t, s.Set("h0-7", []byte("rewritten")))
		}
		c.t = c.t.Add(time.Hour)
	}
	// Now t0+6h: the segments of hours 0 and 1 (newest record before t0+2h) are past the
	// window; hour 2's newest record is exactly 4 h old, and stays.
	must0(t, s.Set("tick", []byte("x"))) // drops are checked on writes
	st := s.Stats()
	if st.Segments != 5 { // hours 2, 3, 4, 5 and the one "tick" went to
		t.Fatalf("%d segments, want 5 (%+v)", st.Segments, st)
	}
	check := func(s *Store) {
		t.Helper()
		for _, tc := range []struct{ key, want string }{
			{"h0-1", "<nil>"}, {"h1-999", "<nil>"}, {"h0-7", "rewritten"},
			{"h2-0", "2"}, {"h3-500", "3"}, {"h4-999", "4"}, {"h5-1", "5"}, {"tick", "x"},
		} {
			if got := get(t, s, tc.key); got != tc.want {
				t.Fatalf("%s = %q, want %q", tc.key, got, tc.want)
			}
		}
	}
	check(s)
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(files) != 4*3+1 { // 4 sealed segments (log, idx, bloom) and the active log
		t.Fatalf("files: %v", files)
	}
	must0(t, s.Close())
	s = openAt(t, dir, cfg, c)
	defer s.Close()
	check(s)
	// A lookup of keys never written mostly stays in the filters: count the misses that
	// reached an index file through a false positive.
	fp := 0
	for i := range 10_000 {
		h := xxhash.Sum64String(fmt.Sprintf("absent-%d", i))
		for _, g := range s.segs {
			if g.sealed() && g.filter.has(h) {
				fp++
			}
		}
	}
	if fp > 4*10_000*3/100 { // 4 filters at 1 %: well under 3 %
		t.Fatalf("%d false positives in 40,000 probes", fp)
	}
	// The union of the sealed segments' keys turns most of those away with one test.
	passed := 0
	for i := range 10_000 {
		if s.union.has(unionHash(uint32(xxhash.Sum64String(fmt.Sprintf("absent-%d", i))))) {
			passed++
		}
	}
	if s.union == nil || passed > 300 {
		t.Fatalf("the union filter passed %d of 10,000 absent keys", passed)
	}
}

// TestStoreSealsAFullIndex: the newest segment is sealed once its index holds MaxActiveKeys,
// and every key still reads back.
func TestStoreSealsAFullIndex(t *testing.T) {
	c := &clock{t0}
	s := openAt(t, t.TempDir(), Config{MaxActiveKeys: 1000}, c)
	defer s.Close()
	for i := range 3500 {
		must0(t, s.Set(fmt.Sprint(i), []byte(fmt.Sprint(i))))
	}
	if st := s.Stats(); st.Segments != 4 || st.Keys != 3500 {
		t.Fatalf("stats %+v, want 4 segments and 3500 keys", st)
	}
	for _, i := range []int{0, 999, 1000, 2500, 3499} {
		if got := get(t, s, fmt.Sprint(i)); got != fmt.Sprint(i) {
			t.Fatalf("%d = %q", i, got)
		}
	}
}

type updateCtx struct {
	goka.DefaultUpdateContext
	ts time.Time
}

func (u updateCtx) Timestamp() time.Time { return u.ts }

// TestUpdateSkipsExpiredRecords: restoring from the changelog, a record older than the window
// is not stored (and counted), a newer one is stored in the segment of its own time, and a
// tombstone deletes.
func TestUpdateSkipsExpiredRecords(t *testing.T) {
	c := &clock{t0.Add(10 * time.Hour)}
	cfg := Config{Window: 4 * time.Hour, Segments: 4}
	s := openAt(t, t.TempDir(), cfg, c)
	defer s.Close()
	up := Update(cfg.Window, c.now)
	for h := range 10 {
		ts := t0.Add(time.Duration(h)*time.Hour + time.Minute)
		must0(t, up(updateCtx{ts: ts}, s, fmt.Sprintf("k%d", h), []byte(fmt.Sprint(h))))
		must0(t, s.SetOffset(int64(h)))
	}
	must0(t, up(updateCtx{ts: t0.Add(9 * time.Hour)}, s, "k8", nil))
	must0(t, s.MarkRecovered())
	for h := range 10 {
		want := fmt.Sprint(h)
		if h < 6 || h == 8 { // 6:01 is within 4 h of 10:00; 5:01 is not
			want = "<nil>"
		}
		if got := get(t, s, fmt.Sprintf("k%d", h)); got != want {
			t.Fatalf("k%d = %q, want %q", h, got, want)
		}
	}
	if st := s.Stats(); st.Skipped != 6 || st.Segments != 4 {
		t.Fatalf("stats %+v, want 6 skipped and 4 segments (hours 6..9)", st)
	}
}

// TestIteratorNewestValues: the iterator yields each live key once with its newest value,
// across segments, without deleted keys; a range keeps a prefix.
func TestIteratorNewestValues(t *testing.T) {
	c := &clock{t0}
	s := openAt(t, t.TempDir(), Config{MaxActiveKeys: 100}, c)
	defer s.Close()
	want := map[string]string{}
	for i := range 250 {
		k := fmt.Sprintf("k%03d", i)
		must0(t, s.Set(k, []byte("old")))
		want[k] = "old"
	}
	for i := 0; i < 250; i += 10 {
		k := fmt.Sprintf("k%03d", i)
		must0(t, s.Set(k, []byte("new")))
		want[k] = "new"
	}
	must0(t, s.Delete("k001"))
	delete(want, "k001")
	got := map[string]string{}
	it := must(s.Iterator())
	for it.Next() {
		k := string(it.Key())
		if _, dup := got[k]; dup {
			t.Fatalf("%s twice", k)
		}
		got[k] = string(must(it.Value()))
	}
	must0(t, it.Err())
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("iterated %d keys, want %d", len(got), len(want))
	}
	it2 := must(s.IteratorWithRange([]byte("k24"), nil))
	var keys []string
	for it2.Next() {
		keys = append(keys, string(it2.Key()))
	}
	sort.Strings(keys)
	if fmt.Sprint(keys) != "[k240 k241 k242 k243 k244 k245 k246 k247 k248 k249]" {
		t.Fatalf("prefix k24: %v", keys)
	}
}

// TestFilter: no key added is ever missed, and keys never added pass at about the rate asked
// for (1 %; a blocked filter, under 2 %), also after a write and read back.
func TestFilter(t *testing.T) {
	const n = 100_000
	f := newFilter(n, 0.01)
	for i := range n {
		f.add(xxhash.Sum64String(fmt.Sprint("in-", i)))
	}
	path := filepath.Join(t.TempDir(), "f.bloom")
	must0(t, writeFilterFile(path, f))
	g := must(readFilterFile(path))
	fp := 0
	for i := range n {
		if !g.has(xxhash.Sum64String(fmt.Sprint("in-", i))) {
			t.Fatalf("key %d missed", i)
		}
		if g.has(xxhash.Sum64String(fmt.Sprint("out-", i))) {
			fp++
		}
	}
	if rate := float64(fp) / n; rate > 0.02 {
		t.Fatalf("false positives %.2f %%", 100*rate)
	} else {
		t.Logf("false positives %.2f %%, %.1f bits a key, k %d", 100*rate, float64(len(g.words)*64)/n, g.k)
	}
}
