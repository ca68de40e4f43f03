package features

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lovoo/goka"

	"github.com/backflowhq/backflow/internal/kafka"
)

// updateCtx is goka's UpdateContext for a changelog record written at ts.
type updateCtx struct{ ts time.Time }

func (u updateCtx) Topic() goka.Stream    { return "t-table" }
func (u updateCtx) Partition() int32      { return 0 }
func (u updateCtx) Offset() int64         { return 0 }
func (u updateCtx) Headers() goka.Headers { return nil }
func (u updateCtx) Timestamp() time.Time  { return u.ts }

// TestStorageKeepsEachKindWhereItBelongs: request entries go to the claims store, tenant,
// user and model entries to LevelDB; the table's offset is the lower of the two; a restore
// skips request entries older than the window and keeps aggregates of any age; all of it
// reads back after a reopen; and a partition in the former layout (request entries in LevelDB)
// is emptied so the changelog rebuilds it.
func TestStorageKeepsEachKindWhereItBelongs(t *testing.T) {
	dir := t.TempDir()
	const window = 24 * time.Hour
	build := Storage(dir, kafka.GokaStorage(dir), window)
	open := func() *splitStore {
		t.Helper()
		st, err := build("g-table", 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Open(); err != nil {
			t.Fatal(err)
		}
		return st.(*splitStore)
	}
	s := open()
	now := time.Now()
	up := Update(window, func() time.Time { return now })
	restore := []struct {
		key string
		age time.Duration
	}{{"req-old", 25 * time.Hour}, {"req-new", time.Hour}, {TenantKeyPrefix + "acme", 400 * 24 * time.Hour}, {UserKey("acme", "u1"), 30 * 24 * time.Hour}, {ModelKeyPrefix + "m1", time.Minute}}
	for _, r := range restore {
		if err := up(updateCtx{now.Add(-r.age)}, s, r.key, []byte("v-"+r.key)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetOffset(4); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkRecovered(); err != nil {
		t.Fatal(err)
	}
	if err := s.Set("req-live", []byte("x")); err != nil {
		t.Fatal(err)
	}
	check := func(s *splitStore, stage string) {
		t.Helper()
		want := map[string]string{"req-old": "", "req-new": "v-req-new", "req-live": "x", TenantKeyPrefix + "acme": "v-tenant/acme",
			UserKey("acme", "u1"): "v-" + UserKey("acme", "u1"), ModelKeyPrefix + "m1": "v-model/m1"}
		for k, w := range want {
			v, err := s.Get(k)
			if err != nil || string(v) != w {
				t.Fatalf("%s: %s = %q (%v), want %q", stage, k, v, err, w)
			}
			// Each key is in its own store only.
			inReq, _ := s.requests.Get(k)
			inAgg, _ := s.aggregates.Get(k)
			if w != "" && (isAggregateKey(k) == (inReq != nil) || isAggregateKey(k) != (inAgg != nil)) {
				t.Fatalf("%s: %s in the claims store %v, in LevelDB %v", stage, k, inReq != nil, inAgg != nil)
			}
		}
		if st := s.requests.Stats(); st.Skipped != 0 && stage == "reopened" {
			t.Fatalf("reopened: %d skipped", st.Skipped)
		}
	}
	check(s, "written")
	if s.requests.Stats().Skipped != 1 {
		t.Fatalf("the restore skipped %d request entries, want 1 (req-old)", s.requests.Stats().Skipped)
	}
	// The offset is the lower of the stores'.
	if err := s.requests.SetOffset(9); err != nil {
		t.Fatal(err)
	}
	if off, _ := s.GetOffset(-7); off != 4 {
		t.Fatalf("offset %d, want 4 (LevelDB's)", off)
	}
	keys := map[string]bool{}
	it, err := s.Iterator()
	if err != nil {
		t.Fatal(err)
	}
	for it.Next() {
		keys[string(it.Key())] = true
	}
	it.Release()
	if len(keys) != 5 || !keys["req-live"] || !keys[TenantKeyPrefix+"acme"] {
		t.Fatalf("iterated %v, want the 5 live keys of both stores", keys)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r := open()
	check(r, "reopened")
	if off, _ := r.GetOffset(-7); off != 4 {
		t.Fatalf("reopened: offset %d, want 4", off)
	}
	r.Close()

	// The former layout: a LevelDB folder with no claims store beside it is removed.
	base := filepath.Join(dir, "g-table.1")
	old, err := kafka.GokaStorage(dir)("g-table", 1)
	if err != nil {
		t.Fatal(err)
	}
	old.Set("req-from-before", []byte("1"))
	old.SetOffset(77)
	old.Close()
	st, err := build("g-table", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if off, _ := st.GetOffset(-7); off != -7 {
		t.Fatalf("former layout: offset %d kept, want none (a restore from the changelog)", off)
	}
	if v, _ := st.Get("req-from-before"); v != nil {
		t.Fatal("former layout: a request entry survived in LevelDB")
	}
	if _, err := os.Stat(base + ".requests"); err != nil {
		t.Fatalf("no claims store made: %v", err)
	}
}
