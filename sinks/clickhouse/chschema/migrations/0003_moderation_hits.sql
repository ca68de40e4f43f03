-- One row per dictionary match: (source_topic, request_id, phase, start). phase is '' for
-- inference results. start/end are rune offsets into the text. Versioned like the others.
-- Rendered per server like inference_results (LowCardinality, DateTime64 where available).
CREATE TABLE IF NOT EXISTS moderation_hits (
    source_topic     String,
    request_id       String,
    phase            String,
    start            UInt32,
    end              UInt32,
    word             String,
    category         {{lowcard}},
    event_time       {{time}},
    epoch            Int32,
    source_partition Int32,
    source_offset    Int64,
    version          UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(event_time)
ORDER BY (source_topic, request_id, phase, start)
