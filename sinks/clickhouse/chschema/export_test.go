package chschema

// The engine's own statements, for TestMigrationsOnCurrentClickHouse to run them on chDB as
// the engine runs them on empty tables.
var (
	IsBackfill   = isBackfill
	ParseRebuild = parseRebuild
	SameKey      = sameKey
	EmptyRebuild = emptyRebuild
)
