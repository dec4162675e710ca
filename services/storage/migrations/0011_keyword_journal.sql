-- 0011: a journal of keyword-index changes, so a runtime that ranks keyword hits from an in-memory copy of the
-- index (``storage.keyword_memory``) learns which rows another connection or process changed since it last looked.
-- Every statement that writes or deletes a booku_memory_fts row appends that row's rid here in the same transaction;
-- rid -1 means "the whole index was rebuilt". AUTOINCREMENT: seq never goes back, even after old entries are
-- trimmed, so a reader that finds a gap after the seq it last applied knows it missed entries and reloads.
CREATE TABLE IF NOT EXISTS booku_keyword_journal (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    rid INTEGER NOT NULL
);
