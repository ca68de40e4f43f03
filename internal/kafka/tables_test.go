package kafka

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/lovoo/goka/storage"
)

// countingStorage is goka's in-memory storage that counts its Opens and Closes.
type countingStorage struct {
	storage.Storage
	mu            sync.Mutex
	opens, closes int
}

func (c *countingStorage) Open() error {
	c.mu.Lock()
	c.opens++
	c.mu.Unlock()
	return c.Storage.Open()
}
func (c *countingStorage) Close() error { c.mu.Lock(); c.closes++; c.mu.Unlock(); return nil }
func (c *countingStorage) counts() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.opens, c.closes
}

func TestTablesKeepAPartitionOpenAcrossGenerations(t *testing.T) {
	built := map[int32][]*countingStorage{}
	var mu sync.Mutex
	tables := NewTables(func(topic string, p int32) (storage.Storage, error) {
		mu.Lock()
		defer mu.Unlock()
		c := &countingStorage{Storage: storage.NewMemory()}
		built[p] = append(built[p], c)
		return c, nil
	}, false)
	tables.keep = time.Hour
	b := tables.Builder()

	// Generation 1 opens partitions 0 and 1 and writes to 0.
	s0, err := b("t-table", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s0.Open(); err != nil {
		t.Fatal(err)
	}
	if err := s0.Set("k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := s0.SetOffset(41); err != nil {
		t.Fatal(err)
	}
	s1, _ := b("t-table", 1)
	s1.Open()
	// A second open of an open partition is refused, not served from a second storage.
	if _, err := b("t-table", 0); !errors.Is(err, ErrTableOpen) {
		t.Fatalf("second open: %v, want ErrTableOpen", err)
	}
	// The generation ends: goka closes both.
	s0.Close()
	s1.Close()
	// Generation 2 takes partition 0 back: the same storage, open, with its value and offset.
	again, err := b("t-table", 0)
	if err != nil {
		t.Fatal(err)
	}
	again.Open()
	if v, _ := again.Get("k"); string(v) != "v" {
		t.Fatalf("value after the generation change: %q, want v", v)
	}
	if off, _ := again.GetOffset(-1); off != 41 {
		t.Fatalf("offset after the generation change: %d, want 41", off)
	}
	if n := len(built[0]); n != 1 {
		t.Fatalf("partition 0 built %d times, want 1", n)
	}
	if o, c := built[0][0].counts(); o != 1 || c != 0 {
		t.Fatalf("partition 0: %d opens and %d closes, want 1 and 0", o, c)
	}
	if tables.Opened() != 2 || tables.Reused() != 1 {
		t.Fatalf("opened %d, reused %d; want 2 and 1", tables.Opened(), tables.Reused())
	}
	// Close closes every partition once, released (1) or in use (0).
	if err := tables.Close(); err != nil {
		t.Fatal(err)
	}
	for p := range int32(2) {
		if _, c := built[p][0].counts(); c != 1 {
			t.Fatalf("partition %d closed %d times, want 1", p, c)
		}
	}
	if _, err := b("t-table", 0); !errors.Is(err, ErrClosedTables) {
		t.Fatalf("open after Close: %v, want ErrClosedTables", err)
	}
}

func TestTablesCloseAPartitionNotTakenBack(t *testing.T) {
	var c *countingStorage
	tables := NewTables(func(string, int32) (storage.Storage, error) {
		c = &countingStorage{Storage: storage.NewMemory()}
		return c, nil
	}, false)
	tables.keep = time.Millisecond
	s, _ := tables.Builder()("t-table", 3)
	first := c
	s.Close()
	// Wait for the state asserted on: the partition closed by its timer.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, closes := c.counts(); closes == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a released partition not taken back was never closed")
		}
		time.Sleep(time.Millisecond)
	}
	// Opened again, it is a new storage.
	s2, _ := tables.Builder()("t-table", 3)
	if s2.(*keptTable).Storage == storage.Storage(first) || tables.Opened() != 2 {
		t.Fatalf("opened %d, want 2: a fresh storage, not the one closed", tables.Opened())
	}
	tables.Close()
}
