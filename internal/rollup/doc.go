// Package rollup defines the dashboards' rollups: per-minute, per-hour and per-day aggregates of the
// sunk tables that a panel reads instead of the raw rows, and the SQL that keeps them exact.
// Start with All (each Rollup: its dimensions, measures and the tables it reads), Recompute
// (what the sink's rollup loop runs for the minutes a flush wrote into) and Rollup.Range (the
// rows a panel reads for its time range).
//
// A rollup row is never updated in place: Recompute re-aggregates whole minutes from the
// deduplicated table (FINAL) and writes them again with a higher version, in a
// ReplacingMergeTree, so running it twice, or after a replay or a redelivered flush, leaves the
// same answer. docs/dashboards.md explains the design and why it is exact.
package rollup
