package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"time"

	chgo "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/backflowhq/backflow/internal/dashboard"
	"github.com/backflowhq/backflow/internal/rollup"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
	"github.com/backflowhq/backflow/test/dashdata"
	"github.com/backflowhq/backflow/test/stackclean"
)

// oldLayout is the last migration of the layout the panels read before the rollups: the tables
// sorted by (source_topic, request_id) and partitioned by month, and the per-minute views.
const oldLayout = 14

// The two layouts of one size.
const (
	layoutOld = "old"
	layoutNew = "new"
)

type bench struct {
	opt     options
	base    chschema.Conn
	lock    *lock
	started time.Time
	// from and to bound the traffic: the last --days days, ending inside a minute, as "now"
	// does; every range ends at to.
	from, to time.Time
	sum      summary
}

// db is one scratch database: its name and a connection open on it.
type db struct {
	layout, name string
	conn         driver.Conn
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// build makes one layout of a size with n requests (under the shared lock): the database,
// filled, and for the new layout its rollups. It returns the database even when it fails
// after making it, for the caller to drop.
func (b *bench) build(ctx context.Context, layout string, res *sizeResult) (db, error) {
	n := res.Requests
	if err := b.lock.shared(ctx); err != nil {
		return db{}, err
	}
	defer b.lock.release()
	d, err := b.create(ctx, layout, n)
	if err != nil {
		return d, err
	}
	start := time.Now()
	spec := dashdata.Spec{Requests: n, From: b.from, To: b.to, Progress: func(done uint64) {
		b.logf("%s %s: %s of %s requests written", sizeName(n), layout, sizeName(done), sizeName(n))
	}}
	if err := dashdata.Fill(ctx, d.conn, spec); err != nil {
		return d, fmt.Errorf("fill %s: %w", d.name, err)
	}
	res.FillS += time.Since(start).Seconds()
	b.logf("%s %s: filled in %.0f s; waiting for merges", sizeName(n), layout, time.Since(start).Seconds())
	if err := b.settle(ctx, d); err != nil {
		return d, err
	}
	if res.DiskMB == nil {
		res.DiskMB = map[string]float64{}
	}
	if layout == layoutOld {
		res.DiskMB[layout], err = diskMB(ctx, d.conn, d.name)
		return d, err
	}
	// The new layout's rollups, as an existing deployment's backfill makes them: every source,
	// every minute up to the newest request's.
	start = time.Now()
	for _, src := range rollup.Sources() {
		if err := rollup.Backfill(ctx, d.conn, src, b.from.Add(-time.Hour), b.to); err != nil {
			return d, err
		}
		b.logf("%s new: %s rolled up (%.0f s so far)", sizeName(n), src, time.Since(start).Seconds())
	}
	res.BackfillS = time.Since(start).Seconds()
	if err := b.settle(ctx, d); err != nil {
		return d, err
	}
	if res.Rows, err = rowCounts(ctx, d.conn); err != nil {
		return d, err
	}
	if res.DiskMB[layout], err = diskMB(ctx, d.conn, d.name); err != nil {
		return d, err
	}
	res.Layout, err = layoutOf(ctx, d.conn, d.name)
	return d, err
}

// timeOld times every panel's SQL over the views on the old layout, at --old-ranges, each
// panel's runs alone under the exclusive lock, best of --runs (once when slower than --old-once).
func (b *bench) timeOld(ctx context.Context, old db, res *sizeResult) error {
	for _, d := range b.opt.ranges {
		if !b.opt.oldRanges[d] {
			continue
		}
		rg, err := dashboard.LastRange(b.to, d)
		if err != nil {
			return err
		}
		for _, p := range dashboard.Panels {
			q := p
			if q.SQL = dashdata.ViewSQL[p.ID]; q.SQL == "" {
				q.SQL = p.SQL // a panel that reads no rollup reads the same in both layouts
			}
			t := &timing{}
			if err := b.lock.exclusive(ctx); err != nil {
				return err
			}
			for t.Runs < b.opt.runs && (t.Runs == 0 || t.BestMs <= float64(b.opt.oldOnce.Milliseconds())) {
				if err := b.once(ctx, old, q, rg, t); err != nil {
					b.lock.release()
					return err
				}
			}
			b.lock.release()
			res.panel(p.ID, rangeName(d)).Old = t
			b.logf("%s old %-24s last %-4s %s, %d rows read", res.Size, p.ID, rangeName(d), ms(t), t.RowsRead)
		}
	}
	return nil
}

// timeNew times every panel on the new layout of every size, interleaved: per panel and
// range, one exclusive hold in which the panel runs --runs times on each size in turn, so that
// the sizes' figures are pairs measured in one sitting.
func (b *bench) timeNew(ctx context.Context, news []db, results []sizeResult) error {
	for _, d := range b.opt.ranges {
		rg, err := dashboard.LastRange(b.to, d)
		if err != nil {
			return err
		}
		for _, p := range dashboard.Panels {
			if err := b.lock.exclusive(ctx); err != nil {
				return err
			}
			for range b.opt.runs {
				for i, nd := range news {
					if err := b.once(ctx, nd, p, rg, &results[i].panel(p.ID, rangeName(d)).New); err != nil {
						b.lock.release()
						return err
					}
				}
			}
			b.lock.release()
			for i := range news {
				t := results[i].panel(p.ID, rangeName(d)).New
				b.logf("%s new %-24s last %-4s %s, %d rows read", results[i].Size, p.ID, rangeName(d), ms(&t), t.RowsRead)
			}
		}
	}
	return nil
}

// once runs p over rg on d once and adds the run to t.
func (b *bench) once(ctx context.Context, d db, p dashboard.Panel, rg dashboard.Range, t *timing) error {
	ms, read, err := b.timeQuery(ctx, d.conn, p, rg)
	if err != nil {
		return fmt.Errorf("%s on %s: %w", p.ID, d.name, err)
	}
	if t.Runs == 0 || ms < t.BestMs {
		t.BestMs, t.RowsRead = ms, read
	}
	t.WorstMs = max(t.WorstMs, ms)
	t.Runs++
	return nil
}

// create makes a database of the layout: the old one gets the migrations up to 0014, the new
// one every migration, as backflow migrate applies them.
func (b *bench) create(ctx context.Context, layout string, n uint64) (db, error) {
	admin, err := chschema.Open(ctx, b.base)
	if err != nil {
		return db{}, err
	}
	defer admin.Close()
	sv, err := chschema.Server(ctx, admin)
	if err != nil {
		return db{}, err
	}
	b.sum.ClickHouse = sv.Raw
	name := stackclean.ID(stackclean.BenchmarkTag + "dash_" + strings.ToLower(sizeName(n)) + "_" + layout + "_")
	if err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return db{}, fmt.Errorf("create database %s: %w", name, err)
	}
	cfg := b.base
	cfg.Database = name
	d := db{layout: layout, name: name}
	if d.conn, err = chschema.Open(ctx, cfg); err != nil {
		return d, err
	}
	b.logf("%s %s: database %s", sizeName(n), layout, name)
	if layout == layoutNew {
		applied, err := chschema.Migrate(ctx, d.conn)
		if err != nil {
			return d, fmt.Errorf("%s: %w", name, err)
		}
		b.sum.NewMigrations = nil
		for _, m := range applied {
			b.sum.NewMigrations = append(b.sum.NewMigrations, fmt.Sprintf("%04d_%s", m.Version, m.Name))
		}
		return d, nil
	}
	ms, err := chschema.MigrationsFor(sv.Capabilities())
	if err != nil {
		return d, err
	}
	for _, m := range ms {
		if m.Version > oldLayout {
			break
		}
		for i, stmt := range m.Statements {
			if err := d.conn.Exec(ctx, stmt); err != nil {
				return d, fmt.Errorf("%s: migration %04d_%s statement %d: %w", name, m.Version, m.Name, i+1, err)
			}
		}
	}
	return d, nil
}

// drop drops the databases, unless --keep; it runs on an interrupt too.
func (b *bench) drop(dbs []db) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := b.lock.shared(ctx); err == nil {
		defer b.lock.release()
	}
	for _, d := range dbs {
		if d.name == "" {
			continue
		}
		if d.conn != nil {
			d.conn.Close()
		}
		if b.opt.keep {
			b.logf("kept database %s (--keep)", d.name)
			continue
		}
		admin, err := chschema.Open(ctx, b.base)
		if err == nil {
			err = stackclean.DropDatabase(ctx, admin, d.name)
			admin.Close()
		}
		if err != nil {
			b.logf("could not drop database %s: %v; go run ./test/leftovers --delete removes it", d.name, err)
		}
	}
}

// settle waits until ClickHouse runs no merge in the database (for 10 s on end), at most 30
// minutes: the panels are timed on the parts a table has at rest, not on a fresh insert's.
func (b *bench) settle(ctx context.Context, d db) error {
	q := "SELECT count() FROM system.merges WHERE database = '" + d.name + "'"
	quiet := 0
	for deadline := time.Now().Add(30 * time.Minute); time.Now().Before(deadline) && quiet < 5; {
		var running uint64
		if err := d.conn.QueryRow(ctx, q).Scan(&running); err != nil {
			return fmt.Errorf("merges: %w", err)
		}
		if running == 0 {
			quiet++
		} else {
			quiet = 0
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
	return nil
}

// timeQuery runs one panel query to its last row: the wall time in milliseconds, and the rows
// ClickHouse read (its progress packets).
func (b *bench) timeQuery(ctx context.Context, conn driver.Conn, p dashboard.Panel, rg dashboard.Range) (float64, uint64, error) {
	var read atomic.Uint64
	ctx, cancel := context.WithTimeout(ctx, b.opt.maxQuery)
	defer cancel()
	ctx = chgo.Context(ctx, chgo.WithProgress(func(pg *chgo.Progress) { read.Add(pg.Rows) }))
	start := time.Now()
	if _, err := dashboard.RunPanel(ctx, conn, p, rg, 1_000_000); err != nil {
		return 0, 0, err
	}
	return float64(time.Since(start).Microseconds()) / 1000, read.Load(), nil
}

// rowCounts are the raw rows of each sunk table and of the rollups' tables.
func rowCounts(ctx context.Context, conn driver.Conn) (map[string]uint64, error) {
	tables := []string{rollup.InferenceResults, rollup.GatewayLogs, rollup.ModerationHits, rollup.DLQEntries, rollup.SinkLedger}
	for _, r := range rollup.All {
		tables = append(tables, r.Tables()...)
	}
	out := map[string]uint64{}
	for _, t := range tables {
		var n uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM "+t).Scan(&n); err != nil {
			return nil, fmt.Errorf("count %s: %w", t, err)
		}
		out[t] = n
	}
	return out, nil
}

// diskMB is what the database's active parts take on disk.
func diskMB(ctx context.Context, conn driver.Conn, name string) (float64, error) {
	var b uint64
	err := conn.QueryRow(ctx, "SELECT sum(bytes_on_disk) FROM system.parts WHERE active AND database = ?", name).Scan(&b)
	return float64(b) / (1 << 20), err
}

// layoutOf is how the new layout keys inference_results: what the migrations made of it.
func layoutOf(ctx context.Context, conn driver.Conn, name string) (tableLayout, error) {
	var l tableLayout
	err := conn.QueryRow(ctx, "SELECT sorting_key, partition_key FROM system.tables WHERE database = ? AND name = ?", name, rollup.InferenceResults).
		Scan(&l.SortingKey, &l.PartitionKey)
	return l, err
}

// gitCommit is `git rev-parse --short HEAD`, or "" outside a git checkout.
func gitCommit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
