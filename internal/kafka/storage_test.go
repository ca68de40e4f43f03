package kafka

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	ldbstorage "github.com/syndtr/goleveldb/leveldb/storage"

	"github.com/lovoo/goka/storage"
	"github.com/syndtr/goleveldb/leveldb"
)

func openStore(t *testing.T, dir string) *tableStore {
	t.Helper()
	st, err := GokaStorage(dir)("bench-table", 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Open(); err != nil {
		t.Fatal(err)
	}
	return st.(*tableStore)
}

// onDisk reads key straight from LevelDB: what a crash would leave.
func onDisk(t *testing.T, s *tableStore, key string) (string, bool) {
	t.Helper()
	v, err := s.db.Get([]byte(key), nil)
	if errors.Is(err, leveldb.ErrNotFound) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(v), true
}

// TestGokaStorageOffsets: the offset reads back as the newest one at once, reaches LevelDB
// when recovery ends, then at most once per interval, and on Close, so a reopened table
// resumes from the last acknowledged write.
func TestGokaStorageOffsets(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, dir)
	if off, err := st.GetOffset(-2); err != nil || off != -2 {
		t.Fatalf("empty table: offset %d, %v; want the default -2", off, err)
	}
	clock := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	st.now = func() time.Time { return clock }
	for o := int64(0); o <= 40; o++ { // recovering: values and offsets stay in memory
		must0(t, st.Set(fmt.Sprintf("r%02d", o), []byte("v")))
		must0(t, st.SetOffset(o))
	}
	if off := must(st.GetOffset(-2)); off != 40 {
		t.Fatalf("recovering: offset %d, want 40", off)
	}
	if _, ok := onDisk(t, st, offsetKey); ok {
		t.Fatal("offset written during recovery, before the values were")
	}
	must0(t, st.MarkRecovered())
	if v, _ := onDisk(t, st, offsetKey); v != "40" {
		t.Fatalf("after recovery: stored offset %q, want 40", v)
	}
	if _, ok := onDisk(t, st, "r40"); !ok {
		t.Fatal("recovered values not written with their offset")
	}
	must0(t, st.Set("k", []byte("v")))
	for o := int64(41); o <= 50; o++ {
		must0(t, st.SetOffset(o))
	}
	if v, _ := onDisk(t, st, offsetKey); v != "40" || must(st.GetOffset(-2)) != 50 {
		t.Fatalf("within the interval: stored %q, read %d; want 40 and 50", v, must(st.GetOffset(-2)))
	}
	clock = clock.Add(OffsetSyncInterval)
	must0(t, st.SetOffset(51))
	if v, _ := onDisk(t, st, offsetKey); v != "51" {
		t.Fatalf("after the interval: stored %q, want 51", v)
	}
	must0(t, st.SetOffset(53))
	must0(t, st.SetOffset(52)) // never goes back
	if off := must(st.GetOffset(-2)); off != 53 {
		t.Fatalf("read %d, want 53", off)
	}
	must0(t, st.Close())
	st = openStore(t, dir)
	defer st.Close()
	if off := must(st.GetOffset(-2)); off != 53 {
		t.Fatalf("reopened: offset %d, want 53 (written on Close)", off)
	}
	if v, err := st.Get("k"); err != nil || string(v) != "v" {
		t.Fatalf("reopened: value %q, %v", v, err)
	}
}

// TestGokaStorageBatchesWrites: values are read back at once but reach LevelDB together, with
// the offset they were acknowledged up to, when MaxDirtyEntries wait or the interval passed;
// what a crash leaves on disk never has an offset ahead of its values.
func TestGokaStorageBatchesWrites(t *testing.T) {
	st := openStore(t, t.TempDir())
	defer st.Close()
	clock := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	st.now = func() time.Time { return clock }
	must0(t, st.MarkRecovered())

	// A hot key written many times and a key deleted after its write: memory answers.
	for i := 0; i < 100; i++ {
		must0(t, st.Set("hot", []byte(fmt.Sprint(i))))
	}
	must0(t, st.Set("gone", []byte("x")))
	must0(t, st.Delete("gone"))
	must0(t, st.SetOffset(7))
	if v, _ := st.Get("hot"); string(v) != "99" {
		t.Fatalf("hot = %q, want 99", v)
	}
	if v, _ := st.Get("gone"); v != nil {
		t.Fatalf("deleted key reads %q", v)
	}
	if ok, _ := st.Has("hot"); !ok {
		t.Fatal("Has(hot) = false")
	}
	if _, ok := onDisk(t, st, "hot"); ok {
		t.Fatal("written to LevelDB before a flush was due")
	}
	if _, ok := onDisk(t, st, offsetKey); ok {
		t.Fatal("offset on disk without its values")
	}
	// Filling the batch flushes it: the values with the offset acknowledged so far.
	for i := 0; len(st.dirty) > 0 && i < MaxDirtyEntries; i++ {
		must0(t, st.Set(fmt.Sprintf("k%04d", i), []byte("v")))
	}
	if len(st.dirty) != 0 {
		t.Fatalf("%d values pending after %d writes", len(st.dirty), MaxDirtyEntries)
	}
	if v, _ := onDisk(t, st, "hot"); v != "99" {
		t.Fatalf("hot on disk %q, want 99", v)
	}
	if _, ok := onDisk(t, st, "gone"); ok {
		t.Fatal("deleted key on disk")
	}
	if v, _ := onDisk(t, st, offsetKey); v != "7" {
		t.Fatalf("offset on disk %q, want 7", v)
	}
	// A write after the flush, acknowledged within the interval: a crash now leaves offset 7
	// and the old value, so recovery replays the changelog from 7 and finds the new one.
	must0(t, st.Set("hot", []byte("100")))
	must0(t, st.SetOffset(8))
	if v, _ := onDisk(t, st, "hot"); v != "99" {
		t.Fatalf("hot on disk %q before the interval passed", v)
	}
	clock = clock.Add(OffsetSyncInterval)
	must0(t, st.SetOffset(9))
	if v, _ := onDisk(t, st, "hot"); v != "100" {
		t.Fatalf("hot on disk %q after the interval, want 100", v)
	}
	if v, _ := onDisk(t, st, offsetKey); v != "9" {
		t.Fatalf("offset on disk %q, want 9", v)
	}
}

// TestGokaStorageIterates: an iteration (goka's visitors) sees pending writes and deletions,
// never the offset's key.
func TestGokaStorageIterates(t *testing.T) {
	st := openStore(t, t.TempDir())
	defer st.Close()
	must0(t, st.MarkRecovered())
	for _, k := range []string{"a", "b", "c", "d"} {
		must0(t, st.Set(k, []byte("v"+k)))
	}
	must0(t, st.Delete("c"))
	must0(t, st.SetOffset(3))
	collect := func(it storage.Iterator, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		defer it.Release()
		var got string
		for it.Next() {
			v, _ := it.Value()
			got += string(it.Key()) + "=" + string(v) + " "
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := collect(st.Iterator()); got != "a=va b=vb d=vd " {
		t.Fatalf("iterated %q", got)
	}
	if got := collect(st.IteratorWithRange([]byte("b"), []byte("d"))); got != "b=vb " {
		t.Fatalf("range [b, d) iterated %q", got)
	}
	if got := collect(st.IteratorWithRange([]byte("d"), nil)); got != "d=vd " {
		t.Fatalf("prefix d iterated %q", got)
	}
}

// TestGokaStorageCopiesRecoveredValues: a value handed over during recovery may point into a
// fetch buffer that is reused; the store keeps its own copy.
func TestGokaStorageCopiesRecoveredValues(t *testing.T) {
	st := openStore(t, t.TempDir())
	defer st.Close()
	buf := []byte("value")
	must0(t, st.Set("k", buf))
	copy(buf, "XXXXX")
	if v, _ := st.Get("k"); string(v) != "value" {
		t.Fatalf("recovered value changed with its buffer: %q", v)
	}
}

func must0(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func must(v int64, err error) int64 {
	if err != nil {
		panic(err)
	}
	return v
}

// TestBufferedTables: a table file's bytes reach the file on Sync and Close, not with each
// block; the journal is written as before; and a database on it reads back, after a reopen,
// every value of a fill large enough to be compacted into table files.
func TestBufferedTables(t *testing.T) {
	dir := t.TempDir()
	files, err := ldbstorage.OpenFile(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	bt := bufferedTables{files}
	size := func(fd ldbstorage.FileDesc) int64 {
		info, err := os.Stat(filepath.Join(dir, fmt.Sprintf("%06d.%s", fd.Num, map[ldbstorage.FileType]string{ldbstorage.TypeTable: "ldb", ldbstorage.TypeJournal: "log"}[fd.Type])))
		if err != nil {
			t.Fatal(err)
		}
		return info.Size()
	}
	for _, c := range []struct {
		fd       ldbstorage.FileDesc
		buffered bool
	}{{ldbstorage.FileDesc{Type: ldbstorage.TypeTable, Num: 7}, true}, {ldbstorage.FileDesc{Type: ldbstorage.TypeJournal, Num: 8}, false}} {
		w, err := bt.Create(c.fd)
		if err != nil {
			t.Fatal(err)
		}
		block := make([]byte, 4096)
		for range 3 {
			if _, err := w.Write(block); err != nil {
				t.Fatal(err)
			}
		}
		if got, want := size(c.fd), map[bool]int64{true: 0, false: 3 * 4096}[c.buffered]; got != want {
			t.Fatalf("%v: %d bytes in the file after three blocks, want %d", c.fd, got, want)
		}
		if err := w.Sync(); err != nil {
			t.Fatal(err)
		}
		if got := size(c.fd); got != 3*4096 {
			t.Fatalf("%v: %d bytes after Sync, want %d", c.fd, got, 3*4096)
		}
		if _, err := w.Write(block); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if got := size(c.fd); got != 4*4096 {
			t.Fatalf("%v: %d bytes after Close, want %d", c.fd, got, 4*4096)
		}
	}
	files.Close()

	tables := t.TempDir()
	const n = 60_000 // about 14 MB of values: several write buffers, flushed and compacted into table files
	value := func(i int) string { return fmt.Sprintf("value-%d-%0200d", i, i) }
	st, err := GokaStorage(tables)("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.MarkRecovered(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := st.Set(fmt.Sprintf("key-%06d", i), []byte(value(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.SetOffset(n); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	ldb, _ := filepath.Glob(filepath.Join(tables, "t.0", "*.ldb"))
	if len(ldb) == 0 {
		t.Fatal("no table file written: the fill did not reach the buffered path")
	}
	st, err = GokaStorage(tables)("t", 0) // reopens: the first Close released the lock
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if off, err := st.GetOffset(-1); err != nil || off != n {
		t.Fatalf("offset %d, %v; want %d", off, err, n)
	}
	for i := 0; i < n; i += 997 {
		v, err := st.Get(fmt.Sprintf("key-%06d", i))
		if err != nil || string(v) != value(i) {
			t.Fatalf("key-%06d: %.30q, %v", i, v, err)
		}
	}
}
