package claimstore

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestReopenAfterACleanCloseRebuildsNothing: a restart used to rebuild the newest segment's
// index by reading its whole log and the union filter by reading every sealed index file, so a
// restart on a kept disk cost as much as a restore. After a clean Close, Open reads neither;
// what it finds is the same store. After a crash (no files left by Close) it rebuilds both.
func TestReopenAfterACleanCloseRebuildsNothing(t *testing.T) {
	dir := t.TempDir()
	c := &clock{t0}
	cfg := Config{Window: 28 * time.Hour, Segments: 28} // an hour a segment
	s := openAt(t, dir, cfg, c)
	must0(t, s.MarkRecovered())
	// Three hours of claims: two sealed segments and the active one.
	const perHour = 20_000
	for h := range 3 {
		for i := range perHour {
			must0(t, s.Set(fmt.Sprintf("h%d-%d", h, i), []byte(fmt.Sprintf("v%d-%d", h, i))))
		}
		must0(t, s.SetOffset(int64((h+1)*perHour-1)))
		c.t = c.t.Add(time.Hour)
	}
	c.t = c.t.Add(-30 * time.Minute) // inside the third hour: its segment stays active
	must0(t, s.Set("late", []byte("x")))
	must0(t, s.SetOffset(3*perHour))
	before := s.Stats()
	if before.Segments != 3 {
		t.Fatalf("%d segments, want 3", before.Segments)
	}
	must0(t, s.Close())
	for _, f := range []string{fmt.Sprintf("%016d.active", 2), unionFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("Close left no %s: %v", f, err)
		}
	}

	r := openAt(t, dir, cfg, c)
	st := r.Stats()
	if st.OpenScanned != 0 || st.OpenRebuiltUnion {
		t.Fatalf("reopen after a clean close read %d bytes of log and rebuilt the union: %v; want 0 and false", st.OpenScanned, st.OpenRebuiltUnion)
	}
	if st.Keys != before.Keys || st.Records != before.Records || st.Segments != 3 {
		t.Fatalf("reopened: %d keys, %d records, %d segments; want %d, %d, 3", st.Keys, st.Records, st.Segments, before.Keys, before.Records)
	}
	if off := must(r.GetOffset(-1)); off != 3*perHour {
		t.Fatalf("offset %d, want %d", off, 3*perHour)
	}
	for _, k := range []string{"h0-7", "h1-19999", "h2-123", "late"} {
		if get(t, r, k) == "<nil>" {
			t.Fatalf("%s lost across the reopen", k)
		}
	}
	if get(t, r, "h9-1") != "<nil>" {
		t.Fatal("a key never written is found")
	}
	// The files were read once: a crash from here must not trust them.
	for _, f := range []string{fmt.Sprintf("%016d.active", 2), unionFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); !os.IsNotExist(err) {
			t.Fatalf("%s outlived the open that read it: %v", f, err)
		}
	}
	// Writes after the reopen go on in the same active segment and index.
	must0(t, r.Set("h2-123", []byte("newer")))
	must0(t, r.Set("after", []byte("y")))
	must0(t, r.SetOffset(3*perHour+2))
	must0(t, r.MarkRecovered())

	// A crash now (files not closed, nothing written by Close): the next Open rebuilds.
	r.closeFiles()
	r2 := openAt(t, dir, cfg, c)
	defer r2.Close()
	st2 := r2.Stats()
	if st2.OpenScanned == 0 || !st2.OpenRebuiltUnion {
		t.Fatalf("after a crash: scanned %d bytes, rebuilt union %v; want a rebuild of both", st2.OpenScanned, st2.OpenRebuiltUnion)
	}
	if get(t, r2, "h2-123") != "newer" || get(t, r2, "after") != "y" || get(t, r2, "h0-7") != "v0-7" {
		t.Fatalf("after a crash: h2-123=%s after=%s h0-7=%s", get(t, r2, "h2-123"), get(t, r2, "after"), get(t, r2, "h0-7"))
	}
	if off := must(r2.GetOffset(-1)); off != 3*perHour+2 {
		t.Fatalf("after a crash: offset %d, want %d", off, 3*perHour+2)
	}
}

// TestReopenUnionFollowsSegmentsSealedAndDropped: a union file from an older close still
// serves when segments were sealed and dropped since; the sealed ones are added from their
// index files, so no key of theirs is missed.
func TestReopenUnionFollowsSegmentsSealedAndDropped(t *testing.T) {
	dir := t.TempDir()
	c := &clock{t0}
	cfg := Config{Window: 5 * time.Hour, Segments: 5}
	s := openAt(t, dir, cfg, c)
	for h := range 3 {
		for i := range 1000 {
			must0(t, s.Set(fmt.Sprintf("h%d-%d", h, i), []byte("v")))
		}
		c.t = c.t.Add(time.Hour)
	}
	must0(t, s.Close())
	// Keep the union of that close, open, seal two more hours and crash (no union written).
	union := must(os.ReadFile(filepath.Join(dir, unionFile)))
	r := openAt(t, dir, cfg, c)
	for h := 3; h < 6; h++ {
		for i := range 1000 {
			must0(t, r.Set(fmt.Sprintf("h%d-%d", h, i), []byte("v")))
		}
		c.t = c.t.Add(time.Hour)
	}
	must0(t, r.MarkRecovered()) // written: the crash loses nothing of it
	r.closeFiles()
	must0(t, os.WriteFile(filepath.Join(dir, unionFile), union, 0o644))
	r2 := openAt(t, dir, cfg, c)
	defer r2.Close()
	if st := r2.Stats(); st.OpenRebuiltUnion || st.Segments != 5 {
		t.Fatalf("rebuilt the union: %v, %d segments; want the older union file used, 5 segments", st.OpenRebuiltUnion, st.Segments)
	}
	if r2.unionDead != 1000 {
		t.Fatalf("%d dead keys in the union, want h0's 1000", r2.unionDead)
	}
	for h := 1; h < 6; h++ { // h0 is past the 5-hour window, dropped
		for i := range 1000 {
			if k := fmt.Sprintf("h%d-%d", h, i); get(t, r2, k) != "v" {
				t.Fatalf("%s missed after the reopen", k)
			}
		}
	}
}
