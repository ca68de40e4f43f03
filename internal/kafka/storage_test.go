package kafka

import (
	"testing"
	"time"

	"github.com/lovoo/goka/storage"
)

// TestGokaStorageOffsets: after recovery the offset reaches LevelDB at most once per interval,
// reads back as the newest one all the same, and is written on Close, so a reopened table
// resumes from the last acknowledged write; before recovery goka's own handling applies.
func TestGokaStorageOffsets(t *testing.T) {
	dir := t.TempDir()
	open := func() storage.Storage {
		st, err := GokaStorage(dir)("bench-table", 2)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Open(); err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := open()
	if off, err := st.GetOffset(-2); err != nil || off != -2 {
		t.Fatalf("empty table: offset %d, %v; want the default -2", off, err)
	}
	if err := st.SetOffset(40); err != nil { // recovering: kept by goka's storage
		t.Fatal(err)
	}
	if off, _ := st.GetOffset(-2); off != 40 {
		t.Fatalf("recovering: offset %d, want 40", off)
	}
	clock := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	lo := st.(*lazyOffset)
	lo.now = func() time.Time { return clock }
	if err := st.MarkRecovered(); err != nil {
		t.Fatal(err)
	}
	if err := st.Set("k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	stored := func() int64 {
		off, err := lo.Storage.GetOffset(-2)
		if err != nil {
			t.Fatal(err)
		}
		return off
	}
	for o := int64(41); o <= 50; o++ {
		if err := st.SetOffset(o); err != nil {
			t.Fatal(err)
		}
	}
	if s, off := stored(), must(st.GetOffset(-2)); s != 40 || off != 50 {
		t.Fatalf("within the interval: stored %d, read %d; want 40 and 50", s, off)
	}
	clock = clock.Add(OffsetSyncInterval)
	st.SetOffset(51)
	if s := stored(); s != 51 {
		t.Fatalf("after the interval: stored %d, want 51", s)
	}
	st.SetOffset(53)
	st.SetOffset(52) // never goes back
	if s, off := stored(), must(st.GetOffset(-2)); s != 51 || off != 53 {
		t.Fatalf("stored %d, read %d; want 51 and 53", s, off)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = open()
	defer st.Close()
	if off := must(st.GetOffset(-2)); off != 53 {
		t.Fatalf("reopened: offset %d, want 53 (written on Close)", off)
	}
	if v, err := st.Get("k"); err != nil || string(v) != "v" {
		t.Fatalf("reopened: value %q, %v", v, err)
	}
}

func must(v int64, err error) int64 {
	if err != nil {
		panic(err)
	}
	return v
}
