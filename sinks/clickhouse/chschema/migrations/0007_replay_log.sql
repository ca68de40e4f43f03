-- One row per partition of every executed replay (backflow replay --execute): who moved which
-- group's offsets, when, with which spec, from where to where, and what it did to the stage's
-- state (new ingest epoch, feature state reset). The same record, whole, is in the control
-- topic under replay/<group>/<replay_id>. Plain MergeTree: an audit log, never collapsed.
-- from_offset is -1 when the group had no committed offset there; epoch_from/epoch_to are -1
-- when the replay did not bump the epoch.
-- {{lowcard}} is LowCardinality(String) where the server has it (not 18.16), else String.
CREATE TABLE IF NOT EXISTS replay_log (
    replay_id      String,
    replayed_at    DateTime,
    who            String,
    consumer_group {{lowcard}},
    spec           String,
    reason         String,
    actions        Array(String),
    epoch_from     Int32,
    epoch_to       Int32,
    topic          {{lowcard}},
    partition      Int32,
    from_offset    Int64,
    to_offset      Int64
) ENGINE = MergeTree
PARTITION BY toYYYYMM(replayed_at)
ORDER BY (consumer_group, replayed_at, replay_id, topic, partition)
