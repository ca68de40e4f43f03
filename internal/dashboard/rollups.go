package dashboard

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/backflowhq/backflow/internal/rollup"
)

// Coverage says which part of a panel's range came from its rollup and which from raw rows.
type Coverage struct {
	Rollup string `json:"rollup"` // the rollup's name (Panel.Rollup)
	// RawFrom is the first minute read from raw rows, in Unix seconds: the oldest watermark of
	// the rollup's sources, as Rollup.Range takes it. The minutes before it were read from the
	// rollup. 0 when a source has no watermark yet: every minute was read from raw rows.
	RawFrom int64 `json:"raw_from"`
}

// CoverageOf is what a panel reading r reads from raw rows, given the watermarks.
func CoverageOf(r rollup.Rollup, watermarks map[string]time.Time) Coverage {
	c := Coverage{Rollup: r.Name}
	for i, src := range r.Sources() {
		w, ok := watermarks[src]
		if !ok {
			return Coverage{Rollup: r.Name}
		}
		if i == 0 || w.Unix() < c.RawFrom {
			c.RawFrom = w.Unix()
		}
	}
	return c
}

// RollupLag is the health strip's rollup card: how far the rollups lag behind the newest event
// the sinks landed.
type RollupLag struct {
	// Sources are the watermark of each table the rollups read, in rollup.Sources' order.
	Sources []SourceWatermark `json:"sources"`
	// NewestEvent is the newest event time the ClickHouse sinks landed (the ledger's
	// max_event_time, read through the sink rollup), at most the server's now, in Unix
	// seconds; null when none landed.
	NewestEvent *int64 `json:"newest_event"`
	// RolledUpTo is the end of the newest minute rolled up, over the sources (the rollup loop's
	// position), in Unix seconds; null when nothing was rolled up.
	RolledUpTo *int64 `json:"rolled_up_to"`
	// LagS is NewestEvent - RolledUpTo, at least 0: the seconds of landed event time no rollup
	// holds yet. Null when either is unknown.
	LagS  *int64 `json:"lag_s"`
	Error string `json:"error,omitempty"`
}

// SourceWatermark is one source table's watermark.
type SourceWatermark struct {
	Source string `json:"source"`
	Minute *int64 `json:"minute"` // Unix seconds of the newest minute rolled up; null when none
}

// ReadRollupLag reads the watermarks and the newest landed event time. It never fails: an error
// is in Error, with what could be read.
func ReadRollupLag(ctx context.Context, conn driver.Conn) RollupLag {
	l := RollupLag{Sources: []SourceWatermark{}}
	wm, err := rollup.ReadWatermarks(ctx, conn)
	if err != nil {
		l.Error = err.Error()
		return l
	}
	var newestMinute int64 = -1
	for _, src := range rollup.Sources() {
		sw := SourceWatermark{Source: src}
		if w, ok := wm[src]; ok {
			m := w.Unix()
			sw.Minute = &m
			newestMinute = max(newestMinute, m)
		}
		l.Sources = append(l.Sources, sw)
	}
	var newest, now time.Time
	q := "SELECT max(last_event_time), now() FROM " + rollup.Sink.AllTime()
	if err := conn.QueryRow(ctx, q).Scan(&newest, &now); err != nil {
		l.Error = fmt.Sprintf("dashboard: newest landed event: %v", err)
		return l
	}
	if newest.Unix() > 0 {
		// An event dated after the server's clock (a producer's clock ahead of it, or a
		// stream whose records carry dates to come) counts as now: no rollup can hold a
		// minute that has not ended, so it is not lag.
		n := min(newest.Unix(), now.Unix())
		l.NewestEvent = &n
	}
	if newestMinute >= 0 {
		to := newestMinute + 60
		l.RolledUpTo = &to
	}
	if l.NewestEvent != nil && l.RolledUpTo != nil {
		lag := max(*l.NewestEvent-*l.RolledUpTo, 0)
		l.LagS = &lag
	}
	return l
}
