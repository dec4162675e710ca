-- 0008: the embedding cache becomes an ordinary rowid table with a UNIQUE index on its key.
--
-- Why: a WITHOUT ROWID table keeps whole rows in index B-tree pages, where SQLite stores at most ~1 KB of a row
-- inline (on 4 KB pages). Every cached vector (384 float32 = 1.5 KB plus the key) therefore spilled ~1.1 KB onto an
-- overflow page of its own, leaving most of that page empty: ~4.6 KB on disk per 1.6 KB row. A rowid table stores
-- rows up to ~4 KB inline, two of these per leaf page, and the key lives in a small separate index.
--
-- Every row is copied unchanged (vectors stay float32, bit for bit); the runner applies this file in one transaction,
-- so an interrupted upgrade leaves the old table as it was.
--
-- The index leads with text_hash: lookups pass model, mode and a list of hashes, and retraction forgets a text by
-- (mode, text_hash) for every model; both use this index, while a (model, ...) order would make the latter a scan.

CREATE TABLE booku_embedding_cache_new (
    model      TEXT NOT NULL,
    mode       TEXT NOT NULL,
    text_hash  TEXT NOT NULL,
    dimension  INTEGER NOT NULL,
    vector     BLOB NOT NULL,
    created_at REAL NOT NULL
);

INSERT INTO booku_embedding_cache_new (model, mode, text_hash, dimension, vector, created_at)
SELECT model, mode, text_hash, dimension, vector, created_at FROM booku_embedding_cache;

DROP TABLE booku_embedding_cache;

ALTER TABLE booku_embedding_cache_new RENAME TO booku_embedding_cache;

-- Built after the copy: one sort instead of 100k index inserts in random hash order.
CREATE UNIQUE INDEX idx_embedding_cache_key ON booku_embedding_cache (text_hash, mode, model);
