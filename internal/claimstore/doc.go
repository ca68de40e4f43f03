// Package claimstore is a goka table storage built for a table whose values live for a fixed
// window after they are written, such as ingest's dedupe claims: Store, opened per table
// partition by Builder, restored from the changelog through Update.
//
// Writes are appended to the newest of a series of time segments (Config.Segments per
// window), each an append-only log with a hash index: in memory while the segment is the newest,
// in a file with a Bloom filter in memory once it is sealed. A lookup probes the newest
// segment's index and each older segment's filter, so it costs the same whatever the number of
// keys, and reads the disk only for a key that is there (or a filter's false positive). A
// segment's log is rewritten once, when it is sealed, with only each key's newest record
// (seal.go); a segment whose newest record is older than the window is deleted whole.
package claimstore
