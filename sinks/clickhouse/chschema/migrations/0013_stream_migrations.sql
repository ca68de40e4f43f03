-- The versioned migrations of each declared stream's table (docs/streams.md). A stream's DDL is
-- derived from its subject's schema, not written in a file, so it is recorded here as it is
-- applied: version 1 creates the table and its view, each later version adds the columns a
-- newer writer schema added. schema_id is the registry id of the schema the version follows;
-- statements are the DDL as planned (single-server form; cluster mode runs them as the other
-- migrations' are). Plain MergeTree: a history, never collapsed. Two processes that add the
-- same columns at the same moment may both record them under one version.
CREATE TABLE IF NOT EXISTS stream_migrations (
    stream      String,
    table_name  String,
    version     UInt32,
    schema_id   UInt32,
    change      String,
    statements  Array(String),
    applied_at  DateTime
) ENGINE = MergeTree
ORDER BY (stream, version)
