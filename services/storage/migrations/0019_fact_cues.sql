-- 0019: each memory's fact cues (``logic.supersession.fact_cues``) as the write decision last read them
-- (``storage.fact_cue_store``). Derived and rebuildable: a row counts only while its content hash and reader version
-- match, and it goes with its memory.
CREATE TABLE IF NOT EXISTS booku_fact_cues (
    memory_id    TEXT NOT NULL PRIMARY KEY REFERENCES booku_memory_records (memory_id) ON DELETE CASCADE,
    content_hash TEXT NOT NULL,
    reader       TEXT NOT NULL,
    cues         TEXT NOT NULL
) WITHOUT ROWID;
