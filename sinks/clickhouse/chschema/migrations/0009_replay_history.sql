-- Replay history for the dashboards: one row per partition an executed replay moved, over the
-- audit table replay_log (migration 0007, written by backflow replay --execute).
-- offsets_moved: how far the group's committed offset moved (negative: rewound for a replay;
-- 0 where the group had no committed offset before, from_offset -1). epoch: the ingest epoch
-- the replay started (-1: the epoch was not bumped).
CREATE VIEW IF NOT EXISTS v_replay_history AS
SELECT
    replay_id,
    replayed_at AS executed_at,
    who,
    consumer_group AS group,
    topic,
    partition,
    from_offset,
    to_offset,
    if(from_offset < 0, toInt64(0), to_offset - from_offset) AS offsets_moved,
    spec,
    reason,
    actions,
    epoch_to AS epoch
FROM replay_log
