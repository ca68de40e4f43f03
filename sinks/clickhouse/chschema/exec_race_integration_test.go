package chschema

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/backflowhq/backflow/test/testenv"
)

// racingConn runs each statement once on behalf of another process just before running it
// itself: the other instance of a stream's stage that follows the same new schema and adds the
// same column between this one's check and its ALTER.
type racingConn struct {
	driver.Conn
	once sync.Once
}

func (c *racingConn) Exec(ctx context.Context, query string, args ...any) error {
	var err error
	c.once.Do(func() { err = c.Conn.Exec(ctx, query, args...) })
	if err != nil {
		return err
	}
	return c.Conn.Exec(ctx, query, args...)
}

// TestAddColumnRacedByAnotherProcess: an ADD COLUMN that another process ran between the
// check and the statement is done, not a failure (the server refuses it as a duplicate); an
// ADD COLUMN that fails for another reason still fails.
func TestAddColumnRacedByAnotherProcess(t *testing.T) {
	testenv.Integration(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := testenv.ID("it_")
	addr := testenv.Get(testenv.ClickHouseAddr)
	testenv.Database(t, ctx, db, func(ctx context.Context) (driver.Conn, error) { return Open(ctx, Conn{Addr: addr}) })
	conn, err := Open(ctx, Conn{Addr: addr, Database: db})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Exec(ctx, "CREATE TABLE events (id UInt64) ENGINE = MergeTree ORDER BY id"); err != nil {
		t.Fatal(err)
	}
	add := oneServer("ALTER TABLE events ADD COLUMN reviewer String DEFAULT ''")
	if err := execStmt(ctx, &racingConn{Conn: conn}, add); err != nil {
		t.Fatalf("an ADD COLUMN another process ran first: %v, want done", err)
	}
	var n uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM system.columns WHERE database = ? AND table = 'events' AND name = 'reviewer'", db).Scan(&n); err != nil || n != 1 {
		t.Fatalf("column reviewer: %d (%v), want 1", n, err)
	}
	bad := oneServer("ALTER TABLE events ADD COLUMN score UInt8 DEFAULT 'not a number'")
	if err := execStmt(ctx, &racingConn{Conn: conn}, bad); err == nil {
		t.Fatal("an ADD COLUMN the server refuses for its default: no error")
	}
}
