-- Replay history for the dashboards: one row per partition a replay moved, newest first.
-- replay_log belongs to the replay migration (0007), which the replay command writes; it is
-- created here too, with the agreed columns, so that this view can be created whichever of the
-- two lands first (CREATE TABLE IF NOT EXISTS leaves an existing table alone).
-- Newer servers only (not here, 18.16): TTL executed_at + INTERVAL 400 DAY.
CREATE TABLE IF NOT EXISTS replay_log (
    group       String,
    topic       String,
    partition   Int32,
    from_offset Int64,
    to_offset   Int64,
    spec        String,
    who         String,
    executed_at DateTime,
    epoch       Int32
) ENGINE = MergeTree
PARTITION BY toYYYYMM(executed_at)
ORDER BY (executed_at, group, topic, partition);

-- offsets_moved: how far the group's committed offset moved (negative: rewound for a replay).
CREATE VIEW IF NOT EXISTS v_replay_history AS
SELECT
    executed_at,
    who,
    group,
    topic,
    partition,
    from_offset,
    to_offset,
    to_offset - from_offset AS offsets_moved,
    spec,
    epoch
FROM replay_log
